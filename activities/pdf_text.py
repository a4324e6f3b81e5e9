"""Reading a PDF in a child process (see ``documents.pdf_in_child``):

    python -m activities.pdf_text '["at <url>", max_pages, max_chars, max_seconds]' < file.pdf

prints ``{"title": …, "markdown": …}`` or ``{"refused": "<reason>"}``.
"""

from __future__ import annotations

import json
import sys

from activities.documents import CrawlRefused, pdf_to_markdown
from infra.child_limits import limit_memory


def main() -> None:
    limit_memory()  # before reading what may be hostile
    source, max_pages, max_chars, max_seconds = json.loads(sys.argv[1])
    data = sys.stdin.buffer.read()
    try:
        title, markdown = pdf_to_markdown(
            data, source, max_pages=max_pages, max_chars=max_chars, max_seconds=max_seconds
        )
    except CrawlRefused as err:
        print(json.dumps({"refused": str(err)}))
        return
    print(json.dumps({"title": title, "markdown": markdown}))


if __name__ == "__main__":
    main()
