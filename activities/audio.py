"""Audio files, read and joined without an encoder: MP3 (MPEG audio frames,
which can be concatenated) and WAV (the standard library's ``wave``).

Pure functions on bytes; ``AudioError`` says what is wrong with a clip.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass


class AudioError(ValueError):
    """The bytes are not audio we can read or join."""


@dataclass(frozen=True)
class Audio:
    format: str  # "mp3" or "wav"
    seconds: float


def describe(data: bytes) -> Audio:
    """The format and duration of an audio clip."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        params, frames = _wav(data)
        return Audio("wav", _wav_seconds(params, frames))
    frames, rate, samples = mp3_frames(data)
    return Audio("mp3", len(frames) * samples / rate)


def join(clips: list[bytes]) -> tuple[bytes, Audio]:
    """The clips one after the other, as one file of their (common) format."""
    if not clips:
        raise AudioError("there are no clips to join")
    formats = {describe(clip).format for clip in clips}
    if len(formats) > 1:
        raise AudioError(f"the clips come in different formats ({', '.join(sorted(formats))})")
    if formats == {"wav"}:
        return _join_wav(clips)
    return _join_mp3(clips)


# --- MP3 -------------------------------------------------------------------------

# Bit rates (kbit/s) by index, for MPEG-1 Layer III and MPEG-2/2.5 Layer III.
_BITRATES = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0),
}
_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}  # by version bits


def _id3v2_size(data: bytes) -> int:
    """Bytes of an ID3v2 tag at the start (0 if none)."""
    if len(data) < 10 or data[:3] != b"ID3":
        return 0
    size = 0
    for byte in data[6:10]:
        size = (size << 7) | (byte & 0x7F)
    footer = 10 if data[5] & 0x10 else 0
    return 10 + size + footer


def _header(data: bytes, at: int) -> tuple[int, int, int] | None:
    """(frame length, sample rate, samples per frame) of the frame at ``at``."""
    if at + 4 > len(data) or data[at] != 0xFF or data[at + 1] & 0xE0 != 0xE0:
        return None
    version = (data[at + 1] >> 3) & 0x3  # 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
    layer = (data[at + 1] >> 1) & 0x3  # 1: Layer III
    bitrate_index = data[at + 2] >> 4
    rate_index = (data[at + 2] >> 2) & 0x3
    padding = (data[at + 2] >> 1) & 0x1
    if version == 1 or layer != 1 or rate_index == 3 or bitrate_index in (0, 15):
        return None
    rate = _RATES[version][rate_index]
    bitrate = _BITRATES[1 if version == 3 else 2][bitrate_index] * 1000
    if version == 3:
        return 144 * bitrate // rate + padding, rate, 1152
    return 72 * bitrate // rate + padding, rate, 576


def _is_info_frame(data: bytes, at: int, length: int) -> bool:
    """A Xing/Info/VBRI frame: metadata about the whole file, no audio."""
    frame = data[at : at + length]
    return b"Xing" in frame[:64] or b"Info" in frame[:64] or frame[36:40] == b"VBRI"


def mp3_frames(data: bytes) -> tuple[list[tuple[int, int]], int, int]:
    """The audio frames (offset, length), the sample rate and samples per
    frame; ID3 tags and a Xing/Info header frame are left out."""
    at = _id3v2_size(data)
    frames: list[tuple[int, int]] = []
    rate = samples = 0
    while at < len(data):
        header = _header(data, at)
        if header is None:
            if data[at : at + 3] == b"TAG" or not data[at:].strip(b"\x00"):
                break  # an ID3v1 tag or padding at the end
            raise AudioError(f"not an MP3 stream: no frame at byte {at}")
        length, frame_rate, frame_samples = header
        if rate and frame_rate != rate:
            raise AudioError("the MP3 stream changes its sample rate")
        if at + length > len(data):
            break  # a truncated last frame
        rate, samples = frame_rate, frame_samples
        if not (not frames and _is_info_frame(data, at, length)):
            frames.append((at, length))
        at += length
    if not frames:
        raise AudioError("no MP3 audio frames")
    return frames, rate, samples


def _join_mp3(clips: list[bytes]) -> tuple[bytes, Audio]:
    out, total, common = io.BytesIO(), 0.0, None
    for clip in clips:
        frames, rate, samples = mp3_frames(clip)
        if common is not None and rate != common:
            raise AudioError(f"the clips have different sample rates ({common} and {rate} Hz)")
        common = rate
        for at, length in frames:
            out.write(clip[at : at + length])
        total += len(frames) * samples / rate
    return out.getvalue(), Audio("mp3", total)


# --- WAV -------------------------------------------------------------------------


def _wav(data: bytes) -> tuple[wave._wave_params, bytes]:
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            params = reader.getparams()
            frames = reader.readframes(reader.getnframes())
    except (wave.Error, EOFError) as err:
        raise AudioError(f"not a readable WAV file: {err}") from None
    return params, frames


def _wav_seconds(params: wave._wave_params, frames: bytes) -> float:
    width = params.sampwidth * params.nchannels
    return len(frames) / width / params.framerate if width and params.framerate else 0.0


def _join_wav(clips: list[bytes]) -> tuple[bytes, Audio]:
    first, joined = None, []
    for clip in clips:
        params, frames = _wav(clip)
        shape = (params.nchannels, params.sampwidth, params.framerate)
        if first is not None and shape != first:
            raise AudioError(f"the WAV clips differ (channels, sample width, rate): {first} and {shape}")
        first = shape
        joined.append(frames)
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(first[0])
        writer.setsampwidth(first[1])
        writer.setframerate(first[2])
        writer.writeframes(b"".join(joined))
    data = out.getvalue()
    params, frames = _wav(data)
    return data, Audio("wav", _wav_seconds(params, frames))
