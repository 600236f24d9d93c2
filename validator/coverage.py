"""Coverage: how many of the critical invariants this run proved, and
for each one it could not prove, why and which input would let it run.

A verdict is a claim; "pass" with a critical check that could not gather its evidence would claim what
was not proven. So the verdict counts only proofs, and the report says exactly what is missing and how to
supply it (``--model-dir``, ``--attestation``, running preflight where the server runs...), instead of
leaving the operator to guess from a row of ``error`` lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from validator.facts import INPUT_FOR_SOURCE
from validator.report import CheckResult, Coverage, NotProven


def input_for(sources: Sequence[str]) -> str | None:
    return next((INPUT_FOR_SOURCE[s] for s in sources if s in INPUT_FOR_SOURCE), None)


def coverage_of(results: Iterable[CheckResult]) -> Coverage:
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
