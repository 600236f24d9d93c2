"""The running-process job: judge each SGLang server on this host by what the kernel says it runs.

``check`` with no ``--url`` (or ``--pid``): each server found is judged by the preflight checks on its real
argv, environment and cwd, and by the live checks on its port. A check both judge is merged: a failure of
either wins, else a proof by either, else unproven. With a declaration given, ``launch.drift`` compares it
with the running process. A multi-node worker (no HTTP) gets the preflight half only.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from validator.attestation.location import default_path
from validator.engine import build_report, run_checks
from validator.errors import InputError, UnavailableError, UnresolvedLaunch
from validator.facts import LAUNCH, SERVER, Facts, ProbeResult
from validator.live import LiveInputs, LiveResult, check_deadline_s, gather_live
from validator.preflight import gather
from validator.preflight_inputs import PreflightInputs
from validator.report import CheckResult, Status, unreached_report, utc_now_iso
from validator.rulepack import LoadedPack
from validator.sources.host.listening import ancestors, proc_root
from validator.sources.host.node import read_node
from validator.sources.host.server_processes import Ignored, ServerProcess, discover_listening, nothing_found
from validator.sources.launch.drift import RECIPE_ENV_PREFIXES, drift_items
from validator.sources.launch.source import read_launcher
from validator.sources.server.identity import ServerIdentity, identity_of
from validator.sources.server.metrics_reading import MetricsWatch

# Checks about the process itself: their preflight form is the whole answer.
_PROCESS_ONLY = {"launch.drift", "server.process"}
# Which of two results of one check stands: a failure first, then a finding, then a proof, then what
# could not be proven, then "does not apply".
_RANK = {Status.FAIL: 0, Status.WARN: 1, Status.INFO: 2, Status.PASS: 3, Status.ERROR: 4, Status.SKIP: 5}


def merge_results(running: list[CheckResult], live: list[CheckResult]) -> list[CheckResult]:
    """One result per check, in the pack's order: the preflight form judged the process's argv and
    environment, the live form the server's answers; where both ran, the stronger finding stands and
    the other's message and evidence are kept beside it."""
    by_live = {r.id: r for r in live}
    out: list[CheckResult] = []
    seen: set[str] = set()
    for r in running:
        seen.add(r.id)
        other = by_live.get(r.id)
        if other is None:
            out.append(r)
            continue
        first, second = sorted((r, other), key=lambda x: _RANK[x.status])
        if second.status is Status.SKIP or first.message == second.message:
            out.append(first)
            continue
        label = {id(r): "running process", id(other): "live"}
        out.append(
            replace(
                first,
                message=f"{label[id(first)]}: {first.message}; {label[id(second)]} ({second.status.value}): "
                f"{second.message}",
                evidence={"process": r.evidence, "live": other.evidence},
                sources=list(dict.fromkeys([*first.sources, *second.sources])),
                remedy=first.remedy or second.remedy,
            )
        )
    out.extend(r for r in live if r.id not in seen)
    return out


@dataclass
class RunningInputs:
    """``check`` on running servers: the live inputs (their URL is each server's), the preflight host
    inputs (``--model-dir``, ``--sglang-root``...), and the declaration to compare with, when given."""

    live: LiveInputs
    host: PreflightInputs  # model_dir, sglang_root, service_user (no launch command: the process is it)
    declared: PreflightInputs | None = None
    cluster: str | None = None  # fleet labels: --cluster / $SPARK_VALIDATE_CLUSTER
    node: str | None = None  # --node / $SPARK_VALIDATE_NODE (default: the host name)
    # each server's previous /metrics reading, by PID and start time (``npd`` keeps them between runs);
    # None: each check compares only within itself
    watch_for: Callable[[int, float | None], MetricsWatch] | None = None


def _drift(facts: Facts, inputs: RunningInputs, loaded: LoadedPack, results: list[CheckResult]) -> None:
    """``facts.declared`` and which checks a restart from the declaration would change."""
    if inputs.declared is None or facts.launch is None:
        return
    try:
        facts.declared = read_launcher(replace(inputs.declared, base_env={}))[0].parsed()
        # as it would start: the running server's non-recipe variables (PATH, HOME: what any supervisor
        # provides) and the declaration's own
        base = {k: v for k, v in facts.launch.env.items() if not k.startswith(RECIPE_ENV_PREFIXES)}
        full = read_launcher(replace(inputs.declared, base_env=base))[0].parsed()
    except (InputError, UnresolvedLaunch) as exc:
        facts.errors["declared"] = str(exc)
        return

    assert facts.process is not None
    facts.drift = drift_items(facts.declared, facts.launch, facts.process.env is not None)
    other = replace(facts, launch=full, process=None)
    now = {r.id: r.status for r in results if r.id not in _PROCESS_ONLY and LAUNCH in r.sources}
    then = {r.id: r.status for r in run_checks(other, loaded, mode="preflight")}
    facts.declared_outcomes = {
        cid: f"{then[cid].value} as declared, {status.value} as running"
        for cid, status in now.items()
        if cid in then and then[cid] is not status and then[cid] is not Status.SKIP
    }


async def judge(
    server: ServerProcess,
    inputs: RunningInputs,
    loaded: LoadedPack,
    *,
    strict: bool = False,
    allow_partial: bool = False,
    previous_probe: ProbeResult | None = None,
) -> LiveResult:
    """One report for one running server (``previous_probe``: a sidecar's re-check reuses its last)."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    pre_inputs = replace(inputs.host, running=server, env_files=[])
    malformed: list[InputError] = []
    try:
        facts = await asyncio.to_thread(gather, pre_inputs, malformed)
    except InputError as exc:  # its argv is not one SGLang's parser accepts: the server would have refused
        facts = Facts(mode="preflight")
        facts.errors[LAUNCH] = f"process {server.process.pid}: {exc}"
    facts.process = server.process
    if facts.launch is not None:
        facts.node = await asyncio.to_thread(
            read_node,
            server.process,
            facts.launch,
            facts.sglang,
            cluster=inputs.cluster,
            node=inputs.node,
            pack=loaded.name,
            proc=proc_root(),
        )
    selection = inputs.live.selection
    results = run_checks(facts, loaded, mode="preflight", strict=strict, selection=selection)
    if inputs.declared is not None:
        _drift(facts, inputs, loaded, results)
        drift = run_checks(facts, loaded, mode="preflight", strict=strict, only={"launch.drift"})
        results = [drift[0] if r.id == "launch.drift" and drift else r for r in results]
    # what a restart changes, on every build: the process's PID and start time (``startup_time`` too where
    # /server_info has it); a worker, which serves nothing, is "up" while its process runs
    identity = ServerIdentity(None, server.process.pid, server.process.start_time)
    reached = server.url is None and server.elsewhere is None
    live_results: list[CheckResult] = []
    probe = None
    url = inputs.live.url or server.url
    if server.elsewhere is not None and not inputs.live.url:
        # its socket is another network namespace's: the same address here is not it, so nothing is asked
        # of it; every live check is unproven under server.ready, as for a server not reached
        unreached = Facts(mode="check")
        unreached.errors[SERVER] = f"{server.describe()}: {server.elsewhere}"
        live_results = run_checks(unreached, loaded, mode="check", strict=strict, selection=selection)
    elif url:
        # the attestation is bound to the user the process was proven to run as
        live = replace(inputs.live, url=url, server_uid=server.process.uid)
        if inputs.watch_for is not None:
            live = replace(
                live, metrics_watch=inputs.watch_for(server.process.pid, server.process.start_time)
            )
        unit = server.process.systemd_unit
        if live.log is None and unit and not server.process.user_unit and shutil.which("journalctl"):
            live = replace(live, log=f"journal:{unit}")
        if live.attestation is None and server.process.env is not None:
            live = replace(live, attestation=default_path(server.process.env))
        live_facts = await gather_live(live, loaded)
        if live_facts.probe is None and previous_probe is not None and live_facts.server is not None:
            live_facts.probe = previous_probe
        live_results = run_checks(live_facts, loaded, mode="check", strict=strict, selection=selection)
        seen = identity_of(live_facts)
        if seen is not None:
            identity = replace(identity, startup_time=seen.startup_time)
        reached = live_facts.server is not None
        probe = live_facts.probe
    merged = merge_results(results, [r for r in live_results if r.id not in _PROCESS_ONLY])
    report = build_report(
        merged,
        loaded,
        mode="check",
        started_at=started_at,
        started_monotonic=t0,
        strict=strict,
        allow_partial=allow_partial,
        probe=probe,
        target=server.describe(),
    )
    return LiveResult(
        report=report, reached=reached, identity=identity if reached else None, pack=loaded, node=facts.node
    )


def pick(servers: list[ServerProcess], pid: int | None) -> list[ServerProcess]:
    """``--pid``: that server (or the server whose process tree holds it); else every server."""
    if pid is None:
        return servers
    chosen = [s for s in servers if s.process.pid == pid]
    if chosen:
        return chosen

    above = set(ancestors(pid))
    return [s for s in servers if s.process.pid in above]


# What the preflight half of one server may spend beyond its live half's deadline (reading the install,
# the model directory, the interpreter probe: each bounded on its own); the sum is ``check``'s budget.
PREFLIGHT_MARGIN_S = 30.0


def unfinished(server: ServerProcess, loaded: LoadedPack, deadline_s: float) -> LiveResult:
    """The answer for a server whose check did not finish within ``deadline_s``: inconclusive, not
    reached, naming the process (never a pass, and never hiding what the other servers' checks found)."""
    message = f"{server.describe()}: the check did not finish within {deadline_s:g} s"
    report = unreached_report(
        message, rule_pack=loaded.name, target=server.describe(), duration_s=deadline_s, source="process"
    )
    return LiveResult(report=report, reached=False, identity=None, pack=loaded)


async def judge_all(
    inputs: RunningInputs,
    loaded: LoadedPack,
    *,
    pid: int | None = None,
    strict: bool = False,
    allow_partial: bool = False,
    deadline_s: float | None = None,
    on_server: Callable[[ServerProcess], None] | None = None,
    on_result: Callable[[ServerProcess, LiveResult], None] | None = None,
    on_ignored: Callable[[list[Ignored]], None] | None = None,
) -> list[LiveResult]:
    """Discover, pick and judge every server at once within ``deadline_s``; results in discovery order. A
    server not done by then is :func:`unfinished` and cannot hide another's failure. ``on_result`` hears
    each result, ``on_ignored`` each look-alike not judged. Raises ``UnavailableError`` (exit 69) if none."""
    discovery = await asyncio.to_thread(discover_listening, inputs.live.wait_s, users=inputs.live.server_uids)
    servers = pick(discovery.servers, pid)
    if on_ignored is not None and discovery.ignored:
        shown = [i for i in discovery.ignored if pid is None or i.pid == pid]
        if shown:
            on_ignored(shown)
    if not servers:
        named = [i for i in discovery.ignored if i.pid == pid]
        if named:
            raise UnavailableError(f"--pid {pid} is not judged: {named[0].describe()}")
        if pid is not None and discovery.servers:
            found = ", ".join(s.describe() for s in discovery.servers)
            raise UnavailableError(f"--pid {pid} is not an SGLang server process (found: {found})")
        raise UnavailableError(await asyncio.to_thread(nothing_found, discovery))
    if deadline_s is None:
        deadline_s = check_deadline_s(inputs.live, loaded, inputs.live.probe) + PREFLIGHT_MARGIN_S

    async def one(server: ServerProcess) -> LiveResult:
        result = await judge(server, inputs, loaded, strict=strict, allow_partial=allow_partial)
        if on_result is not None:
            on_result(server, result)
        return result

    tasks = []
    for server in servers:
        if on_server is not None:
            on_server(server)
        tasks.append(asyncio.ensure_future(one(server)))
    await asyncio.wait(tasks, timeout=deadline_s)
    results = []
    for server, task in zip(servers, tasks, strict=True):
        if task.done() and not task.cancelled():
            results.append(task.result())  # a check's own exception (a bug) propagates as before
        else:
            task.cancel()
            results.append(unfinished(server, loaded, deadline_s))
    return results
