"""Output formats (goss style): one module each, and each registers itself with ``@output("name")``.
Adding a format is one new module and its name in ``MODULES``; the CLI's ``--format`` choices and help,
and the secret-redaction tests, read the registry. The sidecar's ``/report`` (``json``) and ``/`` (``html``)
and ``demo --format`` (``text`` side by side, ``json``) name the formats they use. Every format renders the
same ``Report``, from its redacted copy (``outputs/safe.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from validator.report import Report

MODULES = ("text", "json_report", "junit", "prom", "html")


RenderFn = Callable[..., str]  # (report, *, color: bool, secrets: tuple[str, ...]) -> str


@dataclass(frozen=True)
class OutputFormat:
    name: str
    description: str
    render: RenderFn
    messages: bool = True  # carries the checks' messages (prom carries only IDs, statuses and numbers)


_FORMATS: dict[str, OutputFormat] = {}


def output(name: str, description: str, *, messages: bool = True) -> Callable[[RenderFn], RenderFn]:
    """Register ``fn`` as the renderer of ``--format NAME``."""

    def register(fn: RenderFn) -> RenderFn:
        if name in _FORMATS:
            raise RuntimeError(f"output format {name} registered twice")
        _FORMATS[name] = OutputFormat(name, description, fn, messages)
        return fn

    return register


def formats() -> dict[str, OutputFormat]:
    """Every registered format, by name, in ``MODULES`` order."""
    for module in MODULES:
        importlib.import_module(f"validator.outputs.{module}")
    return dict(_FORMATS)


def render(report: Report, fmt: str, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    return formats()[fmt].render(report, color=color, secrets=secrets)
