"""The live job: wait for a running server, read its own state, the attestation and the log, run the
acceptance probe, and check it all against the pack.

Used by ``spark-validate check`` and by the sidecar (``serve``), which re-runs it with the probe on its
own, longer interval. A server that cannot be reached is not a failure of the deployment but missing
evidence: ``server.ready`` is ``error`` and the verdict ``inconclusive`` (exit 69).

``run_live`` returns a ``LiveResult``: the report plus whether the target was reached and what identifies
the server process that answered, so that the sidecar decides "server up" and "same server" from typed
facts instead of looking for a check ID in the report (a pack may not list ``server.ready`` at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from validator.engine import build_report, run_checks
from validator.errors import InputError, UnavailableError
from validator.facts import (
    ATTESTATION,
    JOURNAL_PREFIX,
    LOG,
    NOTHING_ACCEPTED,
    PROBE,
    SERVER,
    WEIGHTS,
    Facts,
    NodeFacts,
    ServerFacts,
    ServerMetricsFacts,
)
from validator.recipe_match import NO_PACK, choose_pack
from validator.report import ProbeResult, Report, utc_now_iso
from validator.rulepack import LoadedPack, load_pack
from validator.selection import Selection
from validator.sources.attestation import binding_problems, read_trusted
from validator.sources.readiness import wait_until_ready
from validator.sources.server_http import SGLangClient
from validator.sources.server_identity import ServerIdentity, identity_of, listener_of
from validator.sources.server_log import FileLogReader, open_log_reader
from validator.sources.server_metrics import MetricsWatch, parse_metrics

if TYPE_CHECKING:
    from validator.sources.log_state import LogReader

ProgressFn = Callable[[Any], None]


@dataclass(frozen=True)
class LiveResult:
    """One live check run: the report, and the typed answer to "was the server there, and which one"."""

    report: Report
    reached: bool  # /health answered 200 and /server_info was served
    identity: ServerIdentity | None  # None when the server was not reached
    pack: LoadedPack | None = None  # the pack the report was judged by (``--rules auto`` picks it)
    node: NodeFacts | None = None  # a running server's node facts (``check``/``serve`` with no --url)
    server_metrics: ServerMetricsFacts | None = None  # the server's own /metrics, as last read


@dataclass
class LiveInputs:
    url: str
    api_key: str | None = None
    attestation: Path | None = None
    server_uid: int | None = None  # --server-user: who the server runs as, where its process is not visible
    log: Path | str | None = None  # a file, or "journal:UNIT"
    # a reader that outlives one run (the sidecar follows the log); None: read ``log`` once
    log_reader: LogReader | None = None
    wait_s: float = 0.0
    probe: bool = True
    weights_checker: bool = False
    on_progress: ProgressFn | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    retries: int = 3
    allow_partial: bool = False  # --allow-partial: critical checks that could not run do not block
    selection: Selection | None = None  # --check / --skip
    # the previous /metrics reading; the sidecar's outlives one run (None: a fresh one per run)
    metrics_watch: MetricsWatch | None = None


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


async def gather_live(inputs: LiveInputs, loaded: LoadedPack, *, probe: bool | None = None) -> Facts:
    """The live facts, within :func:`check_deadline_s`; past it, whatever was not gathered is an error
    naming the deadline (the verdict is then inconclusive, never a pass)."""
    facts = Facts(mode="check")
    run_probe = probe if probe is not None else inputs.probe
    budget = check_deadline_s(inputs, loaded, run_probe)
    try:
        await asyncio.wait_for(_gather(facts, inputs, loaded, run_probe), timeout=budget)
    except asyncio.TimeoutError:
        why = f"{inputs.url}: the check did not finish within its {budget:g} s deadline"
        facts.errors.setdefault(SERVER if facts.server is None else PROBE, why)
    return facts


class StartWatch:
    """``start_failed`` for :func:`wait_until_ready`: whether the log shows that the start being waited
    for has died, so that a check does not wait out ``--wait`` for a server that will never answer.

    Only a failure that appears while waiting counts. A log file whose last start had already failed
    when the wait began may describe an earlier attempt (systemd may be starting the next one, which logs
    nothing for the first seconds): the wait goes on, and ``earlier`` says what the log showed, for the
    message if it runs out; that dead start is then no evidence (``_read_log``), since it may not be the
    server being waited for. The journal is read by the unit's current invocation, and a restart is a new
    invocation: a dead start there is this attempt's, whenever it died. Each journal poll runs
    ``systemctl`` and ``journalctl``, so the journal is asked at most every ``JOURNAL_EVERY_S``."""

    JOURNAL_EVERY_S = 5.0

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self._one_invocation = reader.where.startswith(JOURNAL_PREFIX)
        self.earlier: str | None = None  # the log's last start had died before the wait began
        self.seen: str | None = None  # a start died while waiting: the wait ended on it
        self._baseline: tuple[int, str | None] | None = None
        self._next = 0.0  # monotonic time of the next poll

    async def __call__(self) -> str | None:
        if time.monotonic() < self._next:
            return None
        if self._one_invocation:
            self._next = time.monotonic() + self.JOURNAL_EVERY_S
        try:
            log = await asyncio.to_thread(self.reader.poll)
        except (InputError, UnavailableError):  # not written yet, or unreadable (server.log says so later)
            if self._baseline is None:
                self._baseline = (0, None)  # a log that was not there held no earlier attempt
            return None
        if log.crash is not None and log.stale is None:
            # a start that was ready and then died: that server is gone, whenever it died (a supervisor's
            # next attempt logs a start of its own, which ends this)
            self.seen = log.crash
            return f"the server died after it was ready: its log {self.reader.where} says: {log.crash}"
        now = (log.generation, log.start_failure)
        if self._baseline is None and self._one_invocation:
            self._baseline = (log.generation, None)  # the current invocation: nothing earlier to mistake
        if self._baseline is None:
            self._baseline, self.earlier = now, log.start_failure
        already = now == self._baseline and self.earlier is not None  # there before the wait began
        if log.start_failure is None or already:
            return None
        self.seen = log.start_failure
        return f"the server failed to start: its log {self.reader.where} says: {log.start_failure}"


async def _gather(facts: Facts, inputs: LiveInputs, loaded: LoadedPack, probe: bool) -> None:
    # one reader for the wait and the log's facts (the sidecar's follows the log across checks)
    reader = inputs.log_reader
    if reader is None and inputs.log is not None:
        reader = open_log_reader(inputs.log)
    try:
        await _gather_with(facts, inputs, loaded, probe, reader)
    finally:
        if inputs.log_reader is None and isinstance(reader, FileLogReader):
            reader.close()


async def _gather_with(
    facts: Facts, inputs: LiveInputs, loaded: LoadedPack, probe: bool, reader: LogReader | None
) -> None:
    # Built in a worker thread: httpx loads its TLS trust store when a client is created (tens of ms of
    # CPU), which on the sidecar's event loop delayed /livez at every check.
    client = await asyncio.to_thread(
        SGLangClient,
        inputs.url,
        api_key=inputs.api_key,
        connect_timeout=inputs.connect_timeout,
        read_timeout=inputs.read_timeout,
        retries=inputs.retries,
    )
    async with client:
        watch = StartWatch(reader) if reader is not None else None
        try:
            ready = await wait_until_ready(
                client, wait_s=inputs.wait_s, on_progress=inputs.on_progress, start_failed=watch
            )
        except UnavailableError as exc:
            earlier = watch.earlier if watch is not None else None
            note = f"; the log's last start had failed: {earlier}" if earlier else ""
            facts.errors[SERVER] = str(exc) + note
            await asyncio.to_thread(_read_files, facts, inputs, None)
            await _read_log(facts, reader, died_before_wait=watch is not None and watch.seen is None)
            return
        facts.server = ServerFacts(
            url=inputs.url,
            healthy=True,
            server_info=ready.server_info,
            server_info_endpoint=ready.server_info_endpoint,
        )
        with contextlib.suppress(UnavailableError):  # optional evidence; /server_info already answered
            facts.server.model_info = await client.model_info()
        await asyncio.to_thread(_read_files, facts, inputs, ready.server_info)
        await _read_log(facts, reader)
        facts.server.metrics = await _read_metrics(client, inputs)
        facts.server.listener = await asyncio.to_thread(listener_of, inputs.url)
        if inputs.weights_checker:
            try:
                facts.server.weights_checksums = await client.weights_checker("all")
            except UnavailableError as exc:
                facts.errors[WEIGHTS] = str(exc)
        if probe:
            if not ready.server_info.get("speculative_algorithm"):
                pass  # spec.accept_length reports it; a probe would only measure plain decoding
            else:
                await _probe(facts, client, loaded, ready.server_info)
                await _reread_log(facts, reader)


# How long a check waits to read /metrics a second time when the first reading shows the server's
# acceptance at 1.00 and decode traffic is not yet proven (no earlier reading to compare with, or no tokens
# since it): the signature is reported only when the server is seen generating.
METRICS_CONFIRM_S = 2.0


async def _read_metrics(client: Any, inputs: LiveInputs) -> ServerMetricsFacts:
    """The server's own ``/metrics`` as evidence, parsed off the event loop. Read before the probe, so
    the probe's own tokens never count as the server's traffic. A 404 (no ``--enable-metrics``), an error
    or a body that is not Prometheus text is no finding: the facts say why there is no reading."""
    watch = inputs.metrics_watch or MetricsWatch()
    facts = await _one_reading(client, watch, parse_metrics)
    al = facts.accept_length
    if facts.reading is not None and not facts.decoding and al is not None and al <= NOTHING_ACCEPTED:
        await asyncio.sleep(METRICS_CONFIRM_S)
        again = await _one_reading(client, watch, parse_metrics)
        if again.reading is not None:
            facts = again
    return facts


async def _one_reading(client: Any, watch: MetricsWatch, parse: Callable[[str], Any]) -> ServerMetricsFacts:
    try:
        text = await client.metrics_text()
    except UnavailableError as exc:
        status = getattr(exc, "status", None)
        why = (
            "/metrics answers 404: the server runs without --enable-metrics"
            if status == 404
            else f"/metrics could not be read: {exc}"
        )
        return watch.unreadable(why)
    try:
        reading = await asyncio.to_thread(parse, text)
    except (ValueError, TypeError, IndexError) as exc:
        return watch.unreadable(f"/metrics is not Prometheus text ({type(exc).__name__})")
    return watch.observe(reading)


async def _probe(facts: Facts, client: Any, loaded: LoadedPack, server_info: dict[str, Any]) -> None:
    # imported (and below, the prompts parsed) in a worker thread, off the sidecar's event loop
    await asyncio.to_thread(importlib.import_module, "validator.probe")
    from validator.probe import ProbeConfig, load_prompts, probe_server

    settings = loaded.pack.probe
    threshold = loaded.pack.expect.accept_length_min
    prompts_file = loaded.probe_prompts
    if settings is None or threshold is None or prompts_file is None:
        return  # the pack lists no check that reads the probe
    draft_tokens = server_info.get("speculative_num_draft_tokens")
    config = ProbeConfig(
        threshold=threshold,
        alpha=1.0 - settings.confidence,
        num_draft_tokens=draft_tokens if isinstance(draft_tokens, int) and draft_tokens > 1 else 4,
        max_total_tokens=settings.max_total_tokens,
        max_wall_s=settings.max_seconds,
    )
    try:
        loaded_prompts = await asyncio.to_thread(load_prompts, prompts_file)
        prompts = [
            replace(p, max_new_tokens=min(p.max_new_tokens, settings.max_new_tokens)) for p in loaded_prompts
        ]
        facts.probe = await probe_server(client, prompts, config)
    except (UnavailableError, InputError) as exc:
        facts.errors[PROBE] = str(exc)


def _read_files(facts: Facts, inputs: LiveInputs, server_info: dict[str, Any] | None) -> None:
    """The attestation and the log are local files; unreadable, untrusted or stale ones become source
    errors. Runs in a worker thread (``asyncio.to_thread``): in the sidecar, a slow or hostile file must
    not stall the event loop that answers ``/livez``."""
    if inputs.attestation is not None:
        _read_attestation(facts, inputs.attestation, inputs.url, server_info, inputs.server_uid)


async def _read_log(facts: Facts, reader: LogReader | None, *, died_before_wait: bool = False) -> None:
    """The server log, read off the event loop. A log that holds no start of the running server is a
    source error (``server.log`` reports it), never facts for other checks to misread. The reader is told
    which server answered, so that a followed log's start of a previous process is not taken for the
    restarted one's. With ``died_before_wait`` (the server was not reached, and no start died while the
    check waited), a dead last start is an earlier attempt as far as anyone can tell: no evidence either."""
    if reader is None:
        return
    try:
        log = await asyncio.to_thread(reader.poll, identity_of(facts))
    except (InputError, UnavailableError) as exc:
        facts.errors[LOG] = str(exc)
        return
    if died_before_wait and log.start_failure is not None and log.stale is None:
        log.stale = (
            f"its last start had already died when this check began ({log.start_failure}): it may be an "
            "earlier attempt than the server being waited for"
        )
    problem = log.unusable()
    if problem is not None:
        facts.errors[LOG] = problem
    else:
        facts.log = log


async def _reread_log(facts: Facts, reader: LogReader | None) -> None:
    """The log again after the probe (an incremental poll: only what was logged since): a server that
    died while it was probed (the scheduler's exception after ready) is then seen by ``server.log``."""
    if reader is None or facts.log is None:
        return
    try:
        log = await asyncio.to_thread(reader.poll, identity_of(facts))
    except (InputError, UnavailableError):
        return  # the earlier reading stands
    if log.unusable() is None:
        facts.log = log


def _read_attestation(
    facts: Facts, path: Path, url: str, server_info: dict[str, Any] | None, server_uid: int | None
) -> None:
    """Only a document bound to this server (``validator.attestation.trust.binding_problems``) becomes
    evidence the other checks read; ``attestation.trust`` reports why one was refused."""

    try:
        trust = read_trusted(path, url=url, server_uid=server_uid)
    except (InputError, UnavailableError) as exc:
        facts.errors[ATTESTATION] = str(exc)
        return
    problems = binding_problems(trust, url, server_info)
    facts.attestation_trust = replace(trust, unbound=tuple(problems))  # attestation.trust reports them
    if problems:
        facts.errors[ATTESTATION] = (
            f"{path}: not this server's attestation (stale or untrusted): " + "; ".join(problems)
        )
    else:
        facts.attestation = trust.document


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
    # no pack is written for the model: nothing is judged, and nothing unjudged is ever a pass
    results = (
        [] if no_pack else run_checks(facts, loaded, mode="check", strict=strict, selection=inputs.selection)
    )
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
