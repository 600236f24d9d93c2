"""Coverage: how many of the critical invariants this run proved, and
for each one it could not prove, why and which input would let it run.

A verdict is a claim; "pass" with a critical check that could not gather its evidence would claim what
was not proven. So the verdict counts only proofs, and the report says exactly what is missing and how to
supply it (``--model-dir``, ``--attestation``, running preflight where the server runs...), instead of
leaving the operator to guess from a row of ``error`` lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from validator import facts as f
from validator.report import Coverage, NotProven

_WHERE_IT_RUNS = "run preflight where the server runs"

# Which input lets a check whose evidence came from this source run (the first source of an error wins),
# by the source's name (``validator.source_table``); a source that no check names has none.
INPUT_FOR_SOURCE: dict[str, str] = {
    f.LAUNCH: "the full launch command (--launch-cmd, --unit, --script, or `launch -- CMD`)",
    f.SGLANG: f"{_WHERE_IT_RUNS} (its interpreter must import sglang), or --sglang-root",
    f.HUMMING: f"{_WHERE_IT_RUNS}, as or with --service-user for the server's account",
    f.HOST: "run preflight on the server's host",
    f.DSPARK_DRAFT: "a local --speculative-draft-model-path",
    f.FLASHINFER: _WHERE_IT_RUNS,
    f.CHECKPOINT: "--model-dir (or a local --model-path)",
    f.SERVER: "a reachable, ready server (--url, --wait, --api-key-file)",
    f.ATTESTATION: "--attestation (the spark-validate plugin's file, written by the running server)",
    f.LOG: "--log (the file the running server writes) or --log journal:UNIT",
    f.PROGRESS: (
        "a ready server with --enable-metrics and traffic, its --log, or a full check (one bounded request)"
    ),
    f.WEIGHTS: "--weights-checker on a server that serves /weights_checker",
    f.PROBE: "a ready server with speculative decoding on (the acceptance probe)",
}


class _Result(Protocol):  # the fields coverage reads (validator.report.CheckResult has them)
    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def sources(self) -> list[str]: ...
    @property
    def caused_by(self) -> str | None: ...


def input_for(sources: Sequence[str]) -> str | None:
    return next((INPUT_FOR_SOURCE[s] for s in sources if s in INPUT_FOR_SOURCE), None)


def coverage_of(results: Iterable[_Result]) -> Coverage:
    """Count the critical results: pass is proven; error is not proven (with its input); fail is
    disproven (counted, neither proven nor missing); skip does not apply (not counted)."""
    critical = proven = 0
    missing: list[NotProven] = []
    for r in results:
        if r.severity != "critical" or r.status == "skip":
            continue
        critical += 1
        if r.status == "pass":
            proven += 1
        elif r.status == "error":
            missing.append(
                NotProven(id=r.id, reason=r.message, input=input_for(r.sources), caused_by=r.caused_by)
            )
    return Coverage(critical=critical, proven=proven, not_proven=[m.id for m in missing], missing=missing)
