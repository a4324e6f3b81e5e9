"""Reading a long output through a small window (pure functions): every part
fits, the parts together hold the whole text, and the default view holds the
start and what the step is about."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from activities import tokens
from activities.reading import parts, passages, rank, view

PAGE = "\n\n".join(f"Paragraph {i}: " + "tide granite gull ferry " * 20 for i in range(400))
PAGE += "\n\nThe lamp burned 77 gallons of oil."


def test_a_long_page_is_read_part_by_part_and_searched():
    first = view(PAGE, 1000, source="http://x/page", part=1)
    assert first.startswith("[Part 1 of ") and 'Next: read_page(url="http://x/page", part=2)' in first
    assert "Paragraph 0:" in first
    total = int(re.search(r"Part 1 of (\d+)", first).group(1))
    last = view(PAGE, 1000, source="http://x/page", part=total)
    assert "77 gallons" in last and "This is the last part" in last
    assert view(PAGE, 1000, source="http://x/page", part=total + 5) == last  # past the end: the last part
    found = view(PAGE, 1000, source="http://x/page", query="lamp oil gallons")
    assert "77 gallons" in found and found.startswith("[Passages of http://x/page matching")
    assert "Nothing" in view(PAGE, 1000, source="http://x/page", query="zeppelin")


def test_the_default_view_holds_the_start_and_the_passages_the_step_is_about():
    shown = view(PAGE, 1000, source="http://x/page", hints="How much oil did the lamp burn")
    assert "Paragraph 0:" in shown and "77 gallons" in shown
    assert "is long:" in shown and "read_page(" in shown and "find_in_page(" in shown
    assert tokens.count(shown) <= 1000 + 60
    assert view("short text", 1000) == "short text"


def test_chinese_without_blank_lines_is_cut_into_passages_and_found_by_bigrams():
    text = "天气晴朗，海风吹过岩石。" * 3000 + "灯塔看守人在1911年登记了4417艘船。" + "孩子们在学校读书。" * 3000
    chunks = passages(text, 100)
    assert all(tokens.count(c) <= 100 for c in chunks) and "".join(chunks) == text.replace(" ", "")
    best = rank(chunks, "灯塔看守人登记了多少艘船")[0]
    assert "4417" in chunks[best]
    shown = view(text, 2000, hints="灯塔看守人登记了多少艘船")
    assert "4417艘船" in shown and tokens.count(shown) <= 2000 + 60


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=300), min_size=1, max_size=40),
    st.integers(min_value=200, max_value=3000),
)
def test_every_part_fits_and_the_parts_hold_the_whole_text(paragraphs, share):
    text = "\n\n".join(paragraphs)
    book = parts(text, share)
    assert all(tokens.count(p) <= share for p in book)
    assert re.sub(r"\s+", "", "".join(book)) == re.sub(r"\s+", "", text)  # nothing lost, nothing reordered
    for number in (1, len(book)):
        assert tokens.count(view(text, share, source="u", part=number)) <= share + 40
