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


def cut_plan(content: str, max_steps: int, locale: str, topic: str, role: str) -> PlanReading:
    """A plan whose reply was cut: read as it is; if its unfinished last step
    spoils it, without that step; else the problem says to write less."""
    reading = read_plan(content, max_steps, locale, topic)
    if not reading.problem:
        return reading
    data, _ = load_json(content)
    if isinstance(data, dict) and isinstance(data.get("steps"), list) and len(data["steps"]) > 1:
        shorter = read_plan(json.dumps({**data, "steps": data["steps"][:-1]}), max_steps, locale, topic)
        if not shorter.problem:
            return shorter
    limit = f"DEEPRESEARCH_MAX_OUTPUT_TOKENS_{role.upper()}"
    reading.problem = f"{reading.problem} (the reply was cut off at its output limit, {limit}: write a shorter plan)"
    return reading
