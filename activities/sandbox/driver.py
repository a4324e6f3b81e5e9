"""The program that runs inside a sandbox session process.

The local sandbox starts ``python -I -c <this file's text> LIMITS`` (the
sandboxed user may not be able to read the worker's files, so the text is
passed, not the path). Requests and replies are JSON lines on private copies
of fds 0 and 1; user code gets an empty stdin, and anything it writes at the
fd level goes to the log on fd 2. The worker never imports this module.
"""

import ast
import builtins
import io
import json
import linecache
import os
import resource
import signal
import sys
import traceback
import types

CAP = 20_000  # characters of output kept per stream; set from the limits in main()


def loopback_up():
    import fcntl
    import socket
    import struct

    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def private_mounts(size_mb, reveal, hidden=(), disk_mb=0, owner=None):
    # In our own mount namespace (unshare --mount, propagation private): each
    # shared scratch directory, the directory holding all sessions' directories
    # and, for ``reveal``, each directory the session user cannot enter (where
    # the interpreter may live, say /root/.pyenv) is covered by an empty
    # read-only tmpfs into which only what the session needs is bound back:
    # its own directory (writable) and the interpreter's paths (read-only).
    # /dev/shm becomes a private tmpfs. Everything dies with the session.
    import ctypes
    import stat

    libc = ctypes.CDLL(None, use_errno=True)
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384

    def mount(source, target, fstype, flags, data=None):
        def enc(v):
            return None if v is None else v.encode()

        if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {target}: {os.strerror(err)}")

    def under(path, folder):
        return path.startswith(folder.rstrip("/") + "/")

    here = os.getcwd()
    wanted = {here}
    if reveal:
        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *filter(None, sys.path)]
        wanted |= {os.path.normpath(f(p)) for p in paths for f in (os.path.abspath, os.path.realpath)}
    wanted = sorted(p for p in wanted if os.path.isdir(p))
    wanted = [p for i, p in enumerate(wanted) if not any(under(p, q) for q in wanted[:i])]
    covers = {os.path.realpath(d) for d in ("/tmp", "/var/tmp", "/run/lock") if os.path.isdir(d)}
    covers.add(os.path.dirname(here))
    covers |= {h for h in hidden if os.path.isdir(h) and not under(here, h) and here != h}
    if reveal:
        for p in wanted:
            parts = p.split("/")
            for i in range(2, len(parts)):
                above = "/".join(parts[:i])
                if not os.stat(above).st_mode & stat.S_IXOTH:
                    covers.add(above)
                    break
    covers = sorted(c for c in covers if c != "/" and c not in wanted)
    covers = [c for i, c in enumerate(covers) if not any(under(c, o) for o in covers[:i])]
    held = {p: os.open(p, os.O_PATH) for p in wanted if any(under(p, c) for c in covers)}
    mask = os.umask(0o022)
    for cover in covers:
        mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        for p, fd in held.items():
            if under(p, cover):
                os.makedirs(p)
                mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
                if p != here:
                    mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        mount("tmpfs", cover, "tmpfs", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=755")
    os.umask(mask)
    for fd in held.values():
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=1777")
    if disk_mb:  # the session's own directory: a tmpfs of a fixed size
        ids = f",uid={owner[0]},gid={owner[1]}" if owner else ""
        mount("tmpfs", here, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_mb}m,mode=700{ids}")
    os.chdir(here)


def become_init_reaper():
    """As the first process of a PID namespace: fork the session, reap what
    it leaves, and end (taking every process of the namespace along) when
    the session's process ends. The first process of a namespace ignores
    signals it has no handler for, so it must not be the session itself."""
    child = os.fork()
    if child == 0:
        return
    for fd in (0, 1):
        os.close(fd)
    while True:
        pid, status = os.wait()
        if pid == child:
            # A signal's death as 128 + its number, as shells report it.
            os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def limit(name, value):
    _, hard = resource.getrlimit(name)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(name, (value, hard if name == resource.RLIMIT_CPU else value))


def clip(text):
    return text if len(text) <= CAP else text[:CAP] + "\n... [output truncated]"


class Capped(io.StringIO):
    full = False

    def write(self, s):
        room = CAP - self.tell()
        if len(s) > room:
            self.full = True
        super().write(s[: max(room, 0)])
        return len(s)

    def text(self):
        return self.getvalue() + ("\n... [output truncated]" if self.full else "")


def run(code, name, namespace):
    # Lines as Python reads them (CR, LF, CRLF; not str.splitlines' form feed
    # or U+2028, which a string literal may hold): tracebacks quote the right line.
    linecache.cache[name] = (len(code), None, io.StringIO(code, newline=None).readlines(), name)
    out, err = Capped(), Capped()
    sys.stdout, sys.stderr = out, err
    error = None
    try:
        tree = compile(code, name, "exec", ast.PyCF_ONLY_AST)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, name, "exec"), namespace)
        if last is not None:  # echo the last expression, as a notebook does
            value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
            if value is not None:
                print(repr(value))
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # drop the driver's own frames
        error = clip("".join(traceback.format_exception(type(e), e, tb)))
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    return {"stdout": out.text(), "stderr": err.text(), "error": error}


def main() -> None:
    global CAP
    limits = json.loads(sys.argv[1])
    CAP = limits["output_chars"]
    if limits.get("netns"):
        try:
            loopback_up()  # code may still talk to itself over 127.0.0.1
        except OSError as e:
            print(f"[sandbox] loopback stays down: {e}", file=sys.stderr)
    if limits.get("pidns") and os.getpid() == 1:
        become_init_reaper()
    if limits.get("private_tmp"):
        private_mounts(
            limits["file_mb"],
            reveal=True,
            hidden=limits.get("hidden") or (),
            disk_mb=limits.get("disk_mb") or 0,
            owner=limits.get("user"),
        )
    if limits.get("user"):
        uid, gid = limits["user"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    limit(resource.RLIMIT_AS, limits["memory_mb"] << 20)
    limit(resource.RLIMIT_FSIZE, limits["file_mb"] << 20)
    limit(resource.RLIMIT_CPU, limits["cpu_seconds"])
    if limits.get("processes"):
        limit(resource.RLIMIT_NPROC, limits["processes"])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-big writes raise OSError instead

    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)

    user_main = types.ModuleType("__main__")
    user_main.__builtins__ = builtins
    sys.modules["__main__"] = user_main

    replies.write("ready\n")
    replies.flush()
    for n, line in enumerate(requests, 1):
        replies.write(json.dumps(run(json.loads(line)["code"], f"<cell {n}>", user_main.__dict__)) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
