"""The ``Podcast`` workflow: a finished run's report as a two-host
conversation, spoken and joined into one audio file (id ``<run id>-podcast``).

    1. script    one model call (role podcast) writes DeerFlow's JSON script
    2. speak     one activity per line (long lines split at sentence ends),
                 a few at once; a crash resumes at the first unfinished line
    3. join      the clips become one MP3 (or WAV) file in the blob store

``speech_parts`` is the decision, a pure function of the script.
"""

from __future__ import annotations

import asyncio
import re

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.activity_calls import failure_reason
from workflows.side_calls import SideCalls

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import (
        PROGRESS_TOPIC,
        AudioClip,
        Message,
        ModelRequest,
        PodcastResult,
        PodcastScript,
        ProgressEvent,
        SideStatus,
        SourceReport,
        SpeechRequest,
    )

MAX_SPEECH_CHARS = 4000  # below the speech endpoint's limit (OpenAI: 4096)
SPEAK_AT_ONCE = 4
MAX_PARTS = 400
_SENTENCE_END = re.compile(r"(?<=[.!?。！？…])\s+")


def speech_parts(script: PodcastScript, limit: int = MAX_SPEECH_CHARS) -> list[tuple[str, str]]:
    """(speaker, text) for each speech call: a line, or a piece of a long
    line cut at sentence ends (or, for one sentence too long, at a space)."""
    parts: list[tuple[str, str]] = []
    for line in script.lines:
        piece = ""
        for sentence in _SENTENCE_END.split(line.paragraph.strip()):
            while len(sentence) > limit:
                cut = sentence.rfind(" ", 0, limit)
                cut = cut if cut > limit // 2 else limit
                if piece:
                    parts.append((line.speaker, piece))
                    piece = ""
                parts.append((line.speaker, sentence[:cut].strip()))
                sentence = sentence[cut:].strip()
            if piece and len(piece) + 1 + len(sentence) > limit:
                parts.append((line.speaker, piece))
                piece = ""
            piece = f"{piece} {sentence}".strip()
        if piece:
            parts.append((line.speaker, piece))
    return [(speaker, text) for speaker, text in parts if text][:MAX_PARTS]


@workflow.defn(name="Podcast")
class Podcast:
    @workflow.init
    def __init__(self, source: SourceReport) -> None:
        self.source = source
        self.calls = SideCalls()
        self.phase = "writing"
        self.done = self.total = 0
        self.error: str | None = None
        self.stream = WorkflowStream()
        self.progress = self.stream.topic(PROGRESS_TOPIC, type=ProgressEvent)

    @workflow.run
    async def run(self, source: SourceReport) -> PodcastResult:
        try:
            # 1. Script.
            script = await self.write_script()
            parts = speech_parts(script)
            self.total = len(parts)
            self.set_phase("speaking", f"{len(script.lines)} lines in {self.total} speech calls")
            # 2. Speak, a few lines at once.
            limit = asyncio.Semaphore(SPEAK_AT_ONCE)
            clips = await asyncio.gather(
                *(self.speak(i, speaker, text, limit) for i, (speaker, text) in enumerate(parts))
            )
            # 3. Join.
            self.set_phase("joining", f"{len(clips)} clips")
            audio = await self.calls.join(list(clips))
        except (ActivityError, ApplicationError) as err:
            self.error = failure_reason(err)
            self.set_phase("failed", self.error)
            raise ApplicationError(self.error, type="PodcastFailed", non_retryable=True) from err
        self.set_phase("completed", f"{audio.seconds:.0f} s of {audio.format}")
        return PodcastResult(
            status="completed",
            run_id=source.run_id,
            audio=audio,
            script=[{"speaker": line.speaker, "text": line.paragraph} for line in script.lines],
            usage=self.calls.usage,
        )

    async def write_script(self) -> PodcastScript:
        s = self.source
        reply = await self.calls.write(
            ModelRequest(
                role="podcast",
                prompt="podcast",
                variables={"locale": s.locale, "current_time": workflow.now().strftime("%Y-%m-%d")},
                messages=[Message(role="user", content=f"# {s.title}\n\n{s.report}" if s.title else s.report)],
                json_mode=True,
                output="podcast",
            ),
            "podcast",
            lambda reply: reply.problem if reply.podcast is None else None,
        )
        return PodcastScript.model_validate(reply.podcast)

    async def speak(self, index: int, speaker: str, text: str, limit: asyncio.Semaphore) -> AudioClip:
        async with limit:
            clip = await self.calls.speak(SpeechRequest(text=text, voice=speaker, index=index))
        self.done += 1
        self.progress.publish(ProgressEvent(kind="notice", text=f"line {self.done} of {self.total} spoken"))
        return clip

    def set_phase(self, phase: str, text: str = "") -> None:
        self.phase = phase
        workflow.set_current_details(f"Podcast: {phase}" + (f" ({text})" if text else ""))
        self.progress.publish(ProgressEvent(kind="phase", text=f"{phase}: {text}" if text else phase))

    @workflow.query(name="status")
    def status(self) -> SideStatus:
        return SideStatus(
            kind="podcast",
            phase=self.phase,
            run_id=self.source.run_id,
            done=self.done,
            total=self.total,
            error=self.error,
        )
