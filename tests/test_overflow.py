"""Reading a provider's "context length exceeded" (pure functions): which
errors are one, and the window the next try is fitted to."""

from __future__ import annotations

import pytest

from activities.overflow import MIN_WINDOW, is_overflow, smaller_window

# What providers say, as their OpenAI-compatible endpoints put it.
SAID = {
    "openai": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
    "tokens. Please reduce the length of the messages. context_length_exceeded",
    "vllm": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in "
    "the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    "vllm-new": "The decoder prompt (length 5000) is longer than the maximum model length of 4096.",
    "llama.cpp": "{'code': 400, 'message': 'the request exceeds the available context size, try increasing it', "
    "'type': 'exceed_context_size_error', 'n_prompt_tokens': 5000, 'n_ctx': 4096}",
    "anthropic": "prompt is too long: 208000 tokens > 200000 maximum",
    "mistral": "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    "tgi": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. Given: 9000 `inputs` "
    "tokens and 0 `max_new_tokens`",
    "gemini": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
}


@pytest.mark.parametrize("provider", SAID)
def test_every_providers_wording_is_an_overflow_with_a_smaller_window(provider):
    said = SAID[provider]
    assert is_overflow(400, said)
    new = smaller_window(1_000_000, said, sent=900_000)
    assert MIN_WINDOW <= new < 1_000_000


def test_the_stated_window_is_used_and_scaled_when_the_provider_counts_more_than_we_do():
    # We thought we sent 6,000 tokens into a 16k window; it counted 9,000 of an 8,192 window.
    assert smaller_window(16_000, SAID["openai"], sent=6_000) == int(8_192 * 6_000 / 9_000)
    # It counts no more than we do: its stated window as it is.
    assert smaller_window(16_000, SAID["openai"], sent=12_000) == 8_192
    # vLLM's count of the messages alone, not messages + completion.
    assert smaller_window(8_000, SAID["vllm"], sent=2_000) == int(4_096 * 2_000 / 4_000)


def test_a_window_is_always_smaller_than_the_one_refused():
    # It states a window above ours, but counted far more than we estimated.
    assert smaller_window(150_000, SAID["anthropic"], sent=100_000) == int(150_000 * 100_000 / 208_000)
    # It states a window above ours and counted no more: shrink anyway.
    assert smaller_window(8_000, "maximum context length is 20000 tokens", sent=7_000) == 7_200
    assert smaller_window(8_000, "context length exceeded", sent=7_000) == 6_000
    assert smaller_window(1_100, "context length exceeded", sent=900) == MIN_WINDOW


def test_a_stated_window_far_above_what_was_sent_is_not_learned():
    # llama-cpp-python answered a ~600-token request (its tool-call handler
    # looped) with this; before, the run learned a 1,024-token window from it.
    said = "This model's maximum context length is 8192 tokens (8192 in the messages, 0 in the completion)"
    assert is_overflow(400, said)
    assert smaller_window(8_192, said, sent=600) is None
    assert smaller_window(8_192, said, sent=600, asked=1_024) is None
    # It counted 14 times what we sent: not about this request either.
    assert smaller_window(32_000, "prompt is too long: 9000 tokens > 8192 maximum", sent=640) is None
    # What was sent and asked for is near the stated window: an overflow.
    assert smaller_window(8_192, "maximum context length is 8192 tokens", sent=6_000, asked=2_048) == 7_372


@pytest.mark.parametrize(
    "status, said",
    [
        (400, "Invalid value for 'tool_choice'"),
        (400, "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"),
        (401, "This model's maximum context length is 8192 tokens."),  # not a 400: not ours to refit
        (429, "too many tokens per minute"),
    ],
)
def test_other_errors_are_not_overflows(status, said):
    assert not is_overflow(status, said)
