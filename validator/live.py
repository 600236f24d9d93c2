"""The live job: wait for a running server, read its state, the attestation and the log, run the acceptance
probe, and check it all against the pack (``check`` and the sidecar).

An unreachable server is missing evidence, not a failed deployment: ``server.ready`` is ``error``, verdict
inconclusive (exit 69). Evidence is the rows of ``live_table.LIVE`` within one deadline. ``LiveResult``
carries whether the target was reached and the answering process's identity, so the sidecar decides "up"
and "same server" from typed facts, not by looking for a check ID.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from validator.checks.registry import builtins
from validator.engine import build_report, run_checks
from validator.facts import PROBE, SERVER, Facts, NodeFacts, ProbeResult, ServerMetricsFacts
from validator.live_inputs import LiveInputs as LiveInputs
from validator.live_table import LIVE
from validator.recipe_match import NO_PACK, choose_pack
from validator.report import Report, utc_now_iso
from validator.rulepack import LoadedPack, load_pack
from validator.source_table import read_sources
from validator.sources.live_gathering import LiveGathering
from validator.sources.server.client import SGLangClient
from validator.sources.server.identity import ServerIdentity, identity_of
from validator.sources.server.log import FileLogReader, open_log_reader
from validator.sources.server.start_watch import StartWatch


@dataclass(frozen=True)
class LiveResult:
    """One live check run: the report, and the typed answer to "was the server there, and which one"."""

    report: Report
    reached: bool  # /health answered 200 and /server_info was served
    identity: ServerIdentity | None  # None when the server was not reached
    pack: LoadedPack | None = None  # the pack the report was judged by (``--rules auto`` picks it)
    node: NodeFacts | None = None  # a running server's node facts (``check``/``serve`` with no --url)
    server_metrics: ServerMetricsFacts | None = None  # the server's own /metrics, as last read


# Beyond --wait and the probe's own budget, what one check may spend: /server_info, /model_info (10 s
# deadlines each), the files (worker threads) and the checks. Every request has its own deadline too; this
# is the backstop for their sum, so no server can hold a check (or a sidecar re-check) for ever.
CHECK_OVERHEAD_S = 60.0


def check_deadline_s(inputs: LiveInputs, loaded: LoadedPack, probe: bool) -> float:
    """The total deadline of one live check: ``--wait``, the probe's budget, the weights checker's."""
    settings = loaded.pack.probe
    budget = inputs.wait_s + CHECK_OVERHEAD_S
    if probe and settings is not None:
        budget += settings.max_seconds
    if inputs.weights_checker:
        budget += inputs.read_timeout
    return budget


# Checks that weigh the probe when there is one without requiring it of the pack (functional evidence of
# the draft's head; the log's accept len cross-checked against it).
_READ_PROBE_WHEN_GIVEN = frozenset({"spec.lm_head_shared", "server.log"})


def _probe_judged(inputs: LiveInputs, loaded: LoadedPack) -> bool:
    """Whether a check this run judges reads the probe (its builtin declares ``needs=("probe",)``, or it
    weighs one when given): ``--check moe.backend`` spends no tokens on a probe no selected check reads."""
    if inputs.selection is None:
        return True
    checks = builtins()
    return any(
        inputs.selection.excluded(spec.id) is None
        and (
            spec.id in _READ_PROBE_WHEN_GIVEN
            or (spec.id in checks and "probe" in checks[spec.id].needs_in(["check"]))
        )
        for spec in loaded.pack.checks
        if "check" in spec.modes
    )


async def gather_live(inputs: LiveInputs, loaded: LoadedPack, *, probe: bool | None = None) -> Facts:
    """The live facts, within :func:`check_deadline_s`; past it, whatever was not gathered is an error
    naming the deadline (the verdict is then inconclusive, never a pass)."""
    facts = Facts(mode="check")
    run_probe = (probe if probe is not None else inputs.probe) and _probe_judged(inputs, loaded)
    budget = check_deadline_s(inputs, loaded, run_probe)
    try:
        await asyncio.wait_for(_gather(facts, inputs, loaded, run_probe), timeout=budget)
    except asyncio.TimeoutError:
        why = f"{inputs.url}: the check did not finish within its {budget:g} s deadline"
        facts.errors.setdefault(SERVER if facts.server is None else PROBE, why)
    return facts


async def _gather(facts: Facts, inputs: LiveInputs, loaded: LoadedPack, probe: bool) -> None:
    """Each source of ``LIVE`` in order, when the sources it needs were read and it applies. A server
    that does not become ready is an error of the server source, and what does not need it (the files,
    the log) is still read."""
    # one reader for the wait and the log's facts (the sidecar's follows the log across checks)
    log_reader = inputs.log_reader
    if log_reader is None and inputs.log is not None:
        log_reader = open_log_reader(inputs.log)
    try:
        # Built in a worker thread: httpx loads its TLS trust store when a client is created (tens of ms
        # of CPU), which on the sidecar's event loop delayed /livez at every check.
        client = await asyncio.to_thread(
            SGLangClient,
            inputs.url,
            api_key=inputs.api_key,
            connect_timeout=inputs.connect_timeout,
            read_timeout=inputs.read_timeout,
            retries=inputs.retries,
            transport=inputs.transport,
        )
        async with client:
            g = LiveGathering(
                inputs,
                facts,
                client,
                log_reader,
                StartWatch(log_reader) if log_reader is not None else None,
                run_probe=probe,
                probe=loaded.pack.probe,
                accept_length_min=loaded.pack.expect.accept_length_min,
                probe_prompts=loaded.probe_prompts,
            )
            await read_sources(LIVE, g)
    finally:
        if inputs.log_reader is None and isinstance(log_reader, FileLogReader):
            log_reader.close()


async def run_live(
    inputs: LiveInputs,
    loaded: LoadedPack | None,
    *,
    strict: bool = False,
    probe: bool | None = None,
    previous_probe: ProbeResult | None = None,
    pack_dirs: Sequence[Path] = (),
) -> LiveResult:
    """One full live check. The sidecar passes ``probe=False`` with the last probe's result to re-check
    configuration cheaply without generating."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    auto = None
    no_pack = False
    if loaded is None:
        # --rules auto: read the server once without probing and pick its pack. Those facts are judged
        # by the pack (none of them depends on it); only a server that answered is read again, for the
        # probe, within what is left of --wait: waiting twice would make --wait N a wait of 2N.
        default = load_pack(None)
        first = await gather_live(inputs, default, probe=False)
        chosen, auto = choose_pack(first, pack_dirs)
        no_pack = chosen is None
        loaded = chosen or default
        wants_probe = probe if probe is not None else inputs.probe
        if no_pack or first.server is None or not wants_probe:
            facts = first
        else:
            left = max(0.0, inputs.wait_s - (time.monotonic() - t0))
            facts = await gather_live(replace(inputs, wait_s=left), loaded, probe=probe)
    else:
        facts = await gather_live(inputs, loaded, probe=probe)
    if facts.probe is None and previous_probe is not None and facts.server is not None:
        facts.probe = previous_probe
    # no pack is written for the model: nothing is judged, and nothing unjudged is ever a pass. A server
    # that never answered (why its model could not be read) is still said to be not ready: that is no
    # judgement of its model.
    results = []
    if not no_pack or facts.server is None:
        results = run_checks(facts, loaded, mode="check", strict=strict, selection=inputs.selection)
    if no_pack:
        results = [r for r in results if r.id == "server.ready"]
    if auto is not None:
        results.insert(0, auto)
    report = build_report(
        results,
        loaded,
        mode="check",
        started_at=started_at,
        started_monotonic=t0,
        strict=strict,
        allow_partial=inputs.allow_partial and not no_pack,
        probe=facts.probe,
        target=inputs.url,
        rule_pack=NO_PACK if no_pack else None,
    )
    return LiveResult(
        report=report,
        reached=facts.server is not None,
        identity=identity_of(facts),
        pack=loaded,
        server_metrics=facts.server.metrics if facts.server is not None else None,
    )
