"""The E2B backend, tested against the e2b-code-interpreter SDK's interface.

E2B itself cannot be reached from the tests, so two stand-ins are used:

- ``FakeSandbox``: an object with the same methods and signatures as the SDK's
  ``AsyncSandbox`` (checked below, so it cannot drift), answering with the SDK's
  own result classes and exceptions, running cells in a Python namespace;
- a scripted HTTP endpoint on loopback speaking E2B's API and the code
  interpreter's ``/execute`` stream, driven by the real SDK.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import functools
import inspect
import io
import itertools
import json
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from e2b.connection_config import ApiParams
from e2b_code_interpreter import AsyncSandbox, Execution, ExecutionError, Logs, Result, SandboxException
from e2b_code_interpreter.exceptions import format_execution_timeout_error
from temporalio.exceptions import ApplicationError

from activities.sandbox import make_sandbox
from activities.sandbox.activities import SandboxActivities
from activities.sandbox.base import CellResult, Sandbox, SandboxError
from activities.sandbox.e2b import E2BSandbox
from infra.settings import Settings
from workflows.tool_models import CodeRequest

try:
    from e2b import SandboxNotRunningException
except ImportError:  # older SDKs
    from e2b_code_interpreter import NotFoundException as SandboxNotRunningException

RED, RESET = "\x1b[0;31m", "\x1b[0m"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(1000)


class FakeSandbox:
    """Behaves like ``AsyncSandbox`` for the calls the adapter makes."""

    def __init__(self, cloud: FakeCloud, sandbox_id: str, options: dict) -> None:
        self.cloud = cloud
        self.sandbox_id = sandbox_id
        self.options = options
        self.namespace: dict = {"hang": None, "show_png": None}
        self.killed = False
        self.codes: list[str] = []
        self.leases: list[int] = []

    async def run_code(
        self,
        code: str,
        language=None,
        context=None,
        on_stdout=None,
        on_stderr=None,
        on_result=None,
        on_error=None,
        envs=None,
        timeout=None,
        request_timeout=None,
    ) -> Execution:
        if self.killed:
            raise SandboxNotRunningException(f"sandbox {self.sandbox_id} was not found")
        if self.cloud.failures:
            raise self.cloud.failures.pop(0)
        self.codes.append(code)
        self.cloud.timeouts.add(timeout)
        if "hang()" in code:  # what the SDK does when the execution outlives ``timeout``
            await asyncio.sleep(timeout)
            raise format_execution_timeout_error()
        return self._execute(code)

    async def kill(self, **opts) -> bool:
        was_running, self.killed = not self.killed, True
        return was_running

    async def set_timeout(self, timeout: int, **opts) -> None:
        self.leases.append(timeout)

    def _execute(self, code: str) -> Execution:
        """A cell as a Jupyter kernel runs it: prints, display data, last value."""
        execution = Execution()
        out, err = io.StringIO(), io.StringIO()
        self.namespace["show_png"] = lambda: execution.results.append(
            Result(text="<Figure size 640x480 with 1 Axes>", png=base64.b64encode(PNG).decode())
        )
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                exec(compile(tree, "<cell>", "exec"), self.namespace)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), self.namespace)
                    if value is not None:
                        execution.results.append(Result(text=repr(value), is_main_result=True))
        except Exception as e:
            tb = "".join(traceback.format_exception(e))
            execution.error = ExecutionError(type(e).__name__, str(e), f"{RED}{tb}{RESET}")
        execution.logs = Logs(
            stdout=out.getvalue().splitlines(keepends=True), stderr=err.getvalue().splitlines(keepends=True)
        )
        return execution


class FakeCloud:
    """``create=`` for the adapter: checks every call against the SDK's signature."""

    def __init__(self) -> None:
        self.sandboxes: list[FakeSandbox] = []
        self.failures: list[BaseException] = []  # raised by the next run_code calls
        self.create_failures: list[BaseException] = []
        self.timeouts: set = set()
        self._ids = itertools.count(1)

    async def create(self, **options) -> FakeSandbox:
        bound = inspect.signature(AsyncSandbox.create).bind(**options)  # TypeError if not the SDK's
        assert set(bound.arguments.get("opts", {})) <= set(ApiParams.__annotations__)
        if self.create_failures:
            raise self.create_failures.pop(0)
        sandbox = FakeSandbox(self, f"sbx-{next(self._ids)}", options)
        self.sandboxes.append(sandbox)
        return sandbox

    @property
    def alive(self) -> list[FakeSandbox]:
        return [s for s in self.sandboxes if not s.killed]


@pytest.fixture
def cloud():
    return FakeCloud()


@pytest.fixture
async def e2b(cloud):
    box = E2BSandbox(api_key="e2b_test_key", create=cloud.create)
    yield box
    await box.close_all()


@pytest.mark.parametrize("name", ["run_code", "kill", "set_timeout"])
def test_fake_has_the_sdk_signatures(name):
    real = inspect.signature(getattr(AsyncSandbox, name))
    fake = inspect.signature(getattr(FakeSandbox, name))
    shape = lambda sig: [(p.name, p.kind, p.default) for p in sig.parameters.values()]  # noqa: E731
    assert shape(fake) == shape(real)
    assert inspect.iscoroutinefunction(inspect.unwrap(getattr(AsyncSandbox, name)))
    assert inspect.iscoroutinefunction(getattr(FakeSandbox, name))


def test_defaults_to_the_sdk_and_fits_the_protocol():
    box = E2BSandbox()
    assert box._create == AsyncSandbox.create
    for name in ("run", "close", "close_all"):
        assert list(inspect.signature(getattr(E2BSandbox, name)).parameters) == list(
            inspect.signature(getattr(Sandbox, name)).parameters
        )


def test_settings_choose_the_backend():
    box = make_sandbox(Settings.from_env({"E2B_API_KEY": "e2b_k", "OPENAI_API_KEY": "x"}))
    assert isinstance(box, E2BSandbox) and box.api_key == "e2b_k"
    local = make_sandbox(Settings.from_env({"E2B_API_KEY": "e2b_k", "DEEPRESEARCH_SANDBOX": "local"}))
    assert type(local).__name__ == "LocalSandbox"


async def test_one_sandbox_per_session_reused_within_the_step(e2b, cloud):
    assert (await e2b.run("step-1", "x = 20")).error is None
    result = await e2b.run("step-1", "x += 1\nprint(x * 2)", ["x = 20"])
    assert result == CellResult(stdout="42\n")
    assert len(cloud.sandboxes) == 1
    sandbox = cloud.sandboxes[0]
    assert sandbox.options["api_key"] == "e2b_test_key"
    assert sandbox.options["allow_internet_access"] is False  # as the local sandbox: no network
    assert "envs" not in sandbox.options  # nothing from the worker's environment
    assert sandbox.options["metadata"]["session"] == "step-1"
    assert sandbox.leases == [900, 900]  # its lifetime renewed after each cell
    assert cloud.timeouts == {60.0}  # the per-cell limit goes to the SDK

    other = await e2b.run("step-2", "print('x' in globals())")
    assert other.stdout == "False\n" and len(cloud.sandboxes) == 2


async def test_close_kills_the_sandbox(e2b, cloud):
    await e2b.run("a", "a = 1")
    await e2b.run("b", "b = 1")
    await e2b.close("a")
    assert [s.killed for s in cloud.sandboxes] == [True, False]
    await e2b.close("never-opened")
    await e2b.close_all()
    assert cloud.alive == []


async def test_a_new_session_replays_previous_cells_silently(e2b, cloud):
    cells = ["print('once')\nx = 40", "y = x + 2", "1 / 0"]
    result = await e2b.run("s", "print(x, y)", cells)
    assert result.stdout == "40 42\n"  # replayed output is dropped...
    assert "earlier cell 3 failed when re-run" in result.stderr  # ...but failures are noted
    assert cloud.sandboxes[0].codes == [*cells, "print(x, y)"]


async def test_cell_mismatch_starts_a_fresh_sandbox(e2b, cloud):
    await e2b.run("s", "n = 1")
    await e2b.run("s", "n += 1", ["n = 1"])  # the workflow never recorded this one
    result = await e2b.run("s", "n += 1\nprint(n)", ["n = 1"])
    assert result.stdout == "2\n"
    assert [s.killed for s in cloud.sandboxes] == [True, False]


async def test_an_expired_sandbox_is_recreated_and_replayed(e2b, cloud):
    await e2b.run("s", "x = 1")
    cloud.sandboxes[0].killed = True  # E2B ended it (lease ran out)
    result = await e2b.run("s", "print(x + 1)", ["x = 1"])
    assert result.stdout == "2\n" and len(cloud.sandboxes) == 2


async def test_errors_come_back_as_cleaned_tracebacks(e2b, cloud):
    result = await e2b.run("s", "def f(d):\n    return d['missing']\nprint('before')\nf({})")
    assert result.stdout == "before\n"
    assert "KeyError: 'missing'" in result.error and "Traceback" in result.error
    assert "\x1b[" not in result.error  # no terminal colours
    await e2b.run("s", "ok = 1")
    assert cloud.sandboxes[0].codes[-1] == "ok = 1"
    # A failed cell is not part of the session's history.
    assert (await e2b.run("s", "print(ok)", ["ok = 1"])).stdout == "1\n"
    assert len(cloud.sandboxes) == 1


async def test_results_and_charts_are_described(e2b):
    result = await e2b.run("s", "print('table')\nshow_png()\n6 * 7")
    assert result.stdout == ("table\n<Figure size 640x480 with 1 Axes>\n[chart: image/png, 1008 bytes]\n42\n")


async def test_output_is_capped(cloud):
    box = E2BSandbox(create=cloud.create, output_chars=100)
    try:
        result = await box.run("s", "import sys\nprint('x' * 500)\nsys.stderr.write('#' * 300)\n'y' * 200")
        assert result.stdout == ("x" * 100) + "\n... [output truncated]"
        assert result.stderr == ("#" * 100) + "\n... [output truncated]"
        failed = await box.run("s", "raise ValueError('v' * 500)")
        assert failed.error.endswith("\n... [output truncated]") and len(failed.error) < 130
    finally:
        await box.close_all()


async def test_cell_timeout_kills_the_sandbox_and_next_call_replays(cloud):
    box = E2BSandbox(create=cloud.create, timeout=0.3)
    try:
        await box.run("s", "x = 1")
        started = time.monotonic()
        result = await box.run("s", "hang()", ["x = 1"])
        assert time.monotonic() - started < 3
        assert result.error == "TimeoutError: the cell ran longer than 0.3 s and was stopped"
        assert cloud.sandboxes[0].killed
        assert (await box.run("s", "print(x)", ["x = 1"])).stdout == "1\n"
    finally:
        await box.close_all()


async def test_e2b_failures_raise_sandbox_error_for_a_retry(e2b, cloud):
    await e2b.run("s", "x = 1")
    cloud.failures.append(SandboxException("500 Internal Server Error"))
    with pytest.raises(SandboxError, match="500 Internal Server Error"):
        await e2b.run("s", "print(x)", ["x = 1"])
    assert cloud.sandboxes[0].killed  # state unknown: the retry starts over
    assert (await e2b.run("s", "print(x)", ["x = 1"])).stdout == "1\n"

    cloud.create_failures.append(SandboxException("503 Service Unavailable"))
    with pytest.raises(SandboxError, match="cannot create an E2B sandbox"):
        await e2b.run("t", "1")


async def test_a_rejected_key_fails_without_retries(cloud):
    from e2b_code_interpreter import AuthenticationException

    cloud.create_failures.append(AuthenticationException("Invalid API key"))
    box = E2BSandbox(api_key="bad", create=cloud.create)
    with pytest.raises(ApplicationError) as failure:
        await box.run("s", "1")
    assert failure.value.non_retryable and "E2B_API_KEY" in failure.value.message
    assert "bad" not in failure.value.message


async def test_run_python_activity_on_e2b(e2b):
    acts = SandboxActivities(e2b)
    ok = await acts.run_python(CodeRequest(session="step-1", code="import math\nmath.factorial(20)"))
    assert ok.content == "2432902008176640000" and not ok.error
    request = CodeRequest(session="step-1", code="1 / 0", previous=["import math\nmath.factorial(20)"])
    failed = await acts.run_python(request)
    assert failed.error and "ZeroDivisionError" in failed.content
    await acts.close_sandbox("step-1")


async def test_idle_sessions_are_forgotten_and_killed(cloud):
    box = E2BSandbox(create=cloud.create, idle_timeout=0.1)
    try:
        await box.run("s", "x = 1")
        await asyncio.sleep(0.2)
        await box.run("t", "y = 1")  # any call tidies up
        await asyncio.sleep(0)
        assert cloud.sandboxes[0].killed and not cloud.sandboxes[1].killed
        assert (await box.run("s", "print(x)", ["x = 1"])).stdout == "1\n"  # rebuilt
    finally:
        await box.close_all()


# --- the real SDK against a scripted E2B endpoint ----------------------------


class ScriptedE2B(BaseHTTPRequestHandler):
    """E2B's control-plane API and the code interpreter's /execute stream."""

    protocol_version = "HTTP/1.1"
    calls: list

    def log_message(self, *args):  # keep test output clean
        pass

    def _reply(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        self.server.calls.append(("POST", self.path, body, dict(self.headers)))
        if self.path == "/v2/sandboxes":
            if self.headers.get("X-API-KEY") != "e2b_scripted_key":
                return self._reply(401, b'{"code": 401, "message": "Invalid API key"}')
            sandbox = {
                "templateID": body["templateID"],
                "sandboxID": "sbx-scripted",
                "clientID": "c",
                "envdVersion": "0.2.0",
                "envdAccessToken": "envd-token",
            }
            return self._reply(201, json.dumps(sandbox).encode())
        if self.path == "/sandboxes/sbx-scripted/timeout":
            return self._reply(204)
        if self.path == "/execute":
            if "hang()" in body["code"]:
                time.sleep(3)
                return self._reply(200, b"", "application/x-ndjson")
            events = self.server.script[body["code"]]
            stream = "".join(json.dumps(e) + "\n" for e in events).encode()
            return self._reply(200, stream, "application/x-ndjson")
        self._reply(404, b"{}")

    def do_DELETE(self):
        self.server.calls.append(("DELETE", self.path, None, dict(self.headers)))
        self._reply(204)


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedE2B)
    server.daemon_threads = True
    server.calls = []
    server.script = {}
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


async def test_real_sdk_against_a_scripted_endpoint(endpoint):
    create = functools.partial(AsyncSandbox.create, api_url=endpoint.url, sandbox_url=endpoint.url)
    box = E2BSandbox(api_key="e2b_scripted_key", create=create, timeout=1)
    png = base64.b64encode(PNG).decode()
    endpoint.script = {
        "x = 20": [{"type": "number_of_executions", "execution_count": 1}],
        "plot()\nx + 1": [
            {"type": "stdout", "text": "plotting\n", "timestamp": 1},
            {"type": "result", "text": "<Figure size 640x480 with 1 Axes>", "png": png},
            {"type": "result", "text": "21", "is_main_result": True},
        ],
        "1 / 0": [
            {"type": "stderr", "text": "warning: careful\n", "timestamp": 2},
            {
                "type": "error",
                "name": "ZeroDivisionError",
                "value": "division by zero",
                "traceback": f"{RED}ZeroDivisionError{RESET} Traceback (most recent call last)\n----> 1 1 / 0\n"
                f"{RED}ZeroDivisionError{RESET}: division by zero",
            },
        ],
    }
    try:
        assert await box.run("step", "x = 20") == CellResult()
        result = await box.run("step", "plot()\nx + 1", ["x = 20"])
        assert result.stdout == ("plotting\n<Figure size 640x480 with 1 Axes>\n[chart: image/png, 1008 bytes]\n21\n")
        failed = await box.run("step", "1 / 0", ["x = 20", "plot()\nx + 1"])
        assert failed.stderr == "warning: careful\n"
        assert failed.error.endswith("ZeroDivisionError: division by zero") and "\x1b" not in failed.error

        timed_out = await box.run("step", "hang()", ["x = 20", "plot()\nx + 1"])
        assert timed_out.error == "TimeoutError: the cell ran longer than 1 s and was stopped"
    finally:
        await box.close_all()

    calls = [(method, path) for method, path, _, _ in endpoint.calls]
    assert calls[0] == ("POST", "/v2/sandboxes")
    assert calls.count(("POST", "/v2/sandboxes")) == 1  # one sandbox for the step
    assert ("DELETE", "/sandboxes/sbx-scripted") in calls  # killed after the timeout
    create_body = endpoint.calls[0][2]
    assert create_body["allow_internet_access"] is False and create_body["envVars"] == {}
    assert create_body["timeout"] == 900 and create_body["metadata"]["session"] == "step"
    executes = [body for method, path, body, _ in endpoint.calls if path == "/execute"]
    assert [e["code"] for e in executes] == ["x = 20", "plot()\nx + 1", "1 / 0", "hang()"]
    assert all(e["env_vars"] is None for e in executes)


async def test_real_sdk_with_a_rejected_key(endpoint):
    create = functools.partial(AsyncSandbox.create, api_url=endpoint.url, sandbox_url=endpoint.url)
    box = E2BSandbox(api_key="e2b_wrong_key", create=create)
    with pytest.raises(ApplicationError) as failure:
        await box.run("step", "1")
    assert failure.value.non_retryable and "E2B_API_KEY" in failure.value.message
