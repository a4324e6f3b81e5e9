"""Task files of `deepresearch eval`: validated line by line, one clear line
naming file:line for a bad one; resources relative to the file's folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from client.errors import CliError
from client.evaluation.suite import load_suite, preferred_port
from client.evaluation.tasks import load_tasks, parse_only
from workflows.eval_models import Number

GOOD = {"id": "t1", "question": "Who?", "facts": [{"id": "f1", "any": ["Ada"]}]}


def write(folder: Path, *lines: object) -> Path:
    path = folder / "tasks.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at column 2)"),
        ("[1, 2]", "not a JSON object"),
        ({"id": "t2"}, "question: Field required"),
        ({**GOOD, "id": "t 2"}, "id: String should match pattern"),
        ({**GOOD, "id": "t2", "facts": [{"id": "f1", "any": []}]}, "facts.0.any: List should have at least 1 item"),
        ({**GOOD, "id": "t2", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({**GOOD, "id": "t2", "options": {"max_step_nums": 3}}, "options: max_step_nums: Extra inputs"),
        ({**GOOD, "id": "t2", "options": {"max_step_num": 0}}, "options: max_step_num: Input should be greater"),
        ({**GOOD, "id": "t2", "resources": ["missing.md"]}, "resource 'missing.md' not found"),
        ({**GOOD, "id": "t1"}, "task id 't1' is already used on line 1"),
        ({**GOOD, "id": "t2", "facts": [{"id": "f", "any": ["a"]}, {"id": "f", "any": ["b"]}]}, "fact id 'f' appears"),
    ],
)
def test_a_bad_line_names_its_file_and_line(tmp_path: Path, line: object, problem: str):
    path = write(tmp_path, GOOD, "", line)
    with pytest.raises(CliError) as caught:
        load_tasks(path)
    assert str(caught.value).startswith(f"{path}:3: {problem}")
    assert "\n" not in str(caught.value)


def test_resources_are_relative_to_the_task_files_folder(tmp_path: Path):
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "memo.md").write_text("# Memo\n")
    path = write(tmp_path, {**GOOD, "resources": ["local/memo.md"]})
    (task,) = load_tasks(path)
    assert task.resources == [str((tmp_path / "local" / "memo.md").resolve())]


def test_a_number_fact_in_either_form(tmp_path: Path):
    path = write(
        tmp_path,
        {**GOOD, "facts": [{"id": "f1", "number": 41.3, "tolerance": 0.5}, {"id": "f2", "any": [{"number": 7}]}]},
    )
    (task,) = load_tasks(path)
    assert task.facts[0].any == [Number(number=41.3, tolerance=0.5)]
    assert task.facts[1].any == [Number(number=7, tolerance=0)]


def test_only_picks_tasks_in_file_order_and_names_an_unknown_one(tmp_path: Path):
    path = write(tmp_path, GOOD, {**GOOD, "id": "t2"}, {**GOOD, "id": "t3"})
    assert [t.id for t in load_tasks(path, parse_only("t3, t1"))] == ["t1", "t3"]
    with pytest.raises(CliError, match=r"no task 't9' in .*tasks.jsonl \(its tasks: t1, t2, t3\)"):
        load_tasks(path, ["t9"])


def test_an_empty_or_missing_file(tmp_path: Path):
    with pytest.raises(CliError, match="no tasks in the file"):
        load_tasks(write(tmp_path, ""))
    with pytest.raises(CliError, match="no such task file"):
        load_tasks(tmp_path / "nope.jsonl")


def test_the_builtin_suite_loads_with_every_facts_sources():
    suite = load_suite(argparse.Namespace(tasks=None, corpus=None, suite=None, only=None))
    assert suite.name == "builtin" and len(suite.tasks) >= 15 and len(suite.documents) >= 40
    paths = {document.path for document in suite.documents}
    for task in suite.tasks:
        for fact in task.facts:
            assert set(fact.sources) <= paths
    assert any(task.unanswerable for task in suite.tasks) and any(task.resources for task in suite.tasks)


def test_the_suites_offline_web_keeps_its_port_across_attaches():
    assert preferred_port("eval-x-1") == preferred_port("eval-x-1")
    # Below Linux's ephemeral ports, where outgoing connections take theirs.
    assert all(20_000 <= preferred_port(f"eval-x-{n}") < 32_768 for n in range(500))


def test_the_offline_web_takes_another_port_when_its_own_is_held(tmp_path: Path):
    """A socket merely bound to the preferred port (an outgoing connection's
    own port looks like this: nothing listens) made `eval` die with a
    traceback; the web now starts elsewhere and serves the corpus."""
    import socket
    import urllib.request

    from client.evaluation.web import CorpusWeb

    (tmp_path / "a.md").write_text("# Alpha\n\nThe alpha page.\n")
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    held = holder.getsockname()[1]
    try:
        with pytest.raises(OSError):
            CorpusWeb(tmp_path, port=held).start()
        with CorpusWeb(tmp_path, port=held, any_port_if_taken=True) as web:
            assert web.port != held
            with urllib.request.urlopen(web.url_for("a.md"), timeout=10) as page:
                assert "The alpha page." in page.read().decode()
    finally:
        holder.close()


def test_the_eval_worker_keeps_the_users_models_and_searches_the_offline_web(monkeypatch: pytest.MonkeyPatch):
    from client.evaluation.suite import eval_settings
    from infra.settings import Settings

    monkeypatch.delenv("DEEPRESEARCH_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("DEEPRESEARCH_CONTEXT_WINDOW_JUDGE", raising=False)
    base = Settings.from_env(
        {"OPENAI_API_KEY": "k", "DEEPRESEARCH_MODEL": "small", "DEEPRESEARCH_SEARCH_ENGINE": "searxng"}
    )
    settings = eval_settings(base, "http://127.0.0.1:4321", "gpt-4o")
    assert settings.model_for("reporter") == "small" and settings.model_for("judge") == "gpt-4o"
    assert settings.context_window_for("judge") == 128_000
    assert (settings.search_engine, settings.tavily_base_url, settings.allow_private_urls) == (
        "tavily",
        "http://127.0.0.1:4321",
        True,
    )
    assert settings.crawl_only == ("http://127.0.0.1:4321",)  # its runs read the offline web only
    settings.check()  # no SEARXNG_URL needed
    monkeypatch.setenv("DEEPRESEARCH_CONTEXT_WINDOW_JUDGE", "8192")
    assert eval_settings(base, "http://x", "gpt-4o").context_window_for("judge") == 8192


def test_a_task_file_saved_with_a_byte_order_mark_loads(tmp_path: Path):
    """Windows editors save UTF-8 with a BOM: it was refused as "not JSON" on line 1."""
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8-sig")
    assert [t.id for t in load_tasks(path)] == ["t1"]


@pytest.mark.parametrize("where", ["/etc/passwd", "../secret.md", "local/../../secret.md", "link.md", "linked"])
def test_a_resource_outside_the_task_files_folder_is_refused_in_one_line(tmp_path: Path, where: str):
    """Issue 27, item 5: "/etc/passwd" or "../secret.md" in a task file was
    read and indexed for the model; a link inside the folder to a file or
    folder outside it counts as outside too."""
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n")
    folder = tmp_path / "suite"
    (folder / "local").mkdir(parents=True)
    (folder / "link.md").symlink_to(outside)
    (folder / "linked").symlink_to(tmp_path)
    path = write(folder, GOOD, {**GOOD, "id": "t2", "resources": ["local", where]})
    with pytest.raises(CliError) as caught:
        load_tasks(path)
    line = str(caught.value)
    assert line.startswith(f"{path}:2: resource {where!r} leads outside the task file's folder") and "\n" not in line


def test_eval_refuses_such_a_task_file_before_anything_starts(tmp_path: Path):
    """The CLI: one line, exit 1, before it looks for a model or a Temporal server."""
    import subprocess
    import sys

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.md").write_text("# A\n\nAda.\n")
    path = write(tmp_path, {**GOOD, "resources": ["/etc/passwd"]})
    env = {"PATH": "/usr/bin:/bin", "DEEPRESEARCH_DATA_DIR": str(tmp_path / "data"), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "eval", "--tasks", str(path), "--corpus", str(tmp_path / "corpus")],
        cwd=Path(__file__).resolve().parent.parent,
        env=env | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {path}:1: resource '/etc/passwd' leads outside the task file's folder {tmp_path.resolve()} "
        "(to /etc/passwd): not read"
    ]
    assert not (tmp_path / "data" / "temporal.db").exists()


def test_a_task_holding_unicode_line_separators_loads_as_written(tmp_path: Path):
    """Issue 27: JSON Lines ends a line at LF only. A question holding U+2028,
    U+2029 or U+0085 unescaped (as many JSON encoders write them) is one line,
    not two halves called "not JSON"."""
    question = "Who built\u2028the light\u2029at Lantern Rock,\x85and when?"
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**GOOD, "question": question}, ensure_ascii=False) + "\n", encoding="utf-8")
    (task,) = load_tasks(path)
    assert task.question == question.replace("\x85", "\n")  # NEL: a newline, as everywhere text is cleaned
