"""Output formats (goss style): one module each, and each registers itself with ``@output("name")``.

Adding a format is one new module in this package and nothing else: ``formats()`` imports every module
here, so there is no list to forget. The CLI's ``--format`` choices and help, and the secret-redaction
tests, read the registry; ``tests/test_output_registry.py`` fails for a module here that registers no
format and is no format's helper (``safe.py``). The sidecar's ``/report`` (``json``) and ``/`` (``html``)
and ``demo --format`` (``text`` side by side, ``json``) name the formats they use. Every format renders the
same ``Report``, from its redacted copy (``outputs/safe.py``)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from validator.report import Report

RenderFn = Callable[..., str]  # (report, *, color: bool, secrets: tuple[str, ...]) -> str


@dataclass(frozen=True)
class OutputFormat:
    name: str
    description: str
    render: RenderFn
    messages: bool = True  # carries the checks' messages (prom carries only IDs, statuses and numbers)
    rank: int = 100  # where --format lists it: lower first, then by name


_FORMATS: dict[str, OutputFormat] = {}


def output(
    name: str, description: str, *, messages: bool = True, rank: int = 100
) -> Callable[[RenderFn], RenderFn]:
    """Register ``fn`` as the renderer of ``--format NAME``; ``rank`` places it in ``--format``'s list
    (the shipped formats hold 0 to 4, the default ``text`` first; a new one goes after them)."""

    def register(fn: RenderFn) -> RenderFn:
        if name in _FORMATS:
            raise RuntimeError(f"output format {name} registered twice")
        _FORMATS[name] = OutputFormat(name, description, fn, messages, rank)
        return fn

    return register


def formats() -> dict[str, OutputFormat]:
    """Every format, by name, in ``--format``'s order: each module of this package imported (a module
    registers its formats when imported; a helper such as ``safe`` registers none)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_FORMATS.items(), key=lambda item: (item[1].rank, item[0])))


def render(report: Report, fmt: str, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    return formats()[fmt].render(report, color=color, secrets=secrets)
