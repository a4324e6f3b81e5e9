"""The side outputs' data shapes (podcast, slides, prose): what their
models write, their activities' requests, their results and status. Pure
pydantic, like ``workflows/models.py``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from workflows.models import Citation, Model

SideOutcome = Literal["completed", "failed"]
ProseOption = Literal["continue", "improve", "shorter", "longer", "fix", "zap"]
PROSE_OPTIONS: tuple[str, ...] = ("continue", "improve", "shorter", "longer", "fix", "zap")


class PodcastLine(Model):
    speaker: Literal["male", "female"]
    paragraph: str = Field(min_length=1)

    @field_validator("speaker", mode="before")
    @classmethod
    def _speaker(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class PodcastScript(Model):
    """What the podcast model writes (DeerFlow's shape)."""

    locale: str = "en-US"
    lines: list[PodcastLine] = Field(min_length=1)


class SourceReport(Model):
    """A finished run's report, the material of a side output."""

    run_id: str
    title: str = ""
    report: str = Field(min_length=1)
    locale: str = "en-US"
    citations: list[Citation] = Field(default_factory=list)
    owner: str | None = None  # the run's owner and sharing: the side output inherits them
    shared_with: list[str] = Field(default_factory=list)


class SpeechRequest(Model):
    text: str = Field(min_length=1)
    voice: str
    index: int  # position in the podcast, for logs and the UI


class AudioClip(Model):
    blob: str  # the audio bytes in the blob store
    format: Literal["mp3", "wav"]
    seconds: float
    characters: int


class JoinRequest(Model):
    clips: list[AudioClip]


class SpeechUsage(Model):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    speech_calls: int = 0
    speech_characters: int = 0
    rate_limited: int = 0  # waits on a provider's rate limit, as in Usage
    rate_limited_seconds: float = 0.0


class PodcastResult(Model):
    status: SideOutcome
    run_id: str
    audio: AudioClip | None = None  # the joined file
    script: list[dict[str, str]] = Field(default_factory=list)  # [{"speaker": ..., "text": ...}]
    usage: SpeechUsage = Field(default_factory=SpeechUsage)
    error: str | None = None


class DeckRequest(Model):
    markdown: str
    title: str = ""
    citations: list[Citation] = Field(default_factory=list)


class Deck(Model):
    blob: str  # the .pptx bytes in the blob store
    slides: int
    cut: str = ""  # what was left out to keep the deck at its size limit, "" when nothing


class SlidesResult(Model):
    status: SideOutcome
    run_id: str
    markdown: str = ""  # the Marp markdown the model wrote
    deck: Deck | None = None
    usage: SpeechUsage = Field(default_factory=SpeechUsage)
    error: str | None = None


class ProseInput(Model):
    model_config = ConfigDict(extra="forbid")

    option: ProseOption
    text: str = Field(min_length=1, max_length=200_000)
    command: str = ""  # what to do, for "zap"
    run_id: str | None = None  # where the text came from, if a run's report

    @field_validator("text")
    @classmethod
    def _text_has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the text is empty")
        return value


class ProseResult(Model):
    status: SideOutcome
    option: str
    text: str = ""
    usage: SpeechUsage = Field(default_factory=SpeechUsage)
    error: str | None = None


class SideStatus(Model):
    """What the ``status`` query of a side-output workflow returns."""

    kind: Literal["podcast", "slides", "prose"]
    phase: str  # writing, speaking, joining, building, completed, failed
    run_id: str | None = None
    done: int = 0  # e.g. lines spoken
    total: int = 0
    error: str | None = None
    rate_limited_since: str | None = None  # as in RunStatus
