"""Does a model's reply repeat its own request? Pure, linear checks.

A weak model asked to write a report, findings or a plan sometimes answers
with its instructions ("You are the reporter of a deep-research team…") or
with the prompt's example ("a short title for the research"). Such a reply is
a failed reply, not content: the model activity measures how much of the
reply is the request's own text (``echo_share``, reported in
``ModelReply.echo``), the plan reader refuses a plan whose text is the
prompt's (``copies_prompt``), and the workflow decides (``echoed``). The
evaluation's scorer uses the same measure (``EchoMask``) so that a report
scores nothing for text that only repeats its request.

Words are runs of letters or digits; in Chinese, Japanese and Korean each
character is a word. A reply's words are compared by runs of ``N`` words
(word n-grams) with the source's: a set lookup per run, linear in both.
"""

from __future__ import annotations

import re

N = 4  # words per run compared
ECHO_LIMIT = 0.5  # a reply with at least this share of its runs in its instructions is an echo
MAX_CHARS = 400_000  # of a reply (or source) looked at

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# One class per alternative, no nesting: each character is looked at once.
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded."""
    return _WORD.findall(text[:MAX_CHARS].casefold())


def runs(tokens: list[str], n: int = N) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def echo_share(reply: str, source: str) -> float:
    """The share of the reply's runs of ``N`` words that occur in ``source``:
    near 1 for a reply that repeats its instructions, near 0 for one in its
    own words. A reply shorter than ``N`` words is too short to tell: 0."""
    said = words(reply)
    if len(said) < N:
        return 0.0
    known = runs(words(source))
    total = len(said) - N + 1
    return round(sum(1 for i in range(total) if tuple(said[i : i + N]) in known) / total, 4)


def copied_units(text: str, known: set[tuple[str, ...]]) -> tuple[int, int]:
    """(runs found in the source, runs) of one short text, such as a plan's
    title, by runs of ``N`` words; a text of fewer words tells nothing ("Step
    2" is in any prompt that numbers its rules). ``known``: the source's runs."""
    said = words(text)
    total = len(said) - N + 1
    if total < 1:
        return 0, 0
    return sum(1 for i in range(total) if tuple(said[i : i + N]) in known), total


def copies_prompt(parts: list[str], steps: list[list[str]], prompt: str) -> str | None:
    """Why a plan copies its prompt, or None. ``parts``: the plan's own
    texts (title, thought); ``steps``: each step's texts (title,
    description). A plan copies the prompt when most of its text is the
    prompt's, or when one of its steps is (a placeholder step)."""
    if not prompt.strip():
        return None
    known = runs(words(prompt))
    found = total = 0
    for n, texts in enumerate(steps):
        counts = [copied_units(text, known) for text in texts]
        step_found, step_total = sum(c[0] for c in counts), sum(c[1] for c in counts)
        if step_total and step_found / step_total >= ECHO_LIMIT:
            return f"step {n + 1} copies the prompt's example ({' / '.join(t[:60] for t in texts if t)})"
        found, total = found + step_found, total + step_total
    for text in parts:
        part_found, part_total = copied_units(text, known)
        found, total = found + part_found, total + part_total
    if total and found / total >= ECHO_LIMIT:
        return "its text is the prompt's own (its example or instructions), not a plan for the question"
    return None


class EchoMask:
    """Text that repeats its request, masked out: every run of ``N`` or more
    words that also occurs in one of the ``sources`` (a question, prompts)."""

    def __init__(self, sources: list[str]) -> None:
        self.known: set[tuple[str, ...]] = set()
        for source in sources:
            self.known |= runs(words(source))

    def own_words(self, text: str) -> tuple[str, int, int]:
        """(the text with repeated runs replaced by a line break, its words
        not repeated, its words). Linear: each word is looked at in ``N``
        runs at most."""
        spans = [(m.start(), m.end()) for m in _WORD.finditer(text[:MAX_CHARS])]
        said = [text[a:b].casefold() for a, b in spans]
        covered = [False] * len(said)
        for i in range(len(said) - N + 1):
            if tuple(said[i : i + N]) in self.known:
                for j in range(i, i + N):
                    covered[j] = True
        if not any(covered):
            return text, len(said), len(said)
        out, position, n = [], 0, 0
        while n < len(said):
            if not covered[n]:
                n += 1
                continue
            start = n
            while n < len(said) and covered[n]:
                n += 1
            out += [text[position : spans[start][0]], "\n"]
            position = spans[n - 1][1]
        out.append(text[position:])
        return "".join(out), covered.count(False), len(said)


def echoed(echo: float, has_tool_calls: bool = False) -> bool:
    """The workflow's decision: a reply without tool calls whose text is
    mostly its request's instructions failed."""
    return echo >= ECHO_LIMIT and not has_tool_calls


def measure(content: str, instructions: str, locale: str) -> dict[str, float | None]:
    """What the workflow judges a reply by (``ModelReply.echo`` and
    ``in_locale``): how much of it repeats its instructions, and how much is
    in the locale's script. Linear; the model activity runs it off the loop."""
    from workflows.languages import script_share

    return {"echo": echo_share(content, instructions), "in_locale": script_share(content, locale)}
