"""Benchmarks of the durable research workflow: ``python -m bench`` (see README.md)."""
