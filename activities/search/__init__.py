"""The ``web_search`` tool: several search engines behind one interface.

``DEEPRESEARCH_SEARCH_ENGINE`` picks the engine (see ``docs/search.md``):

- ``tavily``: the official ``tavily-python`` client (``TAVILY_API_KEY``),
- ``duckduckgo``: keyless, through the ``ddgs`` package,
- ``searxng``: a self-hosted SearxNG instance's JSON API (``SEARXNG_URL``),
- ``brave``: the Brave Search API (``BRAVE_API_KEY``),
- ``arxiv``: the arXiv API (Atom feed), for scientific papers.

``base.py`` holds what the engines share, one module per engine, and
``activities.py`` the activity and ``make_engine``.

Every engine returns ``Hit``s; the activity applies the domain filters
(``DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS`` / ``..._EXCLUDE_DOMAINS``) and
``max_results`` to all of them and formats one ``ToolResult``.

Error policy: a permanent problem (bad key, bad request, unreadable answer)
becomes a readable ``ToolResult(error=True)`` for the agent; a transient one
(connection error, timeout, 5xx, rate limit) raises a retryable
``ApplicationError`` (type ``SearchUnavailable`` or ``SearchRateLimited``, the
latter with ``next_retry_delay`` from ``Retry-After``) so Temporal retries it.
"""
