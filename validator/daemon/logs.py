"""The sidecar's structured log: JSON lines when not on a terminal (journald, kubectl logs, collectors),
readable colour on one; one canonical line per check run; one line per phase change; never a secret.

Named ``logs`` rather than ``logging`` so that nothing in this package can shadow the standard library's
module. The logger is built per daemon (``make_logger``), not configured globally, so that tests and an
embedding process keep their own structlog settings.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from validator.redact import neutralize_deep, redact
from validator.report import Report, Status

Logger = structlog.typing.FilteringBoundLogger  # what make_filtering_bound_logger's class gives


def _redact(secrets: tuple[str, ...]) -> Any:
    def processor(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        cleaned: MutableMapping[str, Any] = redact(dict(event), extra_keys=secrets)
        return cleaned

    return processor


def _inert(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """On a terminal, what a server said (a model name, an error body) is printed as it came: its control
    sequences are made visible and inert, as in the text report. JSON lines escape them already."""
    cleaned: MutableMapping[str, Any] = neutralize_deep(dict(event))
    return cleaned


def make_logger(
    stream: TextIO | None = None, *, color: bool | None = None, secrets: tuple[str, ...] = ()
) -> Logger:
    """JSON unless ``stream`` is a terminal (or ``color`` forces the console renderer)."""
    out = sys.stderr if stream is None else stream
    tty = bool(getattr(out, "isatty", lambda: False)()) if color is None else color
    renderer: Any = structlog.dev.ConsoleRenderer(colors=tty) if tty else structlog.processors.JSONRenderer()
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact(secrets),
        *([_inert] if tty else []),
        renderer,
    ]
    level = getattr(logging, os.environ.get("SPARK_VALIDATE_LOG_LEVEL", "INFO").upper(), None)
    logger: Logger = structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            level if isinstance(level, int) else logging.INFO
        ),
    )
    return logger.bind(logger="spark-validate.serve")


def check_fields(report: Report, *, kind: str, ready: bool) -> dict[str, Any]:
    """The canonical line's fields: what an operator greps for after a check run."""
    failed = [c.id for c in report.checks if c.status is Status.FAIL]
    errors = [c.id for c in report.checks if c.status is Status.ERROR]
    probe = report.probe
    return {
        "kind": kind,
        "verdict": report.verdict.value,
        "ready": ready,
        "failed": failed,
        "errors": errors,
        "accept_length": None if probe is None else probe.accept_length,
        "duration_s": round(report.duration_s, 3),
        "target": report.target,
    }
