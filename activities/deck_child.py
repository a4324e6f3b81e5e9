"""Building a deck in a child process (see ``deck.build_in_child``):

    python -m activities.deck_child < request.json

reads a ``DeckRequest`` and prints ``{"data": <base64 .pptx>, "slides": n,
"cut": …}``, or ``{"refused": "<reason>", "type": …}``.
"""

from __future__ import annotations

import base64
import json
import sys

from temporalio.exceptions import ApplicationError

from activities.deck import build_deck_file
from infra.child_limits import limit_memory
from workflows.side_models import DeckRequest


def main() -> None:
    limit_memory()  # before reading what may be hostile
    request = DeckRequest.model_validate_json(sys.stdin.buffer.read())
    try:
        data, slides, cut = build_deck_file(request)
    except ApplicationError as err:
        print(json.dumps({"refused": err.message, "type": err.type}))
        return
    print(json.dumps({"data": base64.b64encode(data).decode("ascii"), "slides": slides, "cut": cut}))


if __name__ == "__main__":
    main()
