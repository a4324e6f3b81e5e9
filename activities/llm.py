"""The one model activity: a chat completion for any role, with its tools.

The workflow sends a prompt name, variables and the new turns; this adapter
renders the system prompt, restores earlier turns from the blob store, fits
the request to the role's context window, calls the OpenAI-compatible
endpoint once (Temporal owns retries), and stores the grown conversation as a
blob so workflow history stays linear in new content.
"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import cache
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import quote

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import context, cut_replies, model_endpoint, overflow, shown, text_tools, tokens
from activities.heartbeat import heartbeating
from activities.llm_stream import BrokenStream, Completion, Looping, Silence, TooLarge, ToolStreamRefused
from activities.model_endpoint import ModelEndpoint
from activities.off_loop import in_pool, off_loop
from activities.pacing import Pacer, paced
from activities.rate_limited import rate_limit_error, retry_after
from activities.statement_text import specifics
from activities.support import support_of
from infra.blobs import BlobNotFound, BlobStore
from infra.settings import Settings
from workflows.activity_calls import BOUNDED_MODEL_ATTEMPTS
from workflows.clean import clean_text
from workflows.echoes import measure
from workflows.languages import language_name
from workflows.model_output import read_plan, read_podcast_script, repair_arguments, strip_think, unescape_entities
from workflows.models import EvidencePage, Message, ModelReply, ModelRequest, ToolCall
from workflows.tool_models import READER_TOOLS


@cache
def _prompt_file(path: str) -> str:
    """A file under prompts/, read once per worker."""
    return (resources.files("prompts") / path).read_text(encoding="utf-8")


def render_prompt(name: str, variables: dict[str, Any]) -> str:
    text = _prompt_file(f"{name}.md")
    values = {k: str(v) for k, v in variables.items()}
    if "locale" in values:  # "Chinese (zh-CN)": a language's name is followed where a bare tag is not
        values.setdefault("language", language_name(values["locale"]))
    values["clarification"] = (
        render_prompt("clarification", {**variables, "clarify": False}) if variables.get("clarify") else ""
    )
    values["local_docs"] = render_prompt("local_docs", {}) if variables.get("has_resources") else ""
    building_on = variables.get("changes_since") and name != "changes"  # an earlier report: workflows/continuation.py
    values["changes"] = render_prompt("changes", variables) if building_on else ""
    if variables.get("recheck_since") and name != "recheck":  # its sources re-checked: workflows/recheck.py
        values["changes"] = render_prompt("recheck", variables)
    style = variables.get("report_style")
    if style:
        values["style_guide"] = _prompt_file(f"styles/{style}.md")
    return Template(text).safe_substitute(values)


def _tool_schemas() -> dict[str, dict]:
    text = _prompt_file("tools.json")
    return {tool["name"]: {"type": "function", "function": tool} for tool in json.loads(text)}


SUPPORT_SECONDS = 20.0  # judging how a reply's statements are supported: past this, not judged
MAX_PAGES_TEXT = 400_000  # characters of the pages a run read that may support a reply's statements
OVERFLOW_RETRIES = 3  # refits after the provider says the request exceeds its window
# A call that times out, loops or meets a provider's implausible "too long"
# is tried at most this often (other failures: the activity's retry policy).
BOUNDED_ATTEMPTS = BOUNDED_MODEL_ATTEMPTS
TIMEOUT_BACKOFF = timedelta(seconds=10)  # times the attempt: a busy server finishes what it was writing


SHAPING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="model-request")  # requests built at once

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
_KEY_LIKE = re.compile(r"\b(sk|tvly|e2b)-[A-Za-z0-9_\-]{6,}")


def scrub(text: str, secrets: list[str] = ()) -> str:
    """``text`` without the worker's secrets or anything that looks like a
    key or bearer token (providers sometimes echo the request's headers)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", _BEARER.sub(r"\1***", text))


def classify(
    err: Exception,
    secrets: list[str] = (),
    service: str = "model provider",
    endpoint_hint: str = "OPENAI_BASE_URL",
) -> ApplicationError:
    """Map an OpenAI client error to a Temporal error: retry rate limits,
    timeouts and 5xx; fail fast on authentication and bad requests. What the
    server said is scrubbed of secrets before it reaches history. ``service``
    names the server in the message (the model provider, the speech endpoint)."""
    said = scrub(str(getattr(err, "message", None) or err), secrets)
    if isinstance(err, openai.AuthenticationError):
        return ApplicationError(
            f"the {service} rejected the API key (HTTP 401): set OPENAI_API_KEY to a valid key for {endpoint_hint}",
            type="ModelAuthError",
            non_retryable=True,
        )
    if isinstance(err, openai.PermissionDeniedError):
        return ApplicationError(
            f"the {service} refused access (HTTP 403): {said}", type="ModelAuthError", non_retryable=True
        )
    if (limited := rate_limit_error(err, service, said)) is not None:  # 429, or overloaded and says when
        return limited
    if isinstance(err, openai.APIStatusError):
        if err.status_code in (408, 409) or err.status_code >= 500:
            return ApplicationError(
                f"{service} error (HTTP {err.status_code}): {said}",
                type="ModelUnavailable",
                next_retry_delay=retry_after(err),
            )
        return ApplicationError(
            f"the {service} rejected the request (HTTP {err.status_code}): {said}",
            type="ModelRequestError",
            non_retryable=True,
        )
    if isinstance(err, openai.APITimeoutError):  # a subclass of APIConnectionError: it answered, too slowly
        return ApplicationError(f"the {service} did not answer in time ({endpoint_hint})", type="ModelTimeout")
    if isinstance(err, openai.APIConnectionError):
        return ApplicationError(
            f"the {service} is unreachable at {endpoint_hint}: {type(err).__name__}: {said}", type="ModelUnavailable"
        )
    # Timeouts, truncated or malformed responses: retry.
    return ApplicationError(f"{service} call failed: {type(err).__name__}: {said}", type="ModelUnavailable")


class ModelActivities:
    def __init__(self, settings: Settings, blobs: BlobStore, pacer: Pacer | None = None) -> None:
        self.settings = settings
        self.blobs = blobs
        self.pacer = pacer or Pacer(most=100)  # this worker's pace by the provider's 429s (activities/pacing.py)
        self.tools = _tool_schemas()
        # Named in errors: the URL the user set, and the variable that sets it.
        self.endpoint = f"{settings.openai_base_url or 'https://api.openai.com/v1'} (OPENAI_BASE_URL)"
        self.api = ModelEndpoint(settings)  # what the endpoint accepts, learned per worker
        self.client = self.api.client

    async def build_request(
        self, request: ModelRequest, window: int | None = None, as_text: bool = False
    ) -> tuple[dict[str, Any], list[Message]]:
        """The chat-completion arguments for ``request``, fitted to ``window``
        tokens (default: the role's window, or what the run learned of it);
        ``as_text``: its tools described in the prompt, whatever the setting."""
        earlier = json.loads(await self.blobs.get(request.history)) if request.history else []
        conversation = [Message.model_validate(m) for m in earlier] + request.messages
        refs = sorted({m.blob for m in conversation if m.blob})  # tool outputs, crawled pages
        blobs = dict(zip(refs, await asyncio.gather(*(self.blobs.get(ref) for ref in refs))))
        window = window or self.window(request)
        # Cutting long pages and counting tokens: off the event loop, which every run's calls share,
        # in threads of its own (not behind the crawls' page conversions in the default pool).
        return await in_pool(SHAPING, self._shape, request, conversation, blobs, window, as_text)

    def _shape(
        self, request: ModelRequest, conversation: list[Message], blobs: dict[str, str], window: int, as_text: bool
    ) -> tuple[dict[str, Any], list[Message]]:
        role = request.serving_role
        tools = [self.tools[name] for name in request.tools if name in self.tools] + request.extra_tools
        # Room for the answer and for the tool schemas, which count too.
        budget = window - min(8_192, window // 4) - context.tools_tokens(tools)
        system = {"role": "system", "content": render_prompt(request.prompt, request.variables)}
        share = budget // 4  # of the request, for one tool output; at most what one page is worth
        share = min(share, request.evidence_tokens) if request.evidence_tokens else share
        messages = [system] + shown.messages(conversation, blobs, share, budget)
        if not shown.read_on(conversation, blobs, share, budget // 2):  # the reading tools only when needed
            tools = [t for t in tools if t["function"]["name"] not in READER_TOOLS]
        native = self.settings.tool_calling == "native" and not as_text
        if not native:  # describe the tools in the prompt instead
            calls_allowed = request.tool_choice == "auto"
            system["content"] += text_tools.instruction(tools, calls_allowed, request.json_mode) if tools else ""
            messages = text_tools.as_text(messages)
        if request.on_overflow == "refuse" and (size := context.total_tokens(messages)) > budget:
            raise ApplicationError(
                f"the request needs about {size:,} tokens; the context window leaves {budget:,}",
                size,
                budget,
                window,
                type="RequestTooLarge",
                non_retryable=True,
            )
        messages = context.fit(messages, budget)
        kwargs: dict[str, Any] = {"model": self.settings.model_for(role), "messages": messages}
        if tools and native:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = request.tool_choice
        if request.json_mode:  # whatever the tool calling: text tool calls are JSON objects too
            kwargs["response_format"] = {"type": "json_object"}
        # The output bound: the role's, never more than the room left.
        room = window - context.total_tokens(messages) - context.tools_tokens(kwargs.get("tools") or []) - 16
        kwargs[self.api.bound_name] = max(min(self.settings.max_output_for(role), room), 16)
        return kwargs, conversation

    def window(self, request: ModelRequest) -> int:
        """The role's context window: configured (or by model name), or the
        smaller one the run learned from the provider."""
        configured = self.settings.context_window_for(request.serving_role)
        return min(configured, request.context_window or configured)

    async def _complete(
        self, request: ModelRequest, headers: dict[str, str]
    ) -> tuple[Completion, list[Message], int | None, list[dict[str, Any]]]:
        """One completion; a request the provider finds too long for its
        context window is fitted again to the window it states (or a smaller
        one) and sent again, up to ``OVERFLOW_RETRIES`` times. Returns the
        completion, the conversation, the window learned (None: as set) and
        the messages sent."""
        window, learned = self.window(request), None
        as_text = not self.api.native_tools
        for attempt in range(OVERFLOW_RETRIES + 2):  # (+1: a tool call asked again as text)
            async with heartbeating():  # (cutting long pages may wait for a thread)
                kwargs, conversation = await self.build_request(request, window, as_text)
            if headers:
                kwargs["extra_headers"] = headers
            try:
                async with heartbeating():
                    completion = await self.api.send(kwargs)
                if as_text and self.api.native_tools:  # the same request streamed as text: the server's limit
                    self.api.native_tools = False
                    model_endpoint.warn(
                        "the model server cannot stream a tool call (llama-cpp-python's chatml-function-calling): "
                        "this worker describes the tools in the prompt instead (as DEEPRESEARCH_TOOL_CALLING=json)"
                    )
                return counted(completion, kwargs), conversation, learned, kwargs["messages"]
            except ToolStreamRefused:
                as_text = True
            except Looping as err:
                return counted(self._looped(err, request), kwargs), conversation, learned, kwargs["messages"]
            except openai.APIStatusError as err:
                said = f"{err} {json.dumps(err.body, default=str)}"
                if not overflow.is_overflow(err.status_code, said):
                    raise classify(err, self.settings.secrets, endpoint_hint=self.endpoint) from None
                if attempt >= OVERFLOW_RETRIES:
                    raise ApplicationError(
                        f"the model provider still finds the request too long for its context window after "
                        f"fitting it to {window:,} tokens ({scrub(str(err.message), self.settings.secrets)}): "
                        f"set DEEPRESEARCH_CONTEXT_WINDOW (or DEEPRESEARCH_CONTEXT_WINDOW_{request.serving_role.upper()}) "
                        "to the model's window",
                        type="ModelRequestError",
                        non_retryable=True,
                    ) from None
                sent = context.total_tokens(kwargs["messages"]) + context.tools_tokens(kwargs.get("tools") or [])
                new = overflow.smaller_window(window, said, sent, kwargs.get(self.api.bound_name) or 0)
                if new is None:  # the provider's numbers do not fit what was sent: not our overflow
                    raise _bounded(
                        ApplicationError(
                            f"the model provider said the request exceeds its context window, but the request was "
                            f"about {sent:,} tokens of a {window:,}-token window: a provider error "
                            f"({scrub(str(err.message), self.settings.secrets)[:300]})",
                            type="ModelWindowMismatch",
                        )
                    ) from None
                learned = window = new
                if activity.in_activity():
                    activity.logger.info("context window exceeded: fitting the request to %s tokens", window)
            except Silence as err:  # (a call not streamed: the next one waits until the server is free, model_endpoint)
                raise _bounded(self._silence(err), TIMEOUT_BACKOFF) from None
            except TooLarge as err:  # a server that sent so much may well again: a few tries, not twelve
                said = scrub(str(err), self.settings.secrets)[:500]
                raise _bounded(
                    ApplicationError(f"model provider call failed: {said}", type="ModelAnswerTooLarge")
                ) from None
            except BrokenStream as err:
                said = scrub(str(err), self.settings.secrets)[:500]
                raise ApplicationError(f"model provider call failed: {said}", type="ModelUnavailable") from None
            except openai.OpenAIError as err:
                failure = classify(err, self.settings.secrets, endpoint_hint=self.endpoint)
                raise (_bounded(failure, TIMEOUT_BACKOFF) if failure.type == "ModelTimeout" else failure) from None
        raise AssertionError("unreachable")

    def _silence(self, err: Silence) -> ApplicationError:
        if err.whole:
            said = (
                f"the model did not answer in time: no whole answer within {err.seconds:g} s "
                "(DEEPRESEARCH_MODEL_TIMEOUT; the call was not streamed)"
            )
        elif err.first:
            said = f"the model did not answer within {err.seconds:g} s (DEEPRESEARCH_MODEL_TIMEOUT)"
        else:
            said = f"the model stopped writing: no token for {err.seconds:g} s (DEEPRESEARCH_MODEL_IDLE_TIMEOUT)"
        return ApplicationError(f"{said} at {self.endpoint}", type="ModelTimeout")

    def _looped(self, err: Looping, request: ModelRequest) -> Completion:
        """A reply that looped: a failed turn, tried again; on the last
        allowed attempt, what it wrote before the loop, cut there."""
        attempt = activity.info().attempt if activity.in_activity() else BOUNDED_ATTEMPTS
        if attempt < BOUNDED_ATTEMPTS:
            raise ApplicationError(
                f"the model's reply degenerated into repetition (the {request.serving_role}'s reply was cut off "
                "while it streamed)",
                type="ModelRepetition",
            ) from None
        activity.logger.warning("the model's reply looped again: kept what it wrote before the loop")
        return err.completion

    @activity.defn(name="chat")
    async def chat(self, request: ModelRequest) -> ModelReply:
        headers = {}
        if activity.in_activity():
            # Lets the provider (and our tests) tie a request to its activity.
            info = activity.info()
            headers = {"X-Client-Request-Id": header_value(f"{info.workflow_id}/{info.activity_id}")}
        completion, conversation, learned, sent = await paced(self.pacer, lambda: self._complete(request, headers))
        if not completion.choices:
            raise ApplicationError("the model returned no choices", type="ModelUnavailable")
        # Reading the reply may take longer than the heartbeat timeout on a busy
        # worker (thousands of tool calls, a long report's support): without a
        # heartbeat Temporal would time the activity out and pay for the model again.
        async with heartbeating():
            return await self._reply(request, completion, conversation, learned, sent)

    async def _reply(
        self,
        request: ModelRequest,
        completion: Completion,
        conversation: list[Message],
        learned: int | None,
        sent: list[dict[str, Any]],
    ) -> ModelReply:
        """What the activity returns: the completion read (tool calls, plan,
        podcast script), its conversation stored, its statements judged."""
        content = strip_think(clean_text(completion.content))
        calls = await off_loop(tool_calls, completion.tool_calls)  # json-repair: off the event loop
        allowed = request.tools + [t["function"]["name"] for t in request.extra_tools]
        text_tools_used = self.settings.tool_calling != "native" or not self.api.native_tools
        if text_tools_used and allowed and request.tool_choice == "auto" and not calls:  # (native ones kept)
            content, calls = await off_loop(text_tools.parse_reply, content, allowed)
        written = content  # the model's own text, before any note of ours
        cut = completion.finish_reason in cut_replies.CUT
        if cut and not calls and request.output == "text" and content:
            content += cut_replies.note(completion.finish_reason or "", request.serving_role)
        reply = Message(role="assistant", content=content, tool_calls=calls)
        history = await self.blobs.put(
            json.dumps([m.model_dump(exclude_defaults=True) for m in conversation + [reply]])
        )
        plan, script, problem = None, None, None
        locale = str(request.variables.get("locale") or "en-US")
        instructions = render_prompt(request.prompt, request.variables)  # what the model was told
        if request.output == "plan":  # json-repair can take long on hostile text: off the event loop
            reading = cut_replies.cut_plan if cut else read_plan
            args = (content, request.max_steps or 20, locale, request.topic) + ((request.serving_role,) if cut else ())
            plan = await off_loop(reading, *args, instructions)
            problem = plan.problem
        elif request.output == "podcast":
            script, problem = await off_loop(read_podcast_script, content, locale)
        return ModelReply(
            content=reply.content,
            tool_calls=calls,
            history=history,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            plan=plan.plan if plan else None,
            problem=problem,
            steps_cut=plan.cut if plan else [],
            podcast=script,
            context_window=learned,
            **(await self._kept(sent, written, request.topic, request.support_pages) if request.keep_shown else {}),
            **(await off_loop(measure, content, instructions, locale) if content.strip() else {}),
        )

    async def _kept(
        self, sent: list[dict[str, Any]], content: str, question: str, pages: list[EvidencePage]
    ) -> dict[str, Any]:
        """A kept request: its text as sent (a blob reference), and how each
        statement of the reply is supported by its material (all but the
        system prompt; ``activities/support.py``) and the ``pages`` the run
        read, and how many figures and names that material holds. A reply
        too long to judge in ``SUPPORT_SECONDS`` is not judged, never failed."""
        material = shown_text(_material(sent))
        read = await self._pages(pages)
        try:
            counts, statements = await off_loop(support_of, content, material, question, read, seconds=SUPPORT_SECONDS)
            shown_items = await off_loop(specifics, material, question, seconds=SUPPORT_SECONDS)
            judged = True
        except ApplicationError:
            counts, statements, judged, shown_items = None, [], False, None
        held = counts.supported_share() if counts else None
        return {
            "shown": await self.blobs.put(shown_text(sent)),
            "held": held,
            "support": counts,
            "statements": statements,
            "judged": judged,
            "shown_items": shown_items,
        }

    async def _pages(self, pages: list[EvidencePage]) -> list[tuple[str, str, str]]:
        """(url, title, text) of each page read, at most ``MAX_PAGES_TEXT``
        characters in all (a page whose blob is gone is left out)."""
        out: list[tuple[str, str, str]] = []
        room = MAX_PAGES_TEXT
        for page in pages:
            if room <= 0:
                break
            try:
                text = (await self.blobs.get(page.blob))[:room]
            except BlobNotFound:
                continue
            out.append((page.url, page.title, text))
            room -= len(text)
        return out


def counted(completion: Completion, kwargs: dict[str, Any]) -> Completion:
    """A server that reports no usage (llama-cpp-python's streams) has the
    tokens counted as we count them (activities/tokens.py): what was sent,
    and what came back, so a run's costs are never a silent zero."""
    if completion.prompt_tokens or completion.completion_tokens:
        return completion
    completion.prompt_tokens = context.total_tokens(kwargs["messages"]) + context.tools_tokens(
        kwargs.get("tools") or []
    )
    calls = " ".join(f"{c.function.name} {c.function.arguments}" for c in completion.tool_calls)
    completion.completion_tokens = tokens.count(f"{completion.content or ''} {calls}")
    return completion


def _material(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a request gives its writer to write from: its first user message
    (not the system prompt; not an earlier reply being asked for again, nor
    a note on what was wrong with it, which quotes it)."""
    return next(([m] for m in sent if m.get("role") == "user"), [])


def shown_text(messages: list[dict[str, Any]]) -> str:
    """A request as sent, as text: each message's role and content."""
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content') or ''}" for m in messages)


def header_value(text: str) -> str:
    """``text`` as an HTTP header value: visible ASCII as it is, anything
    else (non-ASCII, spaces, CR/LF) percent-encoded as UTF-8, so any run id
    Temporal accepts can travel in a header and still be read back."""
    return quote(text, safe="!#$&'()*+,/:;=?@[]~-._")


def _bounded(err: ApplicationError, backoff: timedelta | None = None) -> ApplicationError:
    """``err`` retried at most ``BOUNDED_ATTEMPTS`` times in all, ``backoff``
    times the attempt apart (a timeout: the server may still be busy with the
    call it gave up on)."""
    attempt = activity.info().attempt if activity.in_activity() else 1
    last = attempt >= BOUNDED_ATTEMPTS
    message = f"{err.message} (after {attempt} attempts)" if last else err.message
    delay = backoff * attempt if backoff and not last else None
    return ApplicationError(message, *err.details, type=err.type, non_retryable=last, next_retry_delay=delay)


def tool_calls(raw: Any) -> list[ToolCall]:
    """The model's tool calls, whatever their shape: names and ids cleaned,
    missing or repeated ids replaced (every call must be answered under its
    own id), arguments repaired into a JSON object where possible."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for n, call in enumerate(raw or []):
        function = getattr(call, "function", None)
        if function is None:
            continue
        ident = clean_text(getattr(call, "id", None)).strip()[:200]
        if not ident or ident in seen:
            ident = f"call_{n}_{len(seen)}"
        seen.add(ident)
        name = clean_text(getattr(function, "name", None)).strip()[:200]
        arguments = unescape_entities(repair_arguments(getattr(function, "arguments", None)))
        if "think>" in arguments.lower():
            arguments = _without_reasoning(arguments)
        calls.append(ToolCall(id=ident, name=name, arguments=arguments))
    return calls


def _without_reasoning(arguments: str) -> str:
    """A tool call's arguments without the ``<think>`` reasoning some models
    put into them, before the object or inside its values."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return strip_think(arguments) or "{}"
    if not isinstance(value, dict):
        return arguments
    cleaned = {k: strip_think(v) if isinstance(v, str) else v for k, v in value.items()}
    return json.dumps(cleaned, ensure_ascii=False)
