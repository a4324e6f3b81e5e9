"""The model endpoint as this worker comes to know it: one chat completion
sent, streamed or not, with what the endpoint turned out to accept.

Learned per worker, from the endpoint's answers: the name of the output
bound (``max_tokens``, or ``max_completion_tokens`` for OpenAI's reasoning
models), whether it takes ``stream_options``, and whether it can stream a
tool call. llama-cpp-python's ``chatml-function-calling`` answers a streamed
tool call with an empty stream ("Automatic streaming tool choice is not
supported"), and one not streamed ignores ``max_tokens`` and the client
hanging up; so its tool calls are then made as text instead (the tools
described in the prompt, as DEEPRESEARCH_TOOL_CALLING=json does): streamed,
bounded, cut on silence (``ToolStreamRefused``; activities/llm.py).

A call not streamed is bounded by DEEPRESEARCH_MODEL_TIMEOUT in all. A
server may go on writing such an answer after we hang up (llama-cpp-python
does, and answers nothing else meanwhile), so the next call not streamed
first waits until the server answers ``GET /models`` again, rather than
queue behind the answer nobody reads.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import openai
from openai import AsyncOpenAI
from temporalio import activity

from activities import llm_stream
from activities.llm_stream import Completion, EmptyStream, Silence, ToolStreamRefused
from infra.settings import Settings

# At most this long (or twice DEEPRESEARCH_MODEL_TIMEOUT) a call waits for the
# server to finish an abandoned answer: a small model on a busy CPU writing to
# the end of an 8,192-token window (llama-cpp-python's tool calls ignore
# max_tokens when not streamed) at about 15 tokens a second.
BUSY_WAIT = 600.0
_REJECTED_PARAMETER = re.compile(r"unsupported|not supported|unrecognized|unknown|not permitted|instead|extra")


class ModelEndpoint:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Streamed calls time out on silence, calls not streamed after
        # DEEPRESEARCH_MODEL_TIMEOUT in all (llm_stream); the client's own
        # timeout is only the backstop.
        backstop = max(settings.model_timeout, settings.model_idle_timeout) + 30
        self.client = AsyncOpenAI(
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.openai_base_url,
            max_retries=0,  # Temporal owns retrying
            timeout=backstop,
        )
        self.bound_name = "max_tokens"  # or "max_completion_tokens" (OpenAI's reasoning models)
        self.usage_option = True  # stream_options.include_usage
        self.native_tools = True  # False once the server could not stream a tool call: tools go as text
        self.maybe_busy = False  # a call not streamed timed out: the server may still be writing it
        # The last answer was an empty stream: llama-cpp-python hangs up after one, and the next request
        # can meet that connection closed ("Connection error"): it is sent once more at once.
        self.hung_up = False

    async def send(self, kwargs: dict[str, Any]) -> Completion:
        """The completion, streamed unless DEEPRESEARCH_MODEL_STREAM=off. A
        parameter the endpoint rejects (``max_tokens`` where it wants
        ``max_completion_tokens``, or the other way; ``stream_options``) is
        renamed or left out and the request sent again, once each. An empty
        event stream says nothing (llama-cpp-python sends one when it fails a
        streamed request, e.g. a prompt over its window): the request is sent
        again at once without streaming, to hear the answer or the error; a
        native tool call so answered raises ``ToolStreamRefused`` instead (the
        caller asks again with the tools as text)."""
        tried: set[str] = set()
        whole = False
        while True:
            try:
                completion = await self._send_once(kwargs, whole)
                self.hung_up = False
                return completion
            except openai.APIConnectionError as err:
                if isinstance(err, openai.APITimeoutError) or not self.hung_up:
                    raise
                self.hung_up = False  # once more, on a connection of its own
            except EmptyStream:
                self.hung_up = True
                if whole:
                    raise
                if calls_tools(kwargs):
                    raise ToolStreamRefused("the server sent an empty stream for a streamed tool call") from None
                whole = True
            except openai.BadRequestError as err:
                said = f"{err.message} {json.dumps(err.body, default=str)}".lower()
                if not _REJECTED_PARAMETER.search(said):
                    raise
                sent = "max_tokens" if "max_tokens" in kwargs else "max_completion_tokens"
                other = "max_completion_tokens" if sent == "max_tokens" else "max_tokens"
                if "max_completion_tokens" in said and other not in tried and sent in kwargs:
                    tried.add(other)
                    kwargs[other] = kwargs.pop(sent)
                    self.bound_name = other
                elif "stream_options" in said and "stream_options" not in tried and self.settings.model_stream:
                    tried.add("stream_options")
                    self.usage_option = False
                else:
                    raise

    async def _send_once(self, kwargs: dict[str, Any], whole: bool = False) -> Completion:
        settings = self.settings
        if settings.model_stream and not whole:
            extra = {"stream_options": {"include_usage": True}} if self.usage_option else {}
            return await llm_stream.stream_completion(
                self.client, kwargs | extra, settings.model_timeout, settings.model_idle_timeout
            )
        if self.maybe_busy:
            self.maybe_busy = False
            await self.until_free(max(BUSY_WAIT, 2 * settings.model_timeout))
        try:
            return await llm_stream.whole_completion(self.client, kwargs, settings.model_timeout)
        except Silence:
            self.maybe_busy = True
            raise

    async def until_free(self, seconds: float) -> None:
        """Wait, at most ``seconds``, until the server answers ``GET /models``:
        llama-cpp-python answers it only once the generation it is writing
        is done; a server that stops when the client hangs up answers at once.
        A server without the route, or down, is not waited for."""
        warn("waiting until the model server has finished the answer it was writing when the last call timed out")
        try:
            async with asyncio.timeout(seconds):
                await self.client.models.list()
        except (TimeoutError, openai.OpenAIError):
            pass


def calls_tools(kwargs: dict[str, Any]) -> bool:
    """Whether the request lets the model call its tools natively."""
    return bool(kwargs.get("tools")) and kwargs.get("tool_choice") != "none"


def warn(message: str) -> None:
    if activity.in_activity():
        activity.logger.warning(message)
