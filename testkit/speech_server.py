"""A scripted OpenAI-compatible speech server on loopback
(``POST /v1/audio/speech``) that answers with real, short audio clips:
silent MPEG-1 Layer III frames (MP3) or 16-bit PCM (WAV), 50 ms of audio per
character of input, so the joined podcast's length can be checked.

    with ScriptedSpeech() as speech:
        AsyncOpenAI(base_url=speech.base_url, api_key="test-openai-key").audio.speech.create(...)
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Callable

from testkit.http_base import Response, ScriptedServer, json_response

SECONDS_PER_CHAR = 0.05
MP3_RATE = 44_100
MP3_FRAME_SAMPLES = 1152
# MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, mono, no padding: 417 bytes a frame.
MP3_HEADER = bytes([0xFF, 0xFB, 0x90, 0xC4])
MP3_FRAME = MP3_HEADER + bytes(417 - 4)
WAV_RATE = 8_000


def mp3_clip(seconds: float, id3: bool = True) -> bytes:
    """Silent MP3: an ID3v2 tag (as real encoders write), then whole frames."""
    frames = max(math.ceil(seconds * MP3_RATE / MP3_FRAME_SAMPLES), 1)
    tag = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + bytes(10) if id3 else b""
    return tag + MP3_FRAME * frames


def wav_clip(seconds: float) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(WAV_RATE)
        writer.writeframes(bytes(2 * max(int(seconds * WAV_RATE), 1)))
    return out.getvalue()


class ScriptedSpeech(ScriptedServer):
    path = "/v1/audio/speech"

    def __init__(self, api_key: str = "test-openai-key", audio_format: str = "mp3") -> None:
        super().__init__(api_key)
        self.audio_format = audio_format  # what it answers, whatever is asked: "mp3" or "wav"
        self.hold: Callable[[dict], None] = lambda body: None  # called before answering (tests block here)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _record(self, body: dict) -> dict:
        return {"input": body.get("input", ""), "voice": body.get("voice"), "model": body.get("model"), "body": body}

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        return json_response(status, {"error": {"message": message, "type": "invalid_request_error"}}, headers)

    def _reply(self, body: dict) -> Response:
        text = body.get("input") or ""
        if not text.strip() or len(text) > 4096:
            return self._error(400, f"input must be 1 to 4096 characters, got {len(text)}", {})
        self.hold(body)
        seconds = len(text) * SECONDS_PER_CHAR
        if self.audio_format == "wav":
            return Response(200, wav_clip(seconds), {"Content-Type": "audio/wav"})
        return Response(200, mp3_clip(seconds), {"Content-Type": "audio/mpeg"})
