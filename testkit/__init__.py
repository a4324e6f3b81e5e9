"""What the tests and the benchmarks share: scripted OpenAI-compatible,
Tavily-compatible and search-engine servers, a loopback web site, the
scripted research run, and helpers that run and kill real worker processes.

Not part of the product; nothing in workflows/, activities/, infra/, client/
or worker.py imports it."""
