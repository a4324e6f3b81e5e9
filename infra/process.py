"""Process lifecycle shared by the worker and the CLI: signals that stop work
cleanly, and an exit that flushes first and skips interpreter teardown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from infra.tracing import flush_tracing


def _stop_signals() -> list[signal.Signals]:
    """Ctrl-C, SIGTERM and SIGHUP (the terminal closed, ``tmux
    kill-session``); SIGHUP only when it is not ignored (``nohup``)."""
    found = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        found.append(signal.SIGHUP)
    return found


@contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP set ``stop`` instead of interrupting (a
    container's PID 1 ignores SIGTERM unless it handles it; a closed terminal
    must not leave a dev server or a worker's children behind)."""
    loop = asyncio.get_running_loop()
    handled = []
    for sig in _stop_signals():
        try:
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):  # not on this platform / thread
            pass
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


@contextmanager
def cancel_on_sigterm() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) cancel the current task as
    Ctrl-C does, so local servers and workers stop cleanly."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    signals = [sig for sig in _stop_signals() if sig != signal.SIGINT]
    for sig in signals:
        loop.add_signal_handler(sig, task.cancel)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def exit_now(code: int) -> None:
    """Flush spans, logs and output, then end the process without interpreter
    teardown: the SDK's native runtime can abort (SIGABRT) while Python
    finalises (sdk-python issue #300)."""
    flush_tracing()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # e.g. the reader of a pipe went away
            pass
    os._exit(code)


def protect_secrets() -> bool:
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): its
    ``/proc/<pid>/environ``, memory and file descriptors then belong to
    root, so code running as the same user (a sandbox that cannot drop
    privileges) cannot read the keys in its environment or attach to it.
    False where the platform has no prctl."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False
