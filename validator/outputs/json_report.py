"""``--format json``: the contract's report shape, secrets redacted."""

from __future__ import annotations

import json

from validator.outputs import output
from validator.outputs.safe import safe_dict
from validator.report import Report


@output("json", "the contract's JSON report", rank=1)
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    return json.dumps(safe_dict(report, secrets), indent=2, sort_keys=False) + "\n"
