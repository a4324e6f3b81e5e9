"""The activity calls of the side outputs (podcast, slides, prose), with the
usage they cost."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows.activity_calls import EMPTY_REPLY, FILE_CALL, MODEL_CALL, SPEECH_CALL
from workflows.rate_limits import ProviderWaits, model_queue

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import Message, ModelReply, ModelRequest
    from workflows.side_models import AudioClip, Deck, DeckRequest, JoinRequest, SpeechRequest, SpeechUsage


class SideCalls:
    def __init__(self) -> None:
        self.usage = SpeechUsage()
        self.waits = ProviderWaits(lambda: self.usage)  # rate limits of the model and speech endpoints

    async def chat(self, request: ModelRequest) -> ModelReply:
        reply = await self.waits.call(
            "chat", request, result_type=ModelReply, summary=request.role, options=MODEL_CALL, task_queue=model_queue
        )
        self.usage.llm_calls += 1
        self.usage.prompt_tokens += reply.prompt_tokens
        self.usage.completion_tokens += reply.completion_tokens
        return reply

    async def write(self, request: ModelRequest, what: str, readable=lambda reply: None) -> ModelReply:
        """A model call whose reply must be non-empty and, by ``readable``,
        read (it returns the problem, or None): asked again once, then the
        workflow fails with the reason."""
        reply = await self.chat(request)
        problem = "the reply was empty" if not reply.content.strip() else readable(reply)
        if problem is None:
            return reply
        again = EMPTY_REPLY if not reply.content.strip() else f"That reply could not be used: {problem}. Try again."
        reply = await self.chat(
            request.model_copy(update={"history": reply.history, "messages": [Message(role="user", content=again)]})
        )
        problem = "the reply was empty" if not reply.content.strip() else readable(reply)
        if problem is None:
            return reply
        raise ApplicationError(f"the {what} model's reply could not be used twice: {problem}", non_retryable=True)

    async def speak(self, request: SpeechRequest) -> AudioClip:
        clip = await self.waits.call(
            "speak",
            request,
            result_type=AudioClip,
            summary=f"speak line {request.index + 1}: {request.text[:60]}",
            options=SPEECH_CALL,
        )
        self.usage.speech_calls += 1
        self.usage.speech_characters += clip.characters
        return clip

    async def join(self, clips: list[AudioClip]) -> AudioClip:
        return await workflow.execute_activity(
            "join_audio", JoinRequest(clips=clips), result_type=AudioClip, **FILE_CALL
        )

    async def build_deck(self, request: DeckRequest) -> Deck:
        return await workflow.execute_activity("build_deck", request, result_type=Deck, **FILE_CALL)
