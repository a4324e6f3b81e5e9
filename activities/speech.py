"""The podcast's voice: one line spoken through an OpenAI-compatible speech
endpoint (``POST /v1/audio/speech``: OpenAI's TTS or a local server), and
the clips joined into one file. Audio bytes live in the blob store; history
holds references.

``DEEPRESEARCH_TTS_MODEL`` (default gpt-4o-mini-tts), ``DEEPRESEARCH_TTS_VOICES``
(female host, male host; default alloy,onyx) and ``DEEPRESEARCH_TTS_BASE_URL``
(default ``OPENAI_BASE_URL``) configure it.
"""

from __future__ import annotations

import asyncio

import openai
from openai import AsyncOpenAI
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import audio
from activities.heartbeat import heartbeating
from activities.llm import classify
from infra.blobs import BlobStore
from infra.settings import Settings
from workflows.side_models import AudioClip, JoinRequest, SpeechRequest

MAX_INPUT_CHARS = 4096  # OpenAI's limit for one speech request


class SpeechActivities:
    def __init__(self, settings: Settings, blobs: BlobStore) -> None:
        self.settings = settings
        self.blobs = blobs
        self.client = AsyncOpenAI(
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.tts_base_url,
            max_retries=0,  # Temporal owns retrying
            timeout=settings.model_timeout,
        )

    def voice_for(self, speaker: str) -> str:
        female, male = self.settings.tts_voices
        return male if speaker == "male" else female

    @activity.defn(name="speak")
    async def speak(self, request: SpeechRequest) -> AudioClip:
        """One line of the script as an audio clip (MP3 asked for; a server
        that answers WAV is fine)."""
        text = request.text[:MAX_INPUT_CHARS]
        try:
            async with heartbeating():
                response = await self.client.audio.speech.create(
                    model=self.settings.tts_model,
                    voice=self.voice_for(request.voice),
                    input=text,
                    response_format="mp3",
                )
                data = response.content
        except openai.OpenAIError as err:
            where = self.settings.tts_base_url or "OpenAI"
            raise classify(err, self.settings.secrets, "speech endpoint", where) from None
        try:
            described = audio.describe(data)
        except audio.AudioError as err:
            # A cut-off answer is worth another try; the retry policy bounds it.
            raise ApplicationError(f"the speech endpoint sent no usable audio: {err}", type="SpeechUnusable") from None
        blob = await self.blobs.put_bytes(data)
        return AudioClip(blob=blob, format=described.format, seconds=described.seconds, characters=len(text))

    @activity.defn(name="join_audio")
    async def join_audio(self, request: JoinRequest) -> AudioClip:
        """The clips, in order, as one audio file."""
        clips = await asyncio.gather(*(self.blobs.get_bytes(c.blob) for c in request.clips))
        try:
            data, joined = await asyncio.to_thread(audio.join, list(clips))
        except audio.AudioError as err:
            raise ApplicationError(
                f"the clips cannot be joined: {err}", type="AudioJoinError", non_retryable=True
            ) from None
        blob = await self.blobs.put_bytes(data)
        characters = sum(c.characters for c in request.clips)
        return AudioClip(blob=blob, format=joined.format, seconds=joined.seconds, characters=characters)
