"""The model activity heartbeats while it reads a reply, not only while the
reply streams: on a busy worker the reading (thousands of tool calls, a
long report's support) can outlast the 10 s heartbeat timeout, and Temporal
would then time the activity out and pay for the model again (seen on a
loaded CI: a reply of 2,100 tool calls asked for twice).

The real activity, in the SDK's activity environment, against the scripted
OpenAI-compatible server; the reply's readers (``activities/off_loop.REPLIES``)
are kept busy, as on a loaded worker, until the test has seen heartbeats."""

from __future__ import annotations

import asyncio
import threading

from temporalio.testing import ActivityEnvironment

from activities.heartbeat import EVERY_SECONDS
from activities.llm import ModelActivities
from activities.off_loop import REPLIES
from infra.blobs import blob_store
from infra.settings import Settings
from testkit.llm_server import Reply
from testkit.runs import polled
from workflows.models import ModelRequest


async def test_the_model_activity_heartbeats_while_its_reply_waits_to_be_read(llm, worker_env, data_dir):
    llm.handler = lambda request: Reply(tool_calls=[("web_search", {"query": f"q{i}"}) for i in range(50)])
    model = ModelActivities(Settings.from_env(worker_env), blob_store(data_dir))
    request = ModelRequest(
        role="researcher",
        prompt="researcher",
        variables={"locale": "en-US"},
        messages=[{"role": "user", "content": "How many ships did the Lantern Rock keeper log in 1911?"}],
        tools=["web_search"],
    )
    env, beats = ActivityEnvironment(), []
    env.on_heartbeat = lambda *details: beats.append(details)
    release = threading.Event()
    busy = [REPLIES.submit(release.wait) for _ in range(32)]  # every reader thread taken
    try:
        call = asyncio.create_task(env.run(model.chat, request))
        assert await polled(lambda: asyncio.sleep(0, len(llm.calls())), lambda n: n == 1) == 1
        await asyncio.sleep(0.5)  # the reply streamed; it now waits for a reader
        served = len(beats)
        await asyncio.sleep(EVERY_SECONDS + 1)
        assert not call.done() and len(beats) > served  # still beating while the reply waits
    finally:
        release.set()
    reply = await call
    assert [c.name for c in reply.tool_calls] == ["web_search"] * 50 and len(llm.calls()) == 1  # read, asked once
    assert all(f.result() for f in busy)
