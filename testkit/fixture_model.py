"""A scripted stand-in for a strong (or a recorded weak) model behind chosen
roles: the demo model (``client/demo/model.py``) for every request, except
those whose ``model`` names a fixture writer, which it answers with the
fixture written for that run's question.

    fixtures = load_fixtures(Path("tests/fixtures/strong"))
    with FixtureModel(fixtures, web_url=web.base_url) as model:
        # a worker with DEEPRESEARCH_MODEL=demo-scripted and
        #   DEEPRESEARCH_MODEL_PLANNER=fixture-planner-full
        #   DEEPRESEARCH_MODEL_RESEARCHER=fixture-researcher-full
        #   DEEPRESEARCH_MODEL_REPORTER=fixture-reporter-full   (the variant after the role)
        ...
        model.asked[("full", "reporter", "olvane-revenue-growth", "", "en-US")]  # its reporter's calls

A fixture writer's model name is ``fixture-<role>`` or ``fixture-<role>-<variant>``
(one worker per variant: a run's model names are its worker's settings).
The fixture is chosen by the run's question (the request's ``# Research
question`` line, matched to a task of the built-in suite), the variant, the
run's language (the ``in <Language> (<locale>)`` of the system prompt) and, for a
researcher, the step (``# Your step`` / ``## <title>``); a plan or findings
without a variant serve every variant. A request with no
fixture (another task, a role's other prompts such as condensing, a planner
asked to plan again after the research) is the demo model's. A fixture of
several replies answers the first call with the first, the next call with the
next (a weak model asked again), the last one from then on.

Fixture texts write the corpus web's pages as ``{web}/firms/x.html``; the
placeholder is replaced with the web's base URL when served, so a fixture
cites the pages wherever the test's corpus web runs.

``calls`` counts every request by role (as the demo model does); ``asked``
every request for a fixture (``Fixture.key``), ``served`` those answered
from it (a planner asked to plan again after the research is the demo
model's); ``seen`` keeps each fixture role's
request (its messages, with the web's URL put back to ``{web}``), so a script
can capture what a role was shown (``testkit/fixture_capture.py``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from client.demo.model import DemoModel, completion
from client.demo.roles import Turn, content_text, messages, play, role_of
from workflows.languages import language_name

BUILTIN = Path(__file__).resolve().parent.parent / "client" / "evaluation" / "builtin"
WEB = "{web}"
PREFIX = "fixture-"
# The first line of each role's own prompt: a fixture answers only that prompt
# (the reporter's condensing and "what changed" calls stay the demo model's).
PROMPTS = {
    "reporter": "You write the final report",
    "planner": "You turn the user's research question into a short plan",
    "researcher": "You carry out one research step",
}
_QUESTION = re.compile(r"# Research question\n([^\n]{1,20000})")
_STEP = re.compile(r"# Your step\n## ([^\n]{1,2000})")


@dataclass(frozen=True)
class Fixture:
    """One fixture: what a role answers for one task (and variant, language
    and step)."""

    task: str
    role: str
    replies: tuple[str, ...]  # the texts, in the order a run asks for them
    variant: str = ""
    locale: str = "en-US"
    step: str = ""  # a researcher's: the step's title
    label: str = ""  # a weak fixture's: "invented" (one of its replies is) or "faithful enough"
    invented: tuple[int, ...] = ()  # a weak fixture's replies labelled invented (their indices)
    covers: tuple[str, ...] = ()  # what it shows (a strong fixture's kinds of statement)
    source: str = ""  # where it comes from
    file: str = ""  # its first file, relative to its folder

    def key(self, variant: str) -> tuple[str, str, str, str, str]:
        """Where its calls are counted: the run's variant (a plan or findings
        serve several), its role, task, step and locale."""
        return (variant, self.role, self.task, self.step, self.locale)


@dataclass
class Fixtures:
    items: list[Fixture] = field(default_factory=list)
    questions: dict[str, str] = field(default_factory=dict)  # the task's question (normalised) -> its id

    def find(self, role: str, variant: str, question: str, system: str, step: str = "") -> Fixture | None:
        """The fixture for this request: the variant's own, else (a plan or
        findings) one shared by every variant."""
        task = self.questions.get(normal(question))
        mine = [
            item
            for item in self.items
            if (item.role, item.task) == (role, task)
            and normal(item.step) == normal(step if item.step else "")
            and f"in {language_name(item.locale)}" in system
        ]
        own = [item for item in mine if item.variant == variant]
        shared = [item for item in mine if not item.variant and role != "reporter"]
        return (own or shared or [None])[0]


def normal(text: str) -> str:
    return " ".join(text.split())


def tasks(suite: Path = BUILTIN) -> dict[str, dict]:
    """The tasks of ``suite`` (a folder with ``tasks.jsonl`` and ``corpus/``:
    the built-in suite by default), by id."""
    lines = (suite / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return {task["id"]: task for task in (json.loads(line) for line in lines if line.strip())}


def load_fixtures(*folders: Path, suite: Path = BUILTIN) -> Fixtures:
    """The fixtures listed in each folder's ``index.json``: entries
    ``{"task", "role", "file"}`` (or ``"files"``: several replies, in order)
    and optionally ``variant``, ``locale``, ``step``, ``label``, ``invented``
    (the numbers, from 1, of the replies labelled invented), ``covers``,
    ``source``; their tasks are ``suite``'s."""
    suite_tasks = tasks(suite)
    found = Fixtures(questions={normal(task["question"]): task_id for task_id, task in suite_tasks.items()})
    for folder in folders:
        for entry in json.loads((folder / "index.json").read_text(encoding="utf-8")):
            names = entry.get("files") or [entry["file"]]
            default = "zh-CN" if re.search(r"[\u4e00-\u9fff]", suite_tasks[entry["task"]]["question"]) else "en-US"
            found.items.append(
                Fixture(
                    task=entry["task"],
                    role=entry["role"],
                    replies=tuple((folder / name).read_text(encoding="utf-8") for name in names),
                    variant=entry.get("variant", ""),
                    locale=entry.get("locale") or default,
                    step=entry.get("step", ""),
                    label=entry.get("label", ""),
                    invented=tuple(n - 1 for n in entry.get("invented", ())),
                    covers=tuple(entry.get("covers", ())),
                    source=entry.get("source", ""),
                    file=names[0],
                )
            )
    return found


def writer(model: object) -> tuple[str, str] | None:
    """(role, variant) of a fixture writer's model name, else None."""
    if not isinstance(model, str) or not model.startswith(PREFIX):
        return None
    role, _, variant = model[len(PREFIX) :].partition("-")
    return (role, variant) if role in PROMPTS else None


class FixtureModel(DemoModel):
    """The demo model, with fixture writers behind the roles named so."""

    name = "fixture model"

    def __init__(self, fixtures: Fixtures, web_url: str, port: int = 0) -> None:
        super().__init__(port)
        self.fixtures = fixtures
        self.web_url = web_url.rstrip("/")
        self.asked: Counter[tuple[str, ...]] = Counter()  # requests for a fixture, by ``Fixture.key``
        self.served: Counter[tuple[str, ...]] = Counter()  # of them, answered from the fixture
        self.seen: list[dict] = []

    def complete(self, request: dict) -> dict:
        turn = self._turn(request)
        with self._lock:
            self.calls[turn.role] = self.calls.get(turn.role, 0) + 1
            number = next(self._ids)
        return completion(request, turn, number)

    def _turn(self, request: dict) -> Turn:
        named = writer(request.get("model"))
        system = next((content_text(m.get("content")) for m in messages(request) if m.get("role") == "system"), "")
        if named is None or role_of(request) != named[0] or PROMPTS[named[0]] not in system.split("\n", 1)[0]:
            return play(request)
        role, variant = named
        first = next((content_text(m.get("content")) for m in messages(request) if m.get("role") == "user"), "")
        question = _QUESTION.search(first)
        step = _STEP.search(first)
        fixture = self.fixtures.find(
            role, variant, question.group(1) if question else "", system, step.group(1) if step else ""
        )
        own = fixture is not None and not (role == "planner" and _replanning(request))
        with self._lock:
            self.seen.append({"role": role, "variant": variant, "fixture": fixture, "request": self._unplaced(request)})
            if fixture is None:
                return play(request)
            key = fixture.key(variant)
            self.asked[key] += 1
            served = self.served[key]
            self.served[key] += own
        if not own:
            return play(request)
        text = fixture.replies[min(served, len(fixture.replies) - 1)]
        return Turn(role, text.replace(WEB, self.web_url))

    def _unplaced(self, request: dict) -> dict:
        """The request with the web's address written as ``{web}``."""
        return json.loads(json.dumps(request, ensure_ascii=False).replace(self.web_url, WEB))


def _replanning(request: dict) -> bool:
    """A planner asked to plan again after the research, or to revise its
    plan for the user (a planner asked again for a valid plan is not)."""
    last = next((content_text(m.get("content")) for m in reversed(messages(request)) if m.get("role") == "user"), "")
    return last.startswith("# Findings") or "asks for changes" in last[:200]
