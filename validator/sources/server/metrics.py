"""The server's own ``/metrics`` as live evidence: the production acceptance length, at no probe token.

``sglang:spec_accept_length`` keeps its last figure while idle, so decoding is proven only when a generation
counter grew between two readings (``metrics_reading.MetricsWatch``; one going down is a restart). Parsed
by ``prometheus_client.parser``; a body that does not parse, a 404 or no answer is an absent reading saying
why. Read before the probe, so the probe's tokens never count as traffic.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from validator.errors import UnavailableError
from validator.facts import NOTHING_ACCEPTED, SERVER, Progress, ServerMetricsFacts
from validator.sources.live_gathering import live_source
from validator.sources.server.metrics_reading import MetricsBoundError, MetricsWatch, parse_metrics

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering
    from validator.sources.server.client import SGLangClient

# How long a check waits to read /metrics a second time when the first reading shows the server's
# acceptance at 1.00 and decode traffic is not yet proven (no earlier reading to compare with, or no tokens
# since it): the signature is reported only when the server is seen generating. The same second look is
# taken when requests are in flight and their progress is not yet known (``server.progress``).
METRICS_CONFIRM_S = 2.0


@live_source("metrics", 40, needs=(SERVER,))  # cited as the server
async def gather(g: LiveGathering) -> None:
    """The server's own ``/metrics`` as evidence, parsed off the event loop. A 404 (no
    ``--enable-metrics``), an error or a body that is not Prometheus text is no finding: the facts say why
    there is no reading."""
    watch = g.inputs.metrics_watch or MetricsWatch()
    first = not watch.seen  # a sidecar's later re-checks compare with the previous one instead
    facts = await read_again(g.client, watch)
    al = facts.accept_length
    # the lifetime counters prove the collapse alone
    collapsed_unproven = (
        not facts.decoding and not facts.lifetime_collapsed and al is not None and al <= NOTHING_ACCEPTED
    )
    # work in flight and no earlier reading to compare with: a second look tells progress at no token's cost
    busy_unproven = (
        first
        and facts.progress is Progress.UNKNOWN
        and (facts.reading is not None and (facts.reading.in_flight or 0) > 0)
    )
    if facts.reading is not None and (collapsed_unproven or busy_unproven):
        await asyncio.sleep(METRICS_CONFIRM_S)
        again = await read_again(g.client, watch)
        if again.reading is not None:
            facts = again
    g.server.metrics = facts


async def read_again(client: SGLangClient, watch: MetricsWatch) -> ServerMetricsFacts:
    """One reading into ``watch`` (``server.progress`` also takes one at the stall bound, the sidecar's
    watch kept, rather than send a request)."""
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
        reading = await asyncio.to_thread(parse_metrics, text)
    except MetricsBoundError as exc:
        return watch.unreadable(f"/metrics passes a bound, not read: {exc}")
    except (ValueError, TypeError, IndexError) as exc:
        return watch.unreadable(f"/metrics is not Prometheus text ({type(exc).__name__})")
    return watch.observe(reading)
