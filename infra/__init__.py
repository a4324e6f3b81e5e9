"""Plumbing the worker and the CLI share: settings, the Temporal connection
and data converter, payload storage, the blob store, S3, tracing, process
exit. Imports nothing from client/, worker.py or activities/."""
