"""One log stream's state: the current server start's facts, fed a line at a time by a reader (file or
journal), and which server claimed each start.

A log often holds several server starts; only the last one describes the running server. A start is
marked by the launcher's ``server_args=`` line; the few resolution-time lines logged just before it (the
silent ``moe_runner_backend=flashinfer_mxfp4`` override) are carried into that run when no running-server
line separates them from it. Samples are kept at ``MAX_SAMPLES``, so memory stays bounded however large the
log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any, Protocol

from validator.facts import FP8_HEAD_LINE, DecodeSample, LogFacts
from validator.sources.log_grammar import (
    CHILD_FAILED,
    DECODE_RE,
    DSPARK_RUNNER_LINE,
    DSPARK_RUNNER_RE,
    ERROR_RE,
    EXCEPTION_LINE_RE,
    FAILURE_CAP,
    HOOKS_RE,
    LOAD_END_RE,
    OVERRIDE_LINE,
    READY_LINE,
    SCHEDULER_DIED,
    SERVER_ARGS,
    THROUGHPUT_RE,
    parsed_args,
)

MAX_SAMPLES = 1000


class Run:
    """Accumulates one start's facts; ``samples`` is a bounded deque until finished."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self.samples: deque[DecodeSample] = deque(maxlen=MAX_SAMPLES)
        self.dying = False  # the scheduler reported its exception: the traceback's lines follow

    def copy_prelude(self, path: str) -> Run:
        new = Run(path)
        new.facts.flashinfer_override = self.facts.flashinfer_override
        return new


class LogParser:
    """Line-at-a-time state of one log stream: the current start's facts, fed incrementally."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.run = Run(where)
        self.prelude = Run(where)  # resolution-time lines since the last running-server line
        self.starts = 0
        self.lines = 0
        self._raw_args: str | None = None
        self._parsed: dict[str, object] | None = None
        self._parsed_done = False  # whether _parsed holds this start's args (None: it has none)

    def feed(self, line: str, pos: int) -> None:
        self.lines += 1
        idx = line.find(SERVER_ARGS)
        if idx >= 0:
            self.starts += 1
            self.run = self.prelude.copy_prelude(self.where)
            self.run.facts.run_start_line = pos
            self.prelude = Run(self.where)
            self._raw_args = line[idx + len("server_args=") :]
            self._parsed, self._parsed_done = None, False
            return
        _feed(self.run, self.prelude, line, pos)

    def snapshot(self) -> LogFacts:
        """A copy of the current start's facts, secrets redacted (the parser keeps accumulating)."""
        run = self.run.facts
        facts = replace(run, loaded_models=list(run.loaded_models), decode_samples=list(self.run.samples))
        facts.runs = self.starts
        facts.lines_total = self.lines
        if not self._parsed_done:  # ~30 KB literal: parsed and redacted once per start, not per poll
            self._parsed, self._parsed_done = parsed_args(self._raw_args), True
        facts.server_args = dict(self._parsed) if self._parsed is not None else None
        return facts


class ServerId(Protocol):
    """The live layer's identity of the server that answered (``validator.live.ServerIdentity``)."""

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


def _feed(run: Run, prelude: Run, line: str, lineno: int) -> None:
    f = run.facts
    if OVERRIDE_LINE in line:
        f.flashinfer_override = True
        prelude.facts.flashinfer_override = True
        return
    if ERROR_RE.search(line) or CHILD_FAILED in line:  # read as nothing else; marks no running server
        if not f.ready:
            _note_failure(run, line)
        return
    runtime = True
    if FP8_HEAD_LINE in line:
        f.fp8_lm_head_lines += 1
    elif "for Humming backend" in line:
        f.humming_prepare_lines += 1
    elif "Using indexed gemm for humming moe" in line:
        f.humming_indexed_gemm_lines += 1
    elif "experts for FlashInfer" in line:
        f.flashinfer_expert_lines += 1
    elif "for TRT-LLM MxFP4 kernel" in line:
        f.trtllm_expert_lines += 1
    elif "experts for Marlin backend" in line:
        f.marlin_expert_lines += 1
    elif "Capture draft " in line and "CUDA graph begin" in line:
        f.draft_graph_begin += 1
    elif "Capture draft " in line and "CUDA graph end" in line:
        pass  # a running server's line (nothing else is read from it)
    elif READY_LINE in line:
        f.ready = True
    elif (m := LOAD_END_RE.search(line)) is not None:
        f.loaded_models.append(m.group(1))
    elif DSPARK_RUNNER_LINE in line and (m := DSPARK_RUNNER_RE.search(line)) is not None:
        f.dspark_gamma, f.dspark_verify_tokens = int(m.group(2)), int(m.group(3))
    elif (m := DECODE_RE.search(line)) is not None:
        t = THROUGHPUT_RE.search(line)
        try:
            sample = DecodeSample(
                float(m.group(1)), float(m.group(2)), float(t.group(1)) if t else None, lineno
            )
        except ValueError:  # "1.2.3" matches the character class but is no number
            return
        run.samples.append(sample)
        f.decode_sample_count += 1
    elif "Loaded plugin" in line or "Executed general plugin" in line or HOOKS_RE.search(line):
        pass  # the plugin's lines: a running server's (nothing else is read from them)
    else:
        runtime = False
    if runtime:  # a running server logged this: earlier resolution lines belong to this run, not the next
        prelude.facts.flashinfer_override = False


def _note_failure(run: Run, line: str) -> None:
    """A start's death before ready: the exception line that ends the scheduler's traceback (file and
    journal readers alike feed it as a line of its own) is the reason; the launcher's SIGQUIT line alone
    says a child failed. Error lines of a server that never reported a scheduler death are not one."""
    f = run.facts
    if SCHEDULER_DIED in line:
        run.dying = True
        f.start_failure = f.start_failure or SCHEDULER_DIED
    if run.dying:
        found = EXCEPTION_LINE_RE.search(line)
        if found:  # the last one wins: a chained traceback ends with the exception that escaped
            f.start_failure = found.group(1).strip()[:FAILURE_CAP]
    elif CHILD_FAILED in line and f.start_failure is None:
        f.start_failure = "a child process failed (Received sigquit from a child process)"
