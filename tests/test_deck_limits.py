"""Decks stay small and quick whatever the slides model writes (issue 20,
item 2), and take any text (item 6): at most ``MAX_SLIDES`` slides of
sections (what was left out is said), built in a child process that is
killed after a time limit, with what XML cannot hold left out."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pptx import Presentation
from temporalio.exceptions import ApplicationError

from activities.deck import MAX_SLIDES, SlideSpec, build_in_child, build_pptx
from workflows.clean import clean_text
from workflows.models import Citation
from workflows.side_models import DeckRequest

ROOT = Path(__file__).resolve().parent.parent


def test_six_thousand_slides_are_cut_to_the_limit_and_the_cut_is_said():
    code = """
        from activities.deck import build_pptx, parse_marp
        markdown = "\\n---\\n".join(f"# Slide {n}\\n- point\\n<!-- note {n} -->" for n in range(6000))
        data, count, cut = build_pptx(parse_marp(markdown), "T", [])
        print(count)
        print(cut)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:  # the old builder took minutes (82 s on an idle machine) and had no limit
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail("building 6,000 slides still runs after 120 s")
    assert done.returncode == 0, done.stderr[-2000:]
    count, cut = done.stdout.splitlines()
    assert int(count) == 1 + MAX_SLIDES
    assert "stops at 100 slides" in cut and "5,900 of 6,000 sections" in cut and "Slide 100" in cut


def test_each_slide_keeps_its_own_notes_when_parts_are_numbered_as_added():
    slides = [SlideSpec(title=f"S{n}", bullets=[(0, f"b{n}")], notes=f"note {n}") for n in range(30)]
    data, count, cut = build_pptx(slides, "Deck", [Citation(url="https://a.org", title="A")])
    deck = Presentation(io.BytesIO(data))
    assert count == len(deck.slides) == 32 and cut == ""
    notes = [s.notes_slide.notes_text_frame.text for s in list(deck.slides)[1:31]]
    assert notes == [f"note {n}" for n in range(30)]


def test_text_xml_cannot_hold_never_breaks_a_deck():
    hostile = "a\uffffb\ufffe\x01\x0bc\ud800"
    slides = [SlideSpec(title=hostile, bullets=[(0, hostile)], table=[[hostile], [hostile]], notes=hostile)]
    data, count, _ = build_pptx(slides, "Title \uffff", [Citation(url="https://a.org/\ufffe", title=hostile)])
    deck = Presentation(io.BytesIO(data))
    assert count == 4 and "Title" in deck.slides[0].shapes[0].text_frame.text
    assert "abc" in deck.slides[2].shapes[1].text_frame.text


def test_clean_text_drops_c1_controls_and_xml_noncharacters():
    assert clean_text("a\x9b31mb\x85c\ufffe\uffffd\x80\x9f") == "a31mb\ncd"
    assert clean_text("plain é 中文 \t\n") == "plain é 中文 \t\n"
    assert DeckRequest(markdown="# T", title="x\uffff\x9b").title == "x"


async def test_a_deck_is_built_in_a_child_process_that_is_stopped_at_its_limit():
    request = DeckRequest(markdown="# One\n- a\n---\n# Two\n- b", title="T")
    data, count, cut = await build_in_child(request)
    assert count == 3 and cut == "" and len(Presentation(io.BytesIO(data)).slides) == 3
    with pytest.raises(ApplicationError, match="longer than"):
        await build_in_child(request, max_seconds=0.001)
    with pytest.raises(ApplicationError, match="no slides") as refused:
        await build_in_child(DeckRequest(markdown="   "))
    assert refused.value.non_retryable


def test_no_c1_control_reaches_the_terminal_from_the_cli():
    code = "from client.terminal_text import guard_terminal; guard_terminal(); print('a\\x9b31mb\\x85c'); "
    code += "import sys; print('e\\x9b', file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60
    )
    assert done.returncode == 0 and done.stdout == b"a31mb\nc\n" and done.stderr == b"e\n"
    cli = subprocess.run(
        [sys.executable, "-m", "client.cli", "status", "--help"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert cli.returncode == 0 and b"status" in cli.stdout


def test_an_id_s_escape_sequences_never_reach_the_terminal_but_rich_s_colours_do():
    """Another user's run id, title or memo may hold ESC sequences: OSC 52
    (writes the clipboard), OSC 0 (the window title), DCS, shift-out. The
    CLI's output keeps Rich's own colours and links, and nothing else."""
    hostile = "run\x1b]52;c;ZXZpbA==\x07-\x1b]0;pwned\x1b\\-\x1bP1q\x1b\\-\x0e-\x7f-x\x1b"
    code = (
        "from client.terminal_text import guard_terminal; guard_terminal()\n"
        "from rich.console import Console; from rich.table import Table\n"
        "console = Console(force_terminal=True, color_system='standard', width=200)\n"
        f"table = Table('id'); table.add_row({hostile!r}); console.print(table)\n"
        "console.print('[red]alarm[/red] [link=https://example.org/a]a link[/link]')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "run]52;c;ZXZpbA==-]0;pwned\\-P1q\\---x" in out  # shown as text, not obeyed
    escapes = re.findall(r"\x1b(.)", out)
    assert set(escapes) <= {"[", "]", "\\"}
    assert "\x1b]8;id=" in out and "https://example.org/a" in out  # Rich's link
    assert "\x1b[31malarm" in out  # Rich's colour
    assert not re.search(r"\x1b\](?!8;)", out)  # no OSC but links
    assert not any(c in out for c in "\x0e\x07\x7f")
