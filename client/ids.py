"""What a workflow id says: a podcast's or a deck's id is its run's id with
``-podcast`` or ``-slides``; a prose rewrite's starts with ``prose-``. Any
other id is a research run's (``research-…`` unless the user chose it)."""

from __future__ import annotations

SIDE_SUFFIXES = ("-podcast", "-slides", "-ask")  # -ask: the run's follow-up thread
PROSE_PREFIX = "prose-"


def thread_id(run_id: str) -> str:
    """The id of a run's follow-up thread (workflow ``FollowUp``)."""
    return f"{run_id}-ask"


def side_id(run_id: str, kind: str) -> str:
    """The id of a run's podcast or slides."""
    return f"{run_id}-{kind}"


def may_be_side_output(workflow_id: str) -> bool:
    """Whether the id has a side output's shape (a run's own id may have it too:
    ask Temporal for the workflow type to be sure)."""
    return workflow_id.endswith(SIDE_SUFFIXES) or workflow_id.startswith(PROSE_PREFIX)


def owner(workflow_id: str) -> str:
    """The run a podcast or deck belongs to; any other id is its own."""
    return next((workflow_id[: -len(s)] for s in SIDE_SUFFIXES if workflow_id.endswith(s)), workflow_id)


# Characters no file name may hold here or on Windows, and control characters.
_UNSAFE = frozenset('/\\:*?"<>|') | {chr(c) for c in range(32)} | {chr(127)}
_MAX_STEM = 120  # characters
_MAX_STEM_BYTES = 200  # UTF-8 bytes: room for a hash and an extension within a file system's 255


def file_stem(workflow_id: str) -> str:
    """A file name (without extension) for files named after a run: the id
    itself when it is a plain name, otherwise the id with separators, control
    characters and leading dots replaced (other scripts kept) plus a short
    hash of the whole id, so two ids never share a file and no id reaches
    outside the folder the file is written to."""
    import hashlib

    stem = "".join("_" if ch in _UNSAFE or 0x80 <= ord(ch) < 0xA0 else ch for ch in workflow_id)
    stem = "_" * (len(stem) - len(stem.lstrip("."))) + stem.lstrip(".")
    stem = stem.rstrip(" ")[:_MAX_STEM]
    while len(stem.encode("utf-8", "surrogatepass")) > _MAX_STEM_BYTES:  # other scripts take 2-4 bytes a character
        stem = stem[:-1]
    stem = stem or "_"
    if stem == workflow_id:
        return stem
    return f"{stem}-{hashlib.sha256(workflow_id.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def attachment(workflow_id: str, extension: str) -> str:
    """A Content-Disposition header for a download named after a run: an
    ASCII name for old browsers, the id's own script in ``filename*``
    (RFC 6266), nothing that could end the header or name a folder."""
    from urllib.parse import quote

    name = f"{file_stem(workflow_id)}.{extension}"
    plain = "".join(ch if " " <= ch < "\x7f" and ch not in '"%' else "_" for ch in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


# Characters a run id chosen here may not hold: controls (a newline in an id
# made `list` print it across two rows, so a crafted id could fake a row),
# line and paragraph separators, and the bidirectional overrides and
# isolates that make text show in another order than it is.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def control_in_id(workflow_id: str) -> str | None:
    """The first such character, named (``U+000A at character 4``), or None."""
    import unicodedata

    for at, ch in enumerate(workflow_id, 1):
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"U+{ord(ch):04X} at character {at}"
    return None
