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

# Time bounds on the server's text, not only the 16 MiB byte cap: prometheus_client's label parser is
# quadratic in a line's label count, so one series with 250,000 labels (2.8 MB) would hold a worker thread
# for about a minute. SGLang's own lines carry at most 6 labels and stay under 1 KiB; its families have one
# series per rank and streaming flag. Past a bound the reading is refused as a whole (no reading, a note
# saying which bound), never parsed in part.
MAX_LINE = 4096  # characters per line of a family we read (other families' lines are only split)
MAX_LABELS = 32  # labels per series
MAX_SERIES = 256  # series per family we read


class MetricsBoundError(ValueError):
    """The text passes a bound of :data:`MAX_LINE`, :data:`MAX_LABELS` or :data:`MAX_SERIES`."""


def _wanted_lines(text: str) -> str:
    """The lines of the families this project reads (samples, ``# HELP`` and ``# TYPE``), each held to the
    bounds; everything else is dropped unparsed, in one linear pass."""
    kept: list[str] = []
    series: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            parts = line.split(None, 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
            # a counter's family is named without ``_total`` in its TYPE line
            if name not in _WANTED and f"{name}_total" not in _WANTED:
                continue
        else:
            name = line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""
            if name not in _WANTED:
                continue
            series[name] = series.get(name, 0) + 1
            if series[name] > MAX_SERIES:
                raise MetricsBoundError(f"{name} has over {MAX_SERIES} series")
            if line.count('="') > MAX_LABELS:
                raise MetricsBoundError(f"line {number} ({name}) has over {MAX_LABELS} labels")
        if len(line) > MAX_LINE:
            raise MetricsBoundError(f"line {number} ({name}) is {len(line)} characters, over {MAX_LINE}")
        kept.append(line)
    kept.append("")
    return "\n".join(kept)


def parse_metrics(text: str) -> MetricsReading:
    """Read the families this project needs; raises ``ValueError`` when the text is not Prometheus text
    (:class:`MetricsBoundError` when it passes a bound)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[float]] = {name: [] for name in _WANTED}
    for family in text_string_to_metric_families(_wanted_lines(text)):
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
