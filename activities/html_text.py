"""Converting HTML pages in a child process (see ``documents.html_in_child``
and ``activities/child_pool.py``): ``python -m activities.html_text`` reads
requests on its input, one after another, until its input ends::

    {"charset": …, "url": …, "length": N, "seconds": S}\\n<N bytes of HTML>

It says ``ready`` on a line once its imports are done, and answers each
request with its length on a line, then ``{"title": …, "markdown": …}``,
``{"refused": "<reason>"}`` or ``{"failed": "<error>"}``. A page it has not
converted within ``seconds`` (and a little more) ends the process (SIGALRM):
its parent kills it before, unless the parent is gone.
"""

from __future__ import annotations

import json
import math
import signal
import sys

from activities.child_pool import ALARM_MARGIN
from activities.documents import CrawlRefused, html_to_markdown
from infra.child_limits import limit_memory


def answer(request: dict, body: bytes) -> dict:
    try:
        title, markdown = html_to_markdown(body, request.get("charset"), str(request.get("url") or ""))
    except CrawlRefused as err:
        return {"refused": str(err)}
    except MemoryError:
        return {"failed": "the page needs more memory than a conversion may take"}
    except Exception as err:  # noqa: BLE001 - whatever the page does to the converter, one line back
        return {"failed": f"{type(err).__name__}: {err}"[:300]}
    return {"title": title, "markdown": markdown}


def main() -> None:
    limit_memory()  # before reading what may be hostile
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle; it ends us by closing our input
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the alarm ends the process, whatever it is doing
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(b"ready\n")  # imports done: the parent's clock for a page starts now
    stdout.flush()
    while line := stdin.readline():
        request = json.loads(line)
        signal.alarm(math.ceil(float(request["seconds"])) + ALARM_MARGIN)
        body = stdin.read(int(request["length"]))
        reply = json.dumps(answer(request, body), ensure_ascii=False).encode("utf-8", "replace")
        signal.alarm(0)
        stdout.write(b"%d\n" % len(reply) + reply)
        stdout.flush()


if __name__ == "__main__":
    main()
