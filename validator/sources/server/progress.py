"""Whether the server completes work (``server.progress``): from its own ``/metrics`` when they show it,
else from its log, else from one bounded request of our own (only where the run may generate).

``/health`` is served by the HTTP process, so a wedged scheduler can answer 200 for days. Metrics: work
completed between two readings is progress, work in flight with none completed over ``STALL_AFTER_S`` a stall.
Log: SGLang writes a batch line after each forward (metrics_reporter.py), so one within the bound is progress
and none past it after a line with requests *queued* is a stall; fresh gauges overrule it, and a full check
confirms it with its own request (``_confirm``). Read before the probe, which a stall skips.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from validator.errors import UnavailableError
from validator.facts import PROGRESS, SERVER, BatchLine, Progress, ProgressFacts, ServerMetricsFacts
from validator.sources.live_gathering import live_source
from validator.sources.server.live_log import poll_again
from validator.sources.server.metrics import read_again

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering
    from validator.sources.server.metrics_reading import MetricsWatch

REQUEST_S = 30.0  # the bound on our own request: a healthy Spark answers 4 tokens in well under a second
REQUEST_TOKENS = 4
REREAD_WITHIN_S = 2.0  # how far short of the stall bound a full check waits to read /metrics again
PROMPT = "The capital city of France is"  # SGLang's own warm-up prompt


@live_source(PROGRESS, 60, needs=(SERVER,))
async def gather(g: LiveGathering) -> None:
    """Progress from the metrics where they show it; else, on a full check, our own bounded request."""
    watch = g.inputs.metrics_watch  # the sidecar's, for its life; None for a one-shot check
    waiting = g.server.metrics
    if (
        watch is not None
        and waiting is not None
        and waiting.progress is Progress.UNKNOWN
        and waiting.stalled_for_s is not None
        and watch.stall_after_s - waiting.stalled_for_s <= REREAD_WITHIN_S
    ):
        # work waits and nothing completed, a moment short of the bound (a full check's schedule is not
        # the re-check's): look again once the bound is reached instead of sending a request of ours.
        # Further from it, the gauges may only be stale (SGLang refreshes them every 30 s when idle, so
        # a finished burst, our own probe's included, reads as work in flight): waiting out the bound
        # would hold every full check for it, where our request answers at once
        await asyncio.sleep(max(0.0, watch.stall_after_s - waiting.stalled_for_s) + 0.05)
        g.server.metrics = await read_again(g.client, watch)
    metrics = g.server.metrics
    if metrics is not None and metrics.progress in (Progress.ADVANCING, Progress.STALLED):
        in_flight = metrics.reading.in_flight if metrics.reading is not None else None
        if metrics.progress is Progress.ADVANCING:
            detail = f"the server completed work since its previous /metrics reading ({_tokens(metrics)})"
        else:
            detail = (
                f"{in_flight:g} request(s) running or queued and nothing completed for "
                f"{metrics.stalled_for_s or 0:.0f} s (/metrics)"
            )
        g.facts.progress = ProgressFacts(
            metrics.progress, "metrics", detail, stalled_for_s=metrics.stalled_for_s, in_flight=in_flight
        )
        if watch is not None:
            watch.last_progress = g.facts.progress
        return
    await _reread_log_at_the_bound(g)
    from_log = _from_log(g.facts.log.last_batch if g.facts.log is not None else None, g.inputs.stall_after_s)
    if from_log is not None and from_log.state is Progress.STALLED:
        if metrics is not None and metrics.progress is Progress.IDLE:
            from_log = None  # the gauges, fresher than a quiet log, say nothing waits
        elif g.run_probe and _confirm(watch):
            from_log = None  # a full check confirms with its own request: the queue line may be stale
    if from_log is not None:
        g.facts.progress = from_log
        if watch is not None:
            watch.last_progress = from_log
        return
    if not g.run_probe:
        # a re-check never generates: the last answer stands, said to be that
        last = watch.last_progress if watch is not None else None
        if last is not None:
            g.facts.progress = replace(last, detail=f"{last.detail} (as last seen; nothing newer since)")
        return
    g.facts.progress = await _own_request(g)
    if watch is not None:
        watch.last_progress = g.facts.progress


def _confirm(watch: MetricsWatch | None) -> bool:
    """Whether a full check asks the server itself before taking the log's stall: always in a one-shot
    check; in the sidecar only once the log's stall was already the last answer (it dropped readiness at
    once, and the next full check, an interval later, confirms: a stale queue line cannot hold readiness
    down for longer, and a real stall costs no request's timeout to be seen)."""
    last = watch.last_progress if watch is not None else None
    return last is None or (last.source == "log" and last.state is Progress.STALLED)


async def _reread_log_at_the_bound(g: LiveGathering) -> None:
    """On a re-check, a queue line a moment short of the stall bound: poll the log again once the bound
    is reached, as the metrics leg reads ``/metrics`` again, rather than leave the stall to the next
    re-check an interval later."""
    log, reader, bound = g.facts.log, g.log_reader, g.inputs.stall_after_s
    batch = log.last_batch if log is not None else None
    if g.run_probe or reader is None or batch is None or not batch.queued:
        return
    if not 0 < bound - batch.quiet_s <= REREAD_WITHIN_S:
        return
    await asyncio.sleep(bound - batch.quiet_s + 0.05)
    await poll_again(g)


def _from_log(batch: BatchLine | None, bound: float) -> ProgressFacts | None:
    """The log's verdict (module docstring), or None when it cannot tell."""
    if batch is None:
        return None
    running = "?" if batch.running is None else batch.running
    if batch.queued is not None and batch.queued > 0 and batch.quiet_s >= bound:
        return ProgressFacts(
            Progress.STALLED,
            "log",
            f"the server log's last {batch.kind} batch line said {running} request(s) running and "
            f"{batch.queued} queued, and no batch line followed for {batch.quiet_s:.0f} s",
            stalled_for_s=batch.quiet_s,
            in_flight=float(batch.queued + (batch.running or 0)),
        )
    if batch.within_s is not None and batch.within_s <= bound:
        return ProgressFacts(
            Progress.ADVANCING,
            "log",
            f"the scheduler logged a {batch.kind} batch {batch.within_s:.0f} s ago (server log)",
        )
    return None


def _tokens(metrics: ServerMetricsFacts) -> str:
    tokens = metrics.tokens_since
    return f"{tokens:g} tokens generated" if tokens is not None and tokens > 0 else "requests finished"


async def _own_request(g: LiveGathering) -> ProgressFacts:
    """One greedy request of :data:`REQUEST_TOKENS` tokens within :data:`REQUEST_S`."""
    payload = {"text": PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": REQUEST_TOKENS}}
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        gen = await asyncio.wait_for(g.client.generate(payload), timeout=REQUEST_S)
    except asyncio.TimeoutError:
        return ProgressFacts(
            Progress.STALLED,
            "request",
            f"/health answers, but our {REQUEST_TOKENS}-token request got nothing within {REQUEST_S:g} s",
            stalled_for_s=REQUEST_S,
            request_tokens=0,
        )
    except UnavailableError as exc:
        return ProgressFacts(Progress.UNKNOWN, "request", f"our request could not be made: {exc}")
    tokens = gen.meta_info.get("completion_tokens")
    n = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else len(gen.output_ids or [])
    wall = loop.time() - t0
    if n > 0:
        return ProgressFacts(
            Progress.ADVANCING, "request", f"our request got {n} token(s) in {wall:.2f} s", request_tokens=n
        )
    return ProgressFacts(
        Progress.UNKNOWN,
        "request",
        f"our request was answered with no token in {wall:.2f} s",
        request_tokens=0,
    )
