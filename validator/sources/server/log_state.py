"""One log stream's state: the current server start's facts, fed a line at a time, and which server claimed
each start.

Only the last start (``server_args=``) describes the running server; resolution lines just before it (the
silent ``auto`` -> flashinfer_mxfp4 override) are carried into it. Samples are capped at ``MAX_SAMPLES``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import Any, Protocol

from validator.facts import BatchLine, DecodeSample, LogFacts
from validator.sources.server.log_grammar import (
    CHILD_FAILED,
    ChildFailed,
    Continuation,
    Counted,
    Decode,
    Died,
    DSparkRunner,
    Event,
    LayerBackend,
    Loaded,
    Other,
    Override,
    Prefill,
    Ready,
    Running,
    Start,
    Stream,
    batch_counts,
    exception_line,
    parsed_args,
    read_in_stream,
    stream_of,
)

MAX_SAMPLES = 1000
_CHILD_FAILED_TEXT = f"a child process failed ({CHILD_FAILED})"


class Run:
    """Accumulates one start's facts; ``samples`` is a bounded deque until finished."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self.samples: deque[DecodeSample] = deque(maxlen=MAX_SAMPLES)
        # the last batch line (``Decode batch`` / ``Prefill batch``): its text, where it was read, and when
        # it was written where the reader knows (the journal's receipt time, epoch seconds)
        self.batch: tuple[str, int, float | None] | None = None


class LogParser:
    """Line-at-a-time state of one log stream: the current start's facts, fed incrementally."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.run = Run(where)
        # an override logged since the last running-server line: a resolution-time line of the next start
        self.pending_override = False
        self.starts = 0
        self.lines = 0
        # the record being continued is a component's death: its traceback's lines are read for the
        # exception that ended it (every other record's continuation lines are read for nothing)
        self.in_death_record = False
        self._raw_args: str | None = None
        self._parsed: dict[str, object] | None = None
        self._parsed_done = False  # whether _parsed holds this start's args (None: it has none)
        self.stream: Stream | None = None  # how the log's lines are wrapped: its first SGLang line's (a
        # reader that can read the file's head sets it; else the first such line fed does)
        self.clock: float | None = None  # when the line being fed was written, where the reader knows

    def feed(self, line: str, pos: int) -> None:
        self.lines += 1
        if self.stream is None:
            self.stream = stream_of(line)
            if self.stream is None:  # before the first SGLang line: nothing it could continue or set
                return
        event = read_in_stream(line, self.stream)
        if event is not None:  # None: a line this stream's writer did not write (log_grammar.Stream)
            self.apply(event, pos)
            if isinstance(event, Decode | Prefill):
                self.run.batch = (line, pos, self.clock)

    def apply(self, event: Event, pos: int) -> None:
        """One line's event, in log order."""
        if isinstance(event, Continuation):
            if self.in_death_record and (found := exception_line(event.text)) is not None:
                self._died_of(found)  # the last one wins: a chained traceback ends with what escaped
            return
        self.in_death_record = False
        if isinstance(event, Start):
            self.starts += 1
            self.run = Run(self.where)
            self.run.facts.flashinfer_override = self.pending_override
            self.run.facts.run_start_line = pos
            self.pending_override = False
            self._raw_args = event.raw_args
            self._parsed, self._parsed_done = None, False
            return
        f = self.run.facts
        if isinstance(event, Override):
            f.flashinfer_override = True
            self.pending_override = True
            return
        if isinstance(event, Died):
            current = f.crash if f.ready else f.start_failure
            if current is None or current == _CHILD_FAILED_TEXT:  # the first death is the cause
                self.in_death_record = True
                self._died_of(exception_line(event.text) or f"{event.component} hit an exception")
            return
        if isinstance(event, ChildFailed):
            if f.ready:
                f.crash = f.crash or _CHILD_FAILED_TEXT
            elif f.start_failure is None:
                f.start_failure = _CHILD_FAILED_TEXT
            return
        if isinstance(event, Other):
            return
        if isinstance(event, Counted):
            setattr(f, event.what, getattr(f, event.what) + 1)
        elif isinstance(event, Ready):
            f.ready = True
        elif isinstance(event, Loaded):
            f.loaded_models.append(event.model_class)
        elif isinstance(event, DSparkRunner):
            f.dspark_gamma, f.dspark_verify_tokens = event.gamma, event.verify_tokens
        elif isinstance(event, LayerBackend):
            f.layer_backend_lines[event.backend] = f.layer_backend_lines.get(event.backend, 0) + 1
        elif isinstance(event, Decode):
            if event.accept_len is not None:
                self.run.samples.append(
                    DecodeSample(event.accept_len, event.accept_rate, event.gen_throughput, pos)
                )
                f.decode_sample_count += 1
        elif isinstance(event, Prefill):
            pass  # the counts of the last one are read once, when asked (``last_batch``)
        else:
            assert isinstance(event, Running)
        # a running server logged this: earlier resolution lines belong to this run, not the next
        self.pending_override = False

    def _died_of(self, exception: str) -> None:
        f = self.run.facts
        if f.ready:
            f.crash = exception
        else:
            f.start_failure = exception

    def snapshot(self) -> LogFacts:
        """A copy of the current start's facts, secrets redacted (the parser keeps accumulating)."""
        run = self.run.facts
        facts = replace(
            run,
            loaded_models=list(run.loaded_models),
            decode_samples=list(self.run.samples),
            layer_backend_lines=dict(run.layer_backend_lines),
        )
        facts.runs = self.starts
        facts.lines_total = self.lines
        if not self._parsed_done:  # ~30 KB repr: parsed and redacted once per start, not per poll
            self._parsed, self._parsed_done = parsed_args(self._raw_args), True
        facts.server_args = dict(self._parsed) if self._parsed is not None else None
        return facts


class BatchWatch:
    """Bounds on how long ago a reader's current last batch line was written, from when this reader first
    saw it (our monotonic clock, never the log's stamps: the server's local time): at least 0 s when first
    seen, at most since the poll before. An exact age (the journal's receipt time, kept with the line; the
    file's mtime when the line is its last, ``exact_s``) bounds both sides."""

    def __init__(self) -> None:
        self._key: tuple[int, str] | None = None
        self._seen = 0.0
        self._since: float | None = None  # the poll before the one that first saw it
        self._last_poll: float | None = None

    def observe(self, parser: LogParser, exact_s: float | None = None) -> BatchLine | None:
        now = time.monotonic()
        last_poll, self._last_poll = self._last_poll, now
        batch, stream = parser.run.batch, parser.stream
        counts = batch_counts(batch[0], stream) if batch is not None and stream is not None else None
        if batch is None or counts is None:
            self._key = None
            return None
        line, pos, at = batch
        if at is not None:  # the journal's receipt time of the line
            exact_s = time.time() - at
        key = (pos, line)
        if key != self._key:
            self._key, self._seen, self._since = key, now, last_poll
        quiet = now - self._seen
        within = now - self._since if self._since is not None else None
        if exact_s is not None:
            quiet, within = max(quiet, exact_s), exact_s if within is None else min(within, max(exact_s, 0.0))
        return BatchLine(counts.kind, counts.running, counts.queued, quiet, within, pos)


class ServerId(Protocol):
    """The identity of the server that answered (``validator.sources.server.identity.ServerIdentity``);
    ``listener_pid``: the process holding its port on this host, when visible (its user may write its log)."""

    @property
    def listener_pid(self) -> int | None: ...

    def same_server(self, other: Any) -> bool: ...


class LogReader(Protocol):
    """A followed log: ``poll`` reads what is new (blocking: call it off the event loop). ``server`` is the
    server that answered this check: the first server to see a start claims it, and a different server
    later finds that start stale until its own appears (a restart whose start is not logged yet)."""

    where: str

    def poll(self, server: ServerId | None = None) -> LogFacts: ...


class Claims:
    """Which server each start (by generation) was first seen with."""

    def __init__(self) -> None:
        self._by_generation: dict[int, ServerId] = {}

    def stale(self, generation: int, server: ServerId | None) -> bool:
        if server is None or generation == 0:
            return False
        owner = self._by_generation.setdefault(generation, server)
        if len(self._by_generation) > 64:  # only recent starts matter
            for g in sorted(self._by_generation)[:-32]:
                del self._by_generation[g]
        return not owner.same_server(server)
