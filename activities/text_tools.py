"""Tool use for models without native tool calling (DEEPRESEARCH_TOOL_CALLING=json).

The tools are described in the system prompt, the model replies with a JSON
object naming the calls it wants, and earlier calls and results are written
into the conversation as plain text. Pure functions on OpenAI-style dicts.
"""

from __future__ import annotations

import hashlib
import json
import re

from workflows.model_output import load_json, unescape_entities
from workflows.models import ToolCall

RESULT_PREFIX = "[result of tool call "


def instruction(schemas: list[dict], allow_calls: bool, json_answer: bool = False) -> str:
    """The tools described for the system prompt. ``json_answer``: the
    request is in JSON mode (the answer itself is a JSON object), so the
    answer without a tool is that object, not plain text."""
    answer = "the JSON object your instructions ask for" if json_answer else "plain text"
    if not allow_calls:
        return f"\n\n## Tools\n\nDo not call any tool now: reply with your final answer as {answer}."
    lines = ["\n\n## Tools\n", "You can call these tools:"]
    for schema in schemas:
        fn = schema["function"]
        params = ", ".join(fn["parameters"].get("properties", {}))
        lines.append(f"- `{fn['name']}({params})`: {fn['description']}")
    without = (
        'the JSON object your instructions ask for, without a "tool_calls" key'
        if json_answer
        else "plain text, not JSON"
    )
    lines.append(
        '\nTo call tools, reply with JSON only: {"tool_calls": [{"name": "<tool>", "arguments": {...}}]} '
        f"(several calls allowed). To answer without a tool, reply with {without}."
    )
    return "\n".join(lines)


def as_text(messages: list[dict]) -> list[dict]:
    """Rewrite tool calls and tool results as plain assistant and user turns."""
    names = {}
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = [
                {
                    "name": c["function"]["name"],
                    "arguments": load_json(c["function"]["arguments"] or "{}", repair=False)[0] or {},
                }
                for c in message["tool_calls"]
            ]
            names.update({c["id"]: c["function"]["name"] for c in message["tool_calls"]})
            out.append({"role": "assistant", "content": json.dumps({"tool_calls": calls}, ensure_ascii=False)})
        elif message["role"] == "tool":
            name = names.get(message.get("tool_call_id"), "tool")
            out.append({"role": "user", "content": f"{RESULT_PREFIX}{name}]\n{message['content']}"})
        else:
            out.append(message)
    return out


# A blank run before a closing fence is matched from its start only (the
# look-behind): tried from every blank of a long run, it took quadratic time.
_FENCE = re.compile(r"^```(?:json)?\s*|(?<!\s)\s*```$", re.MULTILINE)


def parse_reply(text: str, allowed: list[str]) -> tuple[str, list[ToolCall]]:
    """(answer, calls): calls when the reply is a JSON object with tool_calls."""
    stripped = _FENCE.sub("", text.strip()).strip()
    if not stripped.startswith("{") or "tool_calls" not in stripped:
        return text, []
    data, _ = load_json(stripped)  # never raises, bounded in size and depth
    raw_calls = data.get("tool_calls") if isinstance(data, dict) else None
    if not isinstance(raw_calls, list):
        return text, []
    calls = []
    for n, call in enumerate(raw_calls):
        if isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"] in allowed:
            arguments = unescape_entities(json.dumps(call.get("arguments") or {}, ensure_ascii=False))
            digest = hashlib.sha256(f"{n}{call['name']}{arguments}".encode()).hexdigest()[:12]
            calls.append(ToolCall(id=f"call_{digest}", name=call["name"], arguments=arguments))
    return ("" if calls else text), calls
