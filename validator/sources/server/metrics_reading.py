"""What a ``/metrics`` text says: the families this project reads (:func:`parse_metrics`), and whether
the server is decoding, by comparing each reading with the previous one (:class:`MetricsWatch`).

Parsed from text, without a client: the live source (``validator.sources.server.metrics``) fetches the
text, and the watch, a state object that the sidecar keeps for its life (``LiveInputs.metrics_watch``),
needs nothing of the live gathering context its reader is typed against.
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, fields
from typing import Any

from validator.facts import MetricsReading, Progress, ProgressFacts, ServerMetricsFacts

ACCEPT_LENGTH = "sglang:spec_accept_length"
ACCEPT_RATE = "sglang:spec_accept_rate"
GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
NUM_DRAFT_TOKENS = "sglang:spec_num_draft_tokens"
RUNNING_REQS = "sglang:num_running_reqs"
QUEUE_REQS = "sglang:num_queue_reqs"
ITL_COUNT = "sglang:inter_token_latency_seconds_count"
REQUESTS_TOTAL = "sglang:num_requests_total"
_WANTED = frozenset(
    {
        ACCEPT_LENGTH, ACCEPT_RATE, GENERATION_TOKENS, VERIFY_CALLS, NUM_DRAFT_TOKENS,
        RUNNING_REQS, QUEUE_REQS, ITL_COUNT, REQUESTS_TOTAL,
    }
)  # fmt: skip
# A histogram's family is named without its sample suffix in ``# HELP``/``# TYPE``; its other samples
# (``_bucket``, ``_sum``) are dropped before the parser.
_FAMILIES = frozenset({n.removesuffix("_total").removesuffix("_count") for n in _WANTED} | _WANTED)

# SGLang's scheduler refreshes its gauges every 30 s while idle (``check_memory``: "During idle time, also
# collect metrics every 30 seconds"), and otherwise only every ``decode_log_interval`` decode steps: after
# traffic ends, ``num_running_reqs`` keeps its last figure for up to 30 s. So work is called stalled only
# when it has been seen waiting, with nothing completed, over two readings at least this far apart.
STALL_AFTER_S = 30.0

# Time bounds on the server's text, not only the 16 MiB byte cap: prometheus_client's label parser is
# quadratic in a line's label count. SGLang's own lines carry at most 6 labels and stay under 1 KiB; its
# families have one series per rank and streaming flag. Past a bound the reading is refused as a whole (no
# reading, a note saying which bound), never parsed in part.
MAX_LINE = 4096  # characters per line of a family we read (other families' lines are only split)
MAX_LABELS = 32  # labels per series
MAX_SERIES = 256  # series per family we read
# characters of the families read, all lines together: the parser's unescaping is slow per escape, so lines
# each within every bound above could still hold the reading past --wait; SGLang's own are a few KiB
MAX_READ = 65_536


class MetricsBoundError(ValueError):
    """The text passes a bound of :data:`MAX_LINE`, :data:`MAX_LABELS`, :data:`MAX_SERIES` or
    :data:`MAX_READ`."""


def _wanted_lines(text: str) -> str:
    """The lines of the families this project reads (samples, ``# HELP`` and ``# TYPE``), each held to the
    bounds; everything else is dropped unparsed, in one linear pass."""
    kept: list[str] = []
    series: dict[str, int] = {}
    size = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            parts = line.split(None, 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
            if name not in _FAMILIES:
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
        size += len(line) + 1
        if size > MAX_READ:
            raise MetricsBoundError(f"the families read are over {MAX_READ} characters (at line {number})")
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
        running_reqs=total(RUNNING_REQS),
        queue_reqs=total(QUEUE_REQS),
        itl_observations=total(ITL_COUNT),
        requests_total=total(REQUESTS_TOTAL),
    )


def _grew(now: tuple[float | None, ...], then: tuple[float | None, ...]) -> bool | None:
    """Whether any work counter grew (None: no counter is in both readings)."""
    pairs = [(a, b) for a, b in zip(now, then, strict=True) if a is not None and b is not None]
    return any(a > b for a, b in pairs) if pairs else None


class MetricsWatch:
    """The previous reading, so that each new one can tell whether the server is decoding, and whether
    work waits with nothing completed (``Progress.STALLED``). One per ``check`` run, or one for the
    sidecar's life (each re-check compares with the last one's reading)."""

    def __init__(self, stall_after_s: float = STALL_AFTER_S) -> None:
        self._last: MetricsReading | None = None
        self._waiting_since: MetricsReading | None = None  # the first reading of work waiting, none done
        self._lock = threading.Lock()
        self.stall_after_s = stall_after_s
        # ``server.progress`` from the last full check's own request, for the re-checks that send none
        self.last_progress: ProgressFacts | None = None

    @property
    def seen(self) -> bool:
        """Whether a reading was taken before (the next one is compared with it)."""
        return self._last is not None

    def _progress(self, reading: MetricsReading, last: MetricsReading) -> tuple[Progress, float | None]:
        """Work done between two readings of one process; else, how long work has waited."""
        grew = _grew(reading.work_done, last.work_done)
        if grew:
            self._waiting_since = None
            return Progress.ADVANCING, None
        in_flight = reading.in_flight
        if grew is None or in_flight is None:
            return Progress.UNKNOWN, None
        if in_flight <= 0:
            self._waiting_since = None
            return Progress.IDLE, None
        if self._waiting_since is None:
            # waiting counts from the previous reading only if it showed the work in flight too
            self._waiting_since = last if (last.in_flight or 0) > 0 else reading
        waited = reading.read_at - self._waiting_since.read_at
        return (Progress.STALLED if waited >= self.stall_after_s else Progress.UNKNOWN), waited

    def observe(self, reading: MetricsReading) -> ServerMetricsFacts:
        with self._lock:
            last, self._last = self._last, reading
            if last is None:
                idle = reading.in_flight is not None and reading.in_flight <= 0
                return ServerMetricsFacts(
                    reading,
                    note="first reading: decode traffic not yet measurable",
                    progress=Progress.IDLE if idle else Progress.UNKNOWN,
                )
            if _grew(last.work_done, reading.work_done):  # a counter went back: another process
                self._waiting_since = None
                return ServerMetricsFacts(reading, note="the server's counters went back (a restart)")
            progress, waited = self._progress(reading, last)
        return self._decoding(reading, last, progress, waited)

    def _decoding(
        self, reading: MetricsReading, last: MetricsReading, progress: Progress, waited: float | None
    ) -> ServerMetricsFacts:
        gen_now, gen_then = reading.generation_tokens, last.generation_tokens
        if gen_now is None or gen_then is None:
            return ServerMetricsFacts(
                reading,
                note=f"no {GENERATION_TOKENS} counter: decode traffic unknown",
                progress=progress,
                stalled_for_s=waited,
            )
        tokens = gen_now - gen_then
        window = None
        if reading.verify_calls is not None and last.verify_calls is not None:
            calls = reading.verify_calls - last.verify_calls
            window = tokens / calls if calls > 0 else None
        note = (
            None if tokens > 0 else "no tokens generated since the previous reading: the gauge may be stale"
        )
        return ServerMetricsFacts(
            reading,
            note=note,
            decoding=tokens > 0,
            tokens_since=tokens,
            window_accept_length=window,
            progress=progress,
            stalled_for_s=waited,
        )

    def unreadable(self, why: str) -> ServerMetricsFacts:
        return ServerMetricsFacts(None, note=why)

    def export(self) -> dict[str, Any] | None:
        """The readings a later process needs to go on comparing (``npd`` keeps them between runs):
        the last one and the first of work waiting, their times on the monotonic clock (the system's,
        shared by every process of one boot). None: no reading yet."""
        with self._lock:
            if self._last is None:
                return None
            since = self._waiting_since
            return {"last": asdict(self._last), "waiting_since": asdict(since) if since is not None else None}

    def restore(self, state: object) -> bool:
        """Go on from ``export``'s value (a state file's: checked field by field, as any input); False,
        and nothing restored, when it is not that."""
        if not isinstance(state, dict) or set(state) != {"last", "waiting_since"}:
            return False
        last = _reading_of(state["last"])
        since = _reading_of(state["waiting_since"]) if state["waiting_since"] is not None else None
        if last is None or (state["waiting_since"] is not None and since is None):
            return False
        with self._lock:
            self._last, self._waiting_since = last, since
        return True


_FIELDS = frozenset(f.name for f in fields(MetricsReading))
_FLOAT_FIELDS = _FIELDS - {"accept_lengths", "read_at"}  # each a number or None


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _reading_of(d: object) -> MetricsReading | None:
    """A ``MetricsReading`` from its ``asdict`` form, or None when any field is not what it must be."""
    if not isinstance(d, dict) or set(d) != _FIELDS:
        return None
    lengths = d["accept_lengths"]
    if not isinstance(lengths, list) or len(lengths) > MAX_SERIES or not all(_number(v) for v in lengths):
        return None
    if not _number(d["read_at"]) or not all(d[k] is None or _number(d[k]) for k in _FLOAT_FIELDS):
        return None
    return MetricsReading(
        accept_lengths=tuple(float(v) for v in lengths),
        read_at=float(d["read_at"]),
        **{k: None if d[k] is None else float(d[k]) for k in _FLOAT_FIELDS},
    )
