"""What ``doctor`` asks the model and speech endpoints, asked as the worker
asks them (the CLI reaches this through worker.py): a chat request sent by
the worker's own ``ModelEndpoint`` (streamed unless
DEEPRESEARCH_MODEL_STREAM=off, an empty stream asked again without
streaming), and audio read as a podcast reads it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import openai

from activities.audio import describe
from activities.llm_stream import BrokenStream, Completion, Looping, Silence, ToolStreamRefused
from activities.model_endpoint import ModelEndpoint
from infra.settings import Settings


@dataclass
class ChatProbe:
    completion: Completion | None  # None: the request failed
    problem: str = ""  # how it failed, in a few words
    streams_tools: bool = True  # False: a streamed tool call came back as an empty stream (runs use text tools)


async def probe_chat(settings: Settings, body: dict, seconds: float) -> ChatProbe:
    """``body`` sent as a run sends a request, within ``seconds``; never raises."""
    quick = dataclasses.replace(settings, model_timeout=seconds, model_idle_timeout=seconds)
    endpoint = ModelEndpoint(quick)
    try:
        return ChatProbe(await endpoint.send(dict(body)))
    except ToolStreamRefused as err:
        return ChatProbe(None, str(err), streams_tools=False)
    except openai.APIStatusError as err:
        return ChatProbe(None, f"HTTP {err.status_code}: {_short(err.message, 120)}")
    except openai.OpenAIError as err:
        return ChatProbe(None, f"{type(err).__name__}: {_short(err, 100)}")
    except Silence:
        return ChatProbe(None, f"no answer within {seconds:g} s")
    except (BrokenStream, Looping) as err:
        return ChatProbe(None, _short(err, 120))
    finally:
        await endpoint.client.close()


def audio_format(data: bytes) -> str:
    """ "mp3" or "wav": what a podcast can join; raises ValueError for anything else."""
    return describe(data).format


def _short(text: object, limit: int) -> str:
    return " ".join(str(text).split())[:limit]
