"""Local documents: the ``index_resources`` and ``local_search`` tools.

``splitter.py`` splits documents into sections, ``index.py`` keeps a run's
FTS5 index, ``sharing.py`` shares it through the payload bucket, and
``activities.py`` holds the two activities.

The files and folders a run was given with ``--resource`` (markdown, text,
HTML, PDF) are split into sections and stored in an embedded SQLite FTS5
index, one index file per run under ``<data dir>/indexes/``. The researcher
searches it with ``local_search(query)``; every hit cites the file and the
section as ``file:///absolute/path#section-slug``.

Indexing is idempotent: a file whose modification time and size did not
change is skipped, so a retried activity (or a resumed run) redoes nothing.
Files that cannot be read are reported in the summary, never fatal.

With a shared store (``SharedIndexes``: the payload bucket, when
DEEPRESEARCH_PAYLOAD_S3_BUCKET is set), the worker that indexed a run's
documents uploads a copy of the index, and a worker on another machine
fetches it before its first search of that run.
"""
