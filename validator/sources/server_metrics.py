"""The server's own Prometheus text (``/metrics``) as live evidence: the production acceptance length.

SGLang exports ``sglang:spec_accept_length`` (mean accepted drafts + bonus per verify over the last
``decode_log_interval`` decode steps), with or without ``engine_type``/``model_name``/rank labels by build,
beside the tokenizer's counters (``sglang:generation_tokens_total``, ``sglang:spec_verify_calls_total``).
Reading it costs the server nothing and spends no probe token: it measures the real traffic.

The gauge alone cannot say that decoding is happening now: it keeps its last interval's figure while
idle, and a 1.00 left from an hour ago says nothing about the present. So a reading is compared with the
previous one (:class:`MetricsWatch`): decoding is proven only when a generation counter grew between them.
A counter that went down means a restart (a new process): that pair proves nothing.

The text is parsed by ``prometheus_client.parser`` (the reference parser), never by hand. A body that does
not parse, a 404 (no ``--enable-metrics``) or an unreachable endpoint is no finding about the server: the
reading is absent and says why.

As the live job's metrics source (:func:`gather`), it is read before the probe, so that the probe's own
tokens never count as the server's traffic.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import TYPE_CHECKING

from validator.errors import UnavailableError
from validator.facts import NOTHING_ACCEPTED, MetricsReading, ServerMetricsFacts

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering
    from validator.sources.server_http import SGLangClient

ACCEPT_LENGTH = "sglang:spec_accept_length"
ACCEPT_RATE = "sglang:spec_accept_rate"
GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
NUM_DRAFT_TOKENS = "sglang:spec_num_draft_tokens"
_WANTED = frozenset({ACCEPT_LENGTH, ACCEPT_RATE, GENERATION_TOKENS, VERIFY_CALLS, NUM_DRAFT_TOKENS})


def parse_metrics(text: str) -> MetricsReading:
    """Read the families this project needs; raises ``ValueError`` when the text is not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[float]] = {name: [] for name in _WANTED}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name in values
                and isinstance(sample.value, int | float)
                and math.isfinite(sample.value)
            ):
                values[sample.name].append(float(sample.value))

    def total(name: str) -> float | None:
        return sum(values[name]) if values[name] else None

    def mean(name: str) -> float | None:
        return sum(values[name]) / len(values[name]) if values[name] else None

    return MetricsReading(
        accept_lengths=tuple(values[ACCEPT_LENGTH]),
        accept_rate=mean(ACCEPT_RATE),
        generation_tokens=total(GENERATION_TOKENS),
        verify_calls=total(VERIFY_CALLS),
        num_draft_tokens=mean(NUM_DRAFT_TOKENS),
    )


class MetricsWatch:
    """The previous reading, so that each new one can tell whether the server is decoding. One per
    ``check`` run, or one for the sidecar's life (each re-check compares with the last one's reading)."""

    def __init__(self) -> None:
        self._last: MetricsReading | None = None
        self._lock = threading.Lock()

    def observe(self, reading: MetricsReading) -> ServerMetricsFacts:
        with self._lock:
            last, self._last = self._last, reading
        if last is None:
            return ServerMetricsFacts(reading, note="first reading: decode traffic not yet measurable")
        gen_now, gen_then = reading.generation_tokens, last.generation_tokens
        if gen_now is None or gen_then is None:
            return ServerMetricsFacts(reading, note=f"no {GENERATION_TOKENS} counter: decode traffic unknown")
        tokens = gen_now - gen_then
        if tokens < 0:  # counters went back: another process answers now
            return ServerMetricsFacts(reading, note="the server's counters went back (a restart)")
        window = None
        if reading.verify_calls is not None and last.verify_calls is not None:
            calls = reading.verify_calls - last.verify_calls
            window = tokens / calls if calls > 0 else None
        note = (
            None if tokens > 0 else "no tokens generated since the previous reading: the gauge may be stale"
        )
        return ServerMetricsFacts(
            reading, note=note, decoding=tokens > 0, tokens_since=tokens, window_accept_length=window
        )

    def unreadable(self, why: str) -> ServerMetricsFacts:
        return ServerMetricsFacts(None, note=why)


# How long a check waits to read /metrics a second time when the first reading shows the server's
# acceptance at 1.00 and decode traffic is not yet proven (no earlier reading to compare with, or no tokens
# since it): the signature is reported only when the server is seen generating.
METRICS_CONFIRM_S = 2.0


async def gather(g: LiveGathering) -> None:
    """The server's own ``/metrics`` as evidence, parsed off the event loop. A 404 (no
    ``--enable-metrics``), an error or a body that is not Prometheus text is no finding: the facts say why
    there is no reading."""
    watch = g.inputs.metrics_watch or MetricsWatch()
    facts = await _one_reading(g.client, watch)
    al = facts.accept_length
    if facts.reading is not None and not facts.decoding and al is not None and al <= NOTHING_ACCEPTED:
        await asyncio.sleep(METRICS_CONFIRM_S)
        again = await _one_reading(g.client, watch)
        if again.reading is not None:
            facts = again
    g.server.metrics = facts


async def _one_reading(client: SGLangClient, watch: MetricsWatch) -> ServerMetricsFacts:
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
    except (ValueError, TypeError, IndexError) as exc:
        return watch.unreadable(f"/metrics is not Prometheus text ({type(exc).__name__})")
    return watch.observe(reading)
