"""The ``Podcast`` workflow: a finished run's report as a two-host
conversation, spoken and joined into one audio file (id ``<run id>-podcast``).

    1. script    one model call (role podcast) writes DeerFlow's JSON script
    2. speak     one activity per line (long lines split at sentence ends),
                 a few at once, in batches of ``BATCH`` speech calls, each
                 batch joined into one clip; a crash resumes at the first
                 unfinished line
    3. join      the batches' clips become one MP3 (or WAV) file in the blob
                 store

Every line is spoken; only a script beyond ``MAX_PARTS`` speech calls (far
more than a model writes in one reply) is cut, at a whole line, and the
status, the progress and the returned script say so. ``speech_parts`` and
``spoken_lines`` are the decision, pure functions of the script.
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
    from workflows.models import PROGRESS_TOPIC, Message, ModelRequest, ProgressEvent
    from workflows.side_models import (
        AudioClip,
        PodcastLine,
        PodcastResult,
        PodcastScript,
        SideStatus,
        SourceReport,
        SpeechRequest,
    )

MAX_SPEECH_CHARS = 4000  # below the speech endpoint's limit (OpenAI: 4096)
SPEAK_AT_ONCE = 4
OLD_MAX_PARTS = 400  # before patch "podcast-speaks-every-line": the rest was silently dropped
MAX_PARTS = 5000  # ~6 history events each: well within a workflow's history
BATCH = 100  # speech calls joined into one clip at a time
_SENTENCE_END = re.compile(r"(?<=[.!?。！？…])\s+")


def speech_parts(script: PodcastScript, limit: int = MAX_SPEECH_CHARS) -> list[tuple[str, str]]:
    """(speaker, text) for each speech call: a line, or a piece of a long
    line cut at sentence ends (or, for one sentence too long, at a space)."""
    return [part for line in script.lines for part in line_parts(line, limit)]


def spoken_lines(script: PodcastScript, max_parts: int = MAX_PARTS) -> tuple[PodcastScript, list[tuple[str, str]]]:
    """The script's lines that fit in ``max_parts`` speech calls (all of
    them but for a script far longer than any model writes), and their
    speech calls; a line is spoken whole or not at all."""
    parts: list[tuple[str, str]] = []
    kept = 0
    for line in script.lines:
        pieces = line_parts(line)
        if len(parts) + len(pieces) > max_parts:
            break
        parts += pieces
        kept += 1
    return script.model_copy(update={"lines": script.lines[:kept]}), parts


def line_parts(line: PodcastLine, limit: int = MAX_SPEECH_CHARS) -> list[tuple[str, str]]:
    """The speech calls of one script line."""
    parts: list[tuple[str, str]] = []
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
    return [(speaker, text) for speaker, text in parts if text]


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
            if workflow.patched("podcast-speaks-every-line"):
                script, audio = await self.speak_every_line(script)
            else:  # as recorded before: at most OLD_MAX_PARTS speech calls, one join
                audio = await self.speak_at_most_400(script)
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

    async def speak_every_line(self, script: PodcastScript) -> tuple[PodcastScript, AudioClip]:
        """Speak the script (cut only beyond MAX_PARTS, and then said) in
        batches of BATCH speech calls, each joined into one clip, then join
        those: no activity's input grows with the script."""
        spoken, parts = spoken_lines(script)
        self.total = len(parts)
        cut = len(script.lines) - len(spoken.lines)
        said = f"; the last {cut} of {len(script.lines)} lines are cut (over {MAX_PARTS} speech calls)" if cut else ""
        self.set_phase("speaking", f"{len(spoken.lines)} lines in {self.total} speech calls{said}")
        if cut:
            self.progress.publish(ProgressEvent(kind="notice", text=f"podcast cut{said}"))
        limit = asyncio.Semaphore(SPEAK_AT_ONCE)
        joined: list[AudioClip] = []
        for start in range(0, len(parts), BATCH):
            batch = parts[start : start + BATCH]
            clips = await asyncio.gather(
                *(self.speak(start + i, speaker, text, limit) for i, (speaker, text) in enumerate(batch))
            )
            if len(parts) <= BATCH:
                joined = list(clips)
            else:
                joined.append(await self.calls.join(list(clips)))
        self.set_phase("joining", f"{len(joined)} clips")
        return spoken, await self.calls.join(joined)

    async def speak_at_most_400(self, script: PodcastScript) -> AudioClip:
        parts = speech_parts(script)[:OLD_MAX_PARTS]
        self.total = len(parts)
        self.set_phase("speaking", f"{len(script.lines)} lines in {self.total} speech calls")
        limit = asyncio.Semaphore(SPEAK_AT_ONCE)
        clips = await asyncio.gather(*(self.speak(i, speaker, text, limit) for i, (speaker, text) in enumerate(parts)))
        self.set_phase("joining", f"{len(clips)} clips")
        return await self.calls.join(list(clips))

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
            rate_limited_since=self.calls.waits.since(),
        )
