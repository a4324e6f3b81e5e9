"""The real worker (`python worker.py`) as a separate process, for tests that
kill it for real:

    with WorkerProcess(env, log_file) as worker:
        await worker.ready(client)        # polling the task queue
        ...
        worker.kill()                     # SIGKILL, no clean-up of any kind
        worker.start(); await worker.ready(client)

The worker runs in its own session (process group), so ``kill`` also takes
down any sandbox process it started, exactly as a machine failure would.
Output goes to ``log_file`` (appended across restarts).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from workflows.rate_limits import model_queue

PROJECT = Path(__file__).resolve().parents[1]


class WorkerProcessError(RuntimeError):
    pass


class WorkerProcess:
    def __init__(self, env: Mapping[str, str], log_file: Path, cwd: Path = PROJECT) -> None:
        self.env = dict(env)
        self.log_file = Path(log_file)
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def identity(self) -> str:
        """The SDK's default worker identity, as the server lists its pollers."""
        return f"{self.pid}@{socket.gethostname()}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> WorkerProcess:
        if self.alive():
            raise WorkerProcessError("the worker is already running")
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            log.write(f"--- start #{self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, "worker.py"],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1
        return self

    async def ready(self, client: Client | None = None, timeout: float = 30.0) -> None:
        """Wait until this process polls its task queue (with ``client``: as
        seen by the server, by worker identity; without: its start line plus
        a second)."""
        deadline = time.monotonic() + timeout
        while not self.log_text().count("worker on") >= self.starts:
            self._check_running()
            if time.monotonic() > deadline:
                raise WorkerProcessError(f"the worker did not start; see {self.log_file}")
            await asyncio.sleep(0.05)
        if client is None:
            await asyncio.sleep(1.0)
            self._check_running()
            return
        queue = self.env.get("DEEPRESEARCH_TASK_QUEUE", "deep-research")
        namespace = self.env.get("TEMPORAL_NAMESPACE", "default")
        polled = (
            (queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
            (queue, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),
            (model_queue(queue), TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),  # the model calls' own
        )
        while True:
            self._check_running()
            seen = set()
            for name, kind in polled:
                described = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(namespace=namespace, task_queue=TaskQueue(name=name), task_queue_type=kind)
                )
                if any(p.identity == self.identity for p in described.pollers):
                    seen.add((name, kind))
            if len(seen) == len(polled):
                return
            if time.monotonic() > deadline:
                raise WorkerProcessError(f"the worker never polled {queue}; see {self.log_file}")
            await asyncio.sleep(0.1)

    def _check_running(self) -> None:
        if not self.alive():
            code = self.process.returncode if self.process else None
            raise WorkerProcessError(
                f"the worker exited (code {code}); see {self.log_file}:\n{self.log_text()[-2000:]}"
            )

    def kill(self) -> None:
        """SIGKILL the worker's whole process group and reap it."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            raise WorkerProcessError("kill: the worker is not running")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.kills += 1
        with open(self.log_file, "ab") as log:
            log.write(f"--- SIGKILL at {time.time():.3f}\n".encode())

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (then SIGKILL after ``timeout``); no-op when not running."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
