"""Output formats, one module each, registered in one map (goss style): adding a format touches one new
module and one line here. Every format renders the same ``Report``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from validator.report import Report

FORMATS = ("text", "json", "junit")


def render(report: Report, fmt: str, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    from validator.outputs import json_report, junit, text

    renderers: dict[str, Callable[..., str]] = {
        "text": text.render,
        "json": json_report.render,
        "junit": junit.render,
    }
    kwargs: dict[str, Any] = {"secrets": secrets}
    if fmt == "text":
        kwargs["color"] = color
    return renderers[fmt](report, **kwargs)
