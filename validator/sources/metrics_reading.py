"""What a ``/metrics`` text says: the families this project reads (:func:`parse_metrics`), and whether
the server is decoding, by comparing each reading with the previous one (:class:`MetricsWatch`).

Parsed from text, without a client: the live source (``validator.sources.server_metrics``) fetches the
text, and the watch, a state object that the sidecar keeps for its life (``LiveInputs.metrics_watch``),
needs nothing of the live gathering context its reader is typed against.
"""

from __future__ import annotations

import math
import threading

from validator.facts import MetricsReading, ServerMetricsFacts

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
