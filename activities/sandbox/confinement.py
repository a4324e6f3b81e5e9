"""What confines a local sandbox session's processes on this host, beyond
namespaces: cgroups (memory and processes for the session as a whole),
session uids claimed with lock files (no two workers on a machine share one),
killing what a session leaves behind, and its disk use.

Used by ``activities/sandbox/local.py``; plain functions on the host's files.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import stat
import tempfile
import time
from contextlib import suppress

from activities.sandbox.base import SandboxError

log = logging.getLogger(__name__)


def cgroup_kind(root: str) -> str | None:
    """ "v2" or "v1" when this process may make cgroups with memory and pids
    limits under ``root``, else None."""
    try:
        v2 = os.path.join(root, "cgroup.controllers")
        if os.path.exists(v2):
            controllers = open(v2).read().split()
            if {"memory", "pids"} <= set(controllers) and os.access(root, os.W_OK):
                return "v2"
            return None
        if all(os.access(os.path.join(root, c), os.W_OK) for c in ("memory", "pids")):
            return "v1"
    except OSError:
        pass
    return None


def make_cgroups(root: str, kind: str, limits: dict) -> list[str]:
    """The session's cgroup folders, with its memory and process limits."""
    name = f"deepresearch-sandbox/{os.getpid()}-{time.monotonic_ns()}"
    memory, pids = str(limits["memory_mb"] << 20), str(limits["processes"])
    try:
        if kind == "v2":
            path = os.path.join(root, name)
            os.makedirs(path)
            write(os.path.join(path, "memory.max"), memory)
            write(os.path.join(path, "memory.swap.max"), "0")
            write(os.path.join(path, "pids.max"), pids)
            return [path]
        made = []
        for controller, file, value in (("memory", "memory.limit_in_bytes", memory), ("pids", "pids.max", pids)):
            path = os.path.join(root, controller, name)
            os.makedirs(path)
            made.append(path)
            write(os.path.join(path, file), value)
        return made
    except OSError as e:
        log.warning("cannot make the session's cgroup (%s): limits stay per process", e)
        return []


def write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


# The shell puts itself into the session's cgroups, then becomes the command,
# so everything the session starts is inside. Not a preexec_fn: Python between
# fork and exec in the multi-threaded worker can wait for ever on a lock
# another thread held at the fork (seen in CI: the worker froze in Popen).
_JOIN = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do { echo $$ > "$1/cgroup.procs"; } 2>/dev/null; '
    'shift; n=$((n - 1)); done; exec "$@"'
)


def joining_cgroups(paths: list[str]) -> list[str]:
    """A command prefix that joins the cgroups ``paths`` (a failed join is
    skipped, as the limits then are per process) and execs what follows."""
    return ["/bin/sh", "-c", _JOIN, "sh", str(len(paths)), *paths] if paths else []


def uid_lock_folder(folder: str | None) -> str:
    """The folder where root workers claim session uids: one per machine,
    root's own."""
    if folder is None:
        folder = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
        folder = os.path.join(folder, "deepresearch-sandbox-uids")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as e:
        raise SandboxError(f"cannot make {folder} to claim session uids in: {e}") from e
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxError(f"{folder} is not a private folder of this user: session uids cannot be claimed there")
    return folder


def claim_uid(folder: str, uid: int) -> int | None:
    """The fd of an exclusive lock on ``uid`` (held until closed, or until
    the worker ends), or None when another session holds it."""
    fd = os.open(os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (the session's own uid)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)


def kill_cgroups(paths: list[str]) -> None:
    """SIGKILL every process in the session's cgroups, until none is left
    (one may fork while it is being killed)."""
    for _ in range(100):
        pids = set()
        for path in paths:
            with suppress(OSError), open(os.path.join(path, "cgroup.procs")) as f:
                pids |= {int(pid) for pid in f.read().split()}
        if not pids:
            return
        for pid in pids:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def remove_cgroup(path: str) -> None:
    """A cgroup can be removed once its killed processes have exited."""
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
    log.warning("cannot remove the session's cgroup %s: processes are left in it", path)


def size_over(folder: str, limit: int) -> bool:
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            with suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_blocks * 512
            if total > limit:
                return True
    return False
