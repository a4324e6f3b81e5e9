"""Replies cut short: at the output bound (``finish_reason: length``) or
where the model began repeating itself (``activities/llm_stream.py``).
A text reply gets a note saying so; a plan loses its unfinished last step."""

from __future__ import annotations

import json

from workflows.model_output import PlanReading, load_json, read_plan

CUT = ("length", "repetition")


def note(reason: str, role: str) -> str:
    """The note a cut text reply (a report, an answer) ends with."""
    why = (
        f"the output limit (DEEPRESEARCH_MAX_OUTPUT_TOKENS_{role.upper()})"
        if reason == "length"
        else "the point where the model began repeating itself"
    )
    return f"\n\n*[This reply was cut off at {why}.]*"


def _whole(step: object) -> bool:
    return isinstance(step, dict) and all(step.get(k) for k in ("title", "description", "step_type"))


def cut_plan(content: str, max_steps: int, locale: str, topic: str, role: str, prompt: str = "") -> PlanReading:
    """A plan whose reply was cut: without its unfinished last step (the JSON
    did not close, so the step being written when the reply was cut is
    suspect, even where lenient reading could guess what it meant), or as it
    is; else the problem says to write less."""
    data, _ = load_json(content)
    steps = data.get("steps") if isinstance(data, dict) else None
    unfinished = load_json(content, repair=False)[0] is None or not _whole(steps[-1] if steps else None)
    if isinstance(steps, list) and len(steps) > 1 and unfinished:
        shorter = read_plan(json.dumps({**data, "steps": steps[:-1]}), max_steps, locale, topic, prompt)
        if not shorter.problem:
            return shorter
    reading = read_plan(content, max_steps, locale, topic, prompt)
    if not reading.problem:
        return reading
    limit = f"DEEPRESEARCH_MAX_OUTPUT_TOKENS_{role.upper()}"
    reading.problem = f"{reading.problem} (the reply was cut off at its output limit, {limit}: write a shorter plan)"
    return reading
