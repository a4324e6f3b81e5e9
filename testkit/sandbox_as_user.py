"""Runs the local sandbox as an unprivileged worker would (the test starts
this as another user) and reports what model-written code could do:

    python -m testkit.sandbox_as_user PORT  →  one JSON line

The test opens a loopback listener on PORT; this process holds a secret in
its environment, as a worker holds its keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid

from activities.sandbox.local import LocalSandbox
from infra.process import protect_secrets

SECRET = "sk-this-worker-key-must-stay-secret"


async def main(port: int) -> dict:
    os.environ["OPENAI_API_KEY"] = SECRET
    protect_secrets()
    box = LocalSandbox(processes=16, timeout=30)
    marker = f"survivor-{uuid.uuid4().hex}"
    report: dict = {"uid": os.getuid()}
    try:
        isolation = await box.isolation()
        report["isolation"] = {
            "network": isolation.network,
            "pid": isolation.pid,
            "user": isolation.user,
            "refusal": isolation.refusal,
        }
        if isolation.refusal:
            return report
        me = os.getpid()
        cells = {
            "environ": f"try:\n    print(open('/proc/{me}/environ', 'rb').read().count(b'{SECRET}'))\nexcept OSError as e:\n    print(type(e).__name__)",
            "connect": f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)",
            "fork": "import subprocess\nstarted = 0\nprocs = []\nfor _ in range(60):\n    try:\n        procs.append(subprocess.Popen(['sleep', '30']))\n        started += 1\n    except OSError:\n        break\nprint(started)",
            "escape": f"import subprocess\nsubprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 300'], start_new_session=True)\nprint('started')",
        }
        for name, code in cells.items():
            result = await box.run(name, code)
            report[name] = (result.stdout or result.error or "").strip()
        await box.close_all()
        time.sleep(0.5)
        report["left_behind"] = sum(
            marker in open(f"/proc/{p}/cmdline", "rb").read().decode("utf-8", "replace")
            for p in os.listdir("/proc")
            if p.isdigit() and os.path.exists(f"/proc/{p}/cmdline")
        )
    finally:
        await box.close_all()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1])))))
