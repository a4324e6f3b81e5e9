"""What `run` shows on the terminal while a local worker and server work in
the same process: one line per failed call ("chat failed (attempt 3 of 12):
the model provider is unreachable at …; Temporal retries it"), the final
reason once, and nothing else. Tracebacks, the SDK's own logs (its Rust core
included) and everything at INFO go to ``<data dir>/logs/deepresearch.log``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from infra.log_lines import FileLines, OneLine
from infra.settings import private_dir


def setup(data_dir: Path) -> Path:
    """Log to the data dir's log file; show only warnings, as one line each.
    Returns the log file's path."""
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    folder = private_dir(data_dir / "logs")
    path = folder / "deepresearch.log"
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(FileLines())  # an expected, retried failure as one line, without its traceback
    to_screen = logging.StreamHandler()
    to_screen.setLevel(logging.WARNING)
    to_screen.setFormatter(OneLine())
    to_screen.addFilter(lambda record: not record.name.startswith(("temporalio.core", "temporalio.worker")))
    root.handlers[:] = [to_file, to_screen]
    # The SDK's Rust core logs (connection retries and the like) into the file.
    core = logging.getLogger("temporalio.core")
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=LogForwardingConfig(core)
        )
    )
    Runtime.set_default(Runtime(telemetry=telemetry), error_if_already_set=False)
    return path
