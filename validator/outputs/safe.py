"""The last line of defence against leaking secrets: every output renders from a redacted copy of the
report (``validator.redact``: secret-named keys, and their values wherever else they appear)."""

from __future__ import annotations

from typing import Any

from validator.redact import redact
from validator.report import Report
from validator.validation import dump


def safe_dict(report: Report, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The report as JSON-ready data; ``secrets`` are extra key names a rule pack marks secret."""
    data: dict[str, Any] = redact(dump(report), extra_keys=secrets)
    return data
