"""The preflight job: gather static evidence (launch command, environment, installed SGLang, kernels,
checkpoint, host) and run the pack's preflight checks.

No server, no GPU, no torch or sglang import: it runs as an ExecStartPre, before every start. Malformed
input raises ``InputError`` (exit 65) rather than becoming a result: the file must be fixed before any
verdict means something. Evidence is the rows of ``source_table.PREFLIGHT``, read in order by ``gather``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from validator.engine import build_report, run_checks
from validator.errors import InputError
from validator.facts import LAUNCH, Facts
from validator.preflight_inputs import PreflightInputs
from validator.recipe_match import NO_PACK, choose_pack
from validator.report import Report, utc_now_iso
from validator.rulepack import LoadedPack, load_pack
from validator.source_table import PREFLIGHT, read_sources_now
from validator.sources.gathering import Gathering


@dataclass
class PreflightRun:
    """The report, and the malformed evidence file that made part of it ``error`` (exit 65 after the
    report is written: a CI job asking for ``--format junit --output F`` still gets F)."""

    report: Report
    facts: Facts
    pack: LoadedPack  # the pack the report was judged by (``--rules auto`` picks it)
    malformed: InputError | None = None


def gather(inputs: PreflightInputs, malformed: list[InputError] | None = None) -> Facts:
    """The static evidence: each source of ``PREFLIGHT`` in order, when the sources it needs were read
    and it applies. A malformed checkpoint file is recorded in
    ``malformed`` (and as the checkpoint source's error) instead of aborting, so the other checks still
    run and report."""
    facts = Facts(mode="preflight")
    g = Gathering(inputs, facts, malformed)
    read_sources_now(PREFLIGHT, g)
    if facts.launch is None:
        facts.errors.setdefault(LAUNCH, "no launch command")
    return facts


def run_preflight(
    inputs: PreflightInputs,
    loaded: LoadedPack | None,
    *,
    strict: bool = False,
    allow_partial: bool = False,
    pack_dirs: Sequence[Path] = (),
) -> PreflightRun:
    """``loaded`` None: ``--rules auto``, the shipped pack (or pack in ``pack_dirs``) whose recipe the
    launch command follows."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    malformed: list[InputError] = []
    facts = gather(inputs, malformed)
    auto = None
    no_pack = False
    if loaded is None:
        chosen, auto = choose_pack(facts, pack_dirs)
        no_pack = chosen is None  # no shipped pack is written for the model: nothing is judged
        loaded = chosen or load_pack(None)
    results = (
        []
        if no_pack
        else run_checks(facts, loaded, mode="preflight", strict=strict, selection=inputs.selection)
    )
    if auto is not None:
        results.insert(0, auto)
    target = facts.launch.origin if facts.launch is not None else None
    report = build_report(
        results,
        loaded,
        mode="preflight",
        started_at=started_at,
        started_monotonic=t0,
        strict=strict,
        allow_partial=allow_partial and not no_pack,
        target=target,
        rule_pack=NO_PACK if no_pack else None,
    )
    return PreflightRun(report, facts, loaded, malformed[0] if malformed else None)
