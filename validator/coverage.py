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

from validator import facts
from validator.report import Coverage, NotProven

# Which input lets a check whose evidence came from this source run (the first source of an error wins).
INPUT_FOR_SOURCE: dict[str, str] = {
    facts.LAUNCH: "the full launch command (--launch-cmd, --unit, --script, or `launch -- CMD`)",
    facts.SGLANG: (
        "run preflight where the server runs (its interpreter must import sglang), or --sglang-root"
    ),
    facts.HUMMING: "run preflight where the server runs, as or with --service-user for the server's account",
    facts.CHECKPOINT: "--model-dir (or a local --model-path)",
    facts.DSPARK_DRAFT: "a local --speculative-draft-model-path",
    facts.FLASHINFER: "run preflight where the server runs",
    facts.HOST: "run preflight on the server's host",
    facts.SERVER: "a reachable, ready server (--url, --wait, --api-key-file)",
    facts.ATTESTATION: "--attestation (the spark-validate plugin's file, written by the running server)",
    facts.LOG: "--log (the file the running server writes) or --log journal:UNIT",
    facts.PROBE: "a ready server with speculative decoding on (the acceptance probe)",
    facts.WEIGHTS: "--weights-checker on a server that serves /weights_checker",
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
            missing.append(NotProven(id=r.id, reason=r.message, input=input_for(r.sources)))
    return Coverage(critical=critical, proven=proven, not_proven=[m.id for m in missing], missing=missing)
