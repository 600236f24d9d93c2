"""``--format text``: the report for a person at a terminal.

Passing checks take one line; a failing one adds what was found, why it matters and the exact remedy,
so the operator can fix it without reading any docs. A fault is said once: checks whose error follows
from another's (``caused_by``: a server that was not reached) are listed under that check's line.
Colour only on a terminal (or FORCE_COLOR).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections import Counter
from typing import Any

from validator.outputs import output
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep
from validator.report import Coverage, Report
from validator.validation import load

_STYLE = {
    "pass": ("PASS", "32"),
    "fail": ("FAIL", "1;31"),
    "warn": ("WARN", "33"),
    "skip": ("SKIP", "2"),
    "error": ("ERR ", "35"),
    "info": ("INFO", "36"),
}
_VERDICT = {"pass": "32", "fail": "1;31", "inconclusive": "35"}


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def _evidence(ev: dict[str, Any]) -> str:
    parts = []
    for k, v in ev.items():
        shown = json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else str(v)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        parts.append(f"{k}={shown}")
    return ", ".join(parts)


def _wrapped(label: str, text: str, pad: str, line_width: int) -> list[str]:
    """``label text`` wrapped under the check's message, continuation lines aligned after the label."""
    indent = pad + " " * len(label)
    return textwrap.wrap(
        text,
        width=max(line_width, len(indent) + 40),
        initial_indent=pad + label,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def verdict_note(data: dict[str, Any]) -> str:
    """`` (partial: 2 unproven)`` after a PASS that rests on less than every critical invariant
    (``--allow-partial``), `` (2 unproven)`` after another verdict; nothing when everything was proven.
    The verdict word alone must never read as a full pass when it is not one."""
    cov = data.get("coverage") or {}
    unproven = len(cov.get("not_proven") or ())
    if not unproven:
        return ""
    return f" (partial: {unproven} unproven)" if data["verdict"] == "pass" else f" ({unproven} unproven)"


@output("text", "for a person at a terminal (the default)", rank=0)
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    line_width = shutil.get_terminal_size((100, 24)).columns  # the terminal's (COLUMNS), else 100
    data = neutralize_deep(safe_dict(report, secrets))  # server-supplied text cannot drive the terminal
    lines = [
        f"spark-validate {data['version']} · {data['mode']} · rule pack {data['rule_pack']}"
        + (f" · {data['target']}" if data.get("target") else "")
    ]
    width = max((len(c["id"]) for c in data["checks"]), default=10)
    # one fault said once: the checks that follow from another's error are folded under that line
    ids = {c["id"] for c in data["checks"]}
    folded: dict[str, list[str]] = {}
    for c in data["checks"]:
        if c["status"] == "error" and c.get("caused_by") in ids and not c["waived"]:
            folded.setdefault(c["caused_by"], []).append(c["id"])
    hidden = {i for group in folded.values() for i in group}
    for c in data["checks"]:
        if c["id"] in hidden:
            continue
        label, code = _STYLE[c["status"]]
        if c["waived"]:
            label, code = "WAIV", "36"
        lines.append(f"  {_paint(label, code, color)}  {c['id']:<{width}}  {c['message']}")
        if c["status"] in ("fail", "warn", "error", "info") or c["waived"]:
            pad = " " * (8 + width)
            details = [("why", c.get("why")), ("remedy", c.get("remedy"))]
            if c["evidence"]:
                details.append(("evidence", _evidence(c["evidence"])))
            if c["waived"]:
                w = c["waived"]
                details.append(("waived", f"until {w['expires']}: {w['justification']}"))
            after = folded.get(c["id"])
            if after:
                details.append(
                    ("blocks", f"{len(after)} more, not judged until this is fixed: {', '.join(after)}")
                )
            for label, text in details:
                if text:
                    lines.extend(_wrapped(f"{label + ':':<10}", text, pad, line_width))
    probe = data.get("probe")
    if probe:
        ci = probe.get("accept_length_ci")
        ci_s = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        al = probe.get("accept_length")
        lines.append(
            "  probe: accept length "
            + (f"{al:.2f}{ci_s}" if al is not None else "n/a")
            + f", {probe['requests']} requests, {probe['completion_tokens']} tokens"
            + f", {probe['verify_ct']} verify rounds"
            + (f", TPOT {probe['tpot_ms']:.1f} ms" if probe.get("tpot_ms") is not None else "")
            + (f", TTFT {probe['ttft_ms']:.0f} ms" if probe.get("ttft_ms") is not None else "")
        )
    counts = Counter(c["status"] for c in data["checks"])
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    verdict = data["verdict"]
    lines.append(
        f"verdict: {_paint(verdict.upper(), _VERDICT[verdict], color)}{verdict_note(data)}"
        f" · {summary} · {data['duration_s']:.2f} s"
    )
    if data.get("coverage") is not None:
        # what the verdict rests on, one line (`tail -1`): the critical invariants proven, and the rest
        lines.append(load(Coverage, data["coverage"]).line())
    return "\n".join(lines) + "\n"
