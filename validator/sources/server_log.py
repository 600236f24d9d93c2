"""Facts from an SGLang server log: a file, or the systemd journal (``--log journal:UNIT``).

The log is the only outside evidence for some things (the ``Online FP8 quantization enabled for
lm_head.`` line, which MoE kernels were prepared, draft CUDA-graph capture, the ``accept len`` of real
traffic), and the resolved ``server_args={...}`` line repeats what ``/server_info`` says, so checks can
catch disagreement.

A log often holds several server starts; only the last one describes the running server. A start is
marked by the launcher's ``server_args=`` line; the few resolution-time lines logged just before it (the
silent ``moe_runner_backend=flashinfer_mxfp4`` override) are carried into that run when no running-server
line separates them from it. A log that holds no start at all (empty, truncated by logrotate's
``copytruncate``, rotated away) says nothing about the running server: ``LogFacts.unusable()`` says so,
and the live layer turns it into a ``server.log`` error instead of letting checks read a missing FP8 line
as a BF16 head.

Cost is bounded and proportional to what is new, because the sidecar reads the log on every re-check:

- ``FileLogReader`` keeps its descriptor, offset and inode between polls. A poll finds the last start in
  the new bytes by scanning backwards (C-speed ``rfind``, no parsing), parses forward only from just
  before it, and reads at most ``MAX_READ_BYTES`` (the first and last halves of a larger region; the
  bytes skipped are counted). Truncation (size below the offset, or the bytes before the offset changed:
  ``copytruncate`` followed by new writes) restarts at offset 0 and keeps the current start's facts (the
  server did not restart); rotation (a new inode at the path) drains the old file, then follows the new
  one. Only regular files are opened (``sources.files.open_regular``: a FIFO or device is refused).
- ``JournalLogReader`` reads the unit's current invocation (``systemctl show -p InvocationID``, then
  ``journalctl -o json _SYSTEMD_INVOCATION_ID=...``), continuing from the last entry's cursor; a new
  invocation is a new start. ``journalctl`` rather than the ``systemd`` Python bindings: it is present
  wherever journald is, needs no compiled dependency, and as a subprocess it can be killed at a deadline
  and capped in bytes (a journal read inside the process cannot be interrupted).

Lines are capped at ``MAX_LINE_BYTES`` and the samples kept at ``MAX_SAMPLES``, so memory stays bounded
however large the log. Reading blocks: the sidecar calls ``poll`` through ``asyncio.to_thread``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from validator.errors import InputError, UnavailableError, UsageError
from validator.facts import FP8_HEAD_LINE
from validator.redact import redact

MAX_LINE_BYTES = 1 << 20  # longer lines are truncated (a server_args line is ~30 KB)
MAX_SAMPLES = 1000
MAX_READ_BYTES = 128 << 20  # per poll; a larger new region is read as its first and last halves
PRELUDE_BYTES = 64 << 10  # read this much before the last start: its resolution-time lines
JOURNAL_TIMEOUT_S = 30.0  # per journalctl call; the rest is read by the next poll
SYSTEMCTL_TIMEOUT_S = 10.0
_CHUNK = 1 << 20
_TAIL_CHECK = 64  # bytes before the offset re-read at each poll to notice copytruncate + new writes

READY_LINE = "The server is fired up and ready to roll!"
OVERRIDE_LINE = "moe_runner_backend=flashinfer_mxfp4"
JOURNAL_PREFIX = "journal:"

_SERVER_ARGS = "server_args={"
_MARKER = _SERVER_ARGS.encode()
_DECODE_RE = re.compile(r"accept len: ([0-9.]+), accept rate: ([0-9.]+)")
_THROUGHPUT_RE = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
_LOAD_END_RE = re.compile(r"Load weight end\..*?type=([A-Za-z_][\w.]*)")
DSPARK_RUNNER_LINE = "Initialized DSpark draft runner."
_DSPARK_RUNNER_RE = re.compile(r"model=([A-Za-z_][\w.]*), gamma=(\d{1,4}), verify_num_draft_tokens=(\d{1,4})")
_ERROR_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): |\bScheduler hit an exception\b|\bTraceback \(most")
# A start that dies before it is ready: the scheduler's ``Scheduler hit an exception: <traceback>``
# (srt/managers/scheduler.py), then the launcher's SIGQUIT handler (srt/entrypoints/engine.py).
SCHEDULER_DIED = "Scheduler hit an exception"
CHILD_FAILED = "Received sigquit from a child process"
_EXCEPTION_LINE_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception): .*)")
FAILURE_CAP = 300  # characters of the exception quoted
_HOOKS_RE = re.compile(r"Applied \d+ hook")
_SIMPLE_PAIR_RE = re.compile(
    r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
    r"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None)(?=[,}])"
)
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]{1,255}$")


@dataclass
class DecodeSample:
    """One ``Decode batch ... accept len: X, accept rate: Y ... gen throughput (token/s): Z`` line."""

    accept_len: float
    accept_rate: float
    gen_throughput: float | None
    line: int  # where it was read: the byte offset in a file, the entry number in the journal


@dataclass
class LogFacts:
    path: str  # the file, or "journal:UNIT"
    runs: int = 0  # server starts (``server_args=`` lines) read; a reader skips starts before the last
    run_start_line: int | None = None  # where the current start's ``server_args=`` was read; None: none
    lines_total: int = 0  # lines read
    server_args: dict[str, object] | None = None  # the last start's resolved args (Python literals), redacted
    fp8_lm_head_lines: int = 0
    humming_prepare_lines: int = 0
    humming_indexed_gemm_lines: int = 0
    flashinfer_expert_lines: int = 0
    trtllm_expert_lines: int = 0
    marlin_expert_lines: int = 0
    flashinfer_override: bool = False
    loaded_models: list[str] = field(default_factory=list)  # ``Load weight end ... type=`` in order
    draft_graph_begin: int = 0
    # DSpark's worker at start (dspark_worker_v2.py l.279-292): "Initialized DSpark draft runner. ...,
    # model=<class>, gamma=G, verify_num_draft_tokens=N, ..."
    dspark_gamma: int | None = None
    dspark_verify_tokens: int | None = None
    decode_samples: list[DecodeSample] = field(default_factory=list)  # the last MAX_SAMPLES
    decode_sample_count: int = 0
    ready: bool = False
    # why this start died before it was ready, as the log says: the exception the scheduler's traceback
    # ended with (or SGLang's "a child failed" line); None while it is starting, and once it is ready
    start_failure: str | None = None
    # how it was read (evidence for server.log)
    generation: int = 0  # starts seen by this reader since it opened; a new start increments it
    bytes_read: int = 0
    bytes_skipped: int = 0  # not parsed: before the last start, or the middle of an oversized region
    truncations: int = 0  # the file shrank under the reader (logrotate copytruncate)
    rotations: int = 0  # a new file appeared at the path (logrotate create)
    note: str | None = None  # a condition of the source now (file gone after rotation, ...)
    stale: str | None = None  # why the current start is not the running server's (a restart seen)

    @property
    def mean_accept_len(self) -> float | None:
        s = self.decode_samples
        return sum(x.accept_len for x in s) / len(s) if s else None

    def unusable(self) -> str | None:
        """Why these facts are no evidence about the running server, or None when they are."""
        if self.stale:
            return f"{self.path}: {self.stale}"
        if self.run_start_line is None and self.path.startswith(JOURNAL_PREFIX):
            return (
                f"{self.path}: the unit's current invocation has logged no server start (no server_args= "
                f"line in {self.lines_total} lines): it is no evidence about the running server"
            )
        if self.run_start_line is None:
            what = (
                "is empty"
                if self.bytes_read == 0 and self.lines_total == 0
                else f"holds no server start (no server_args= line in {self.lines_total} lines read)"
            )
            return (
                f"{self.path}: {what}: the log was truncated, rotated or is not this server's, so it is "
                "no evidence about the running server"
            )
        return None


class _Run:
    """Accumulates one start's facts; ``samples`` is a bounded deque until finished."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self.samples: deque[DecodeSample] = deque(maxlen=MAX_SAMPLES)
        self.dying = False  # the scheduler reported its exception: the traceback's lines follow

    def copy_prelude(self, path: str) -> _Run:
        new = _Run(path)
        new.facts.flashinfer_override = self.facts.flashinfer_override
        return new


class LogParser:
    """Line-at-a-time state of one log stream: the current start's facts, fed incrementally."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.run = _Run(where)
        self.prelude = _Run(where)  # resolution-time lines since the last running-server line
        self.starts = 0
        self.lines = 0
        self._raw_args: str | None = None
        self._parsed: dict[str, object] | None = None
        self._parsed_done = False  # whether _parsed holds this start's args (None: it has none)

    def feed(self, line: str, pos: int) -> None:
        self.lines += 1
        idx = line.find(_SERVER_ARGS)
        if idx >= 0:
            self.starts += 1
            self.run = self.prelude.copy_prelude(self.where)
            self.run.facts.run_start_line = pos
            self.prelude = _Run(self.where)
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
            self._parsed, self._parsed_done = _parsed_args(self._raw_args), True
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


class _Claims:
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


def parse_log_spec(value: str | Path) -> str | Path:
    """``--log`` as given: ``journal:UNIT`` (validated unit name) or a file path."""
    text = str(value)
    if not text.startswith(JOURNAL_PREFIX):
        return Path(value)
    unit = text[len(JOURNAL_PREFIX) :]
    if not _UNIT_RE.match(unit) or unit.startswith("-"):
        raise UsageError(f"--log {text!r}: expected journal:UNIT with a systemd unit name (sglang.service)")
    return text


def open_log_reader(spec: str | Path) -> LogReader:
    """The reader for a ``--log`` value (``parse_log_spec``'s result)."""
    if isinstance(spec, str) and spec.startswith(JOURNAL_PREFIX):
        return JournalLogReader(spec[len(JOURNAL_PREFIX) :])
    return FileLogReader(Path(spec))


def read_server_log(path: str | Path) -> LogFacts:
    """The last server start in ``path``, read once (bounded). Raises UnavailableError when the file
    cannot be read; a log without a start is returned with ``unusable()`` saying so."""
    reader = FileLogReader(Path(path))
    try:
        return reader.poll()
    finally:
        reader.close()


class FileLogReader:
    """A log file followed by offset and inode (see the module docstring)."""

    def __init__(self, path: Path, *, max_read: int = MAX_READ_BYTES) -> None:
        self.path = path
        self.where = str(path)
        self.max_read = max_read
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._tail = b""  # the bytes just before the offset
        self._partial = b""  # an unfinished last line, kept for the next poll
        self._overlong = False  # the partial line passed MAX_LINE_BYTES: the rest of it is dropped
        self._line_start = 0  # where the line being accumulated began
        self._pending: deque[tuple[list[bytes], int, int]] = deque()  # see _bulk
        self._pending_n = 0
        self._parser = LogParser(self.where)
        self._claims = _Claims()
        self._stats = LogFacts(path=self.where)

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self, server: ServerId | None = None) -> LogFacts:
        with self._lock:
            note = self._poll_locked()
            facts = self._parser.snapshot()
            st = self._stats
            facts.generation = self._parser.starts
            facts.bytes_read, facts.bytes_skipped = st.bytes_read, st.bytes_skipped
            facts.truncations, facts.rotations = st.truncations, st.rotations
            facts.note = note
            if self._claims.stale(facts.generation, server):
                facts.stale = (
                    "the server restarted and the log holds no start of the new process yet "
                    "(the last start in it is the previous server's)"
                )
            return facts

    def _poll_locked(self) -> str | None:
        from validator.sources.files import open_regular

        try:
            st = os.stat(self.path)
        except OSError as exc:
            if self._parser.starts > 0:  # rotated away between two polls: the start read earlier stands
                return f"cannot read the file now ({exc.strerror}); facts are from the start read earlier"
            raise UnavailableError(f"{self.where}: cannot read server log: {exc.strerror or exc}") from None
        ident = (st.st_dev, st.st_ino)
        if self._fd is not None and ident != self._ident:
            self._read_new(os.fstat(self._fd).st_size)  # the rotated file's last lines are this start's
            self._close_fd()
            self._stats.rotations += 1
            self._reset_position()
        if self._fd is None:
            try:
                self._fd = open_regular(self.path, "server log")
            except InputError as exc:
                if self._parser.starts > 0:
                    return f"{exc.reason}; facts are from the start read earlier"
                raise UnavailableError(str(exc)) from None
            st2 = os.fstat(self._fd)
            self._ident = (st2.st_dev, st2.st_ino)
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size < self._offset or not self._tail_intact():
            self._stats.truncations += 1  # copytruncate: same server, its log starts over
            self._reset_position()
        self._read_new(size)
        return None

    def _reset_position(self) -> None:
        self._offset, self._tail, self._partial, self._overlong = 0, b"", b"", False

    def _tail_intact(self) -> bool:
        if not self._tail or self._fd is None:
            return True
        try:
            return os.pread(self._fd, len(self._tail), self._offset - len(self._tail)) == self._tail
        except OSError:
            return False

    def _read_new(self, size: int) -> None:
        """Parse [offset, size): from just before the last start in it, at most ``max_read`` bytes."""
        fd = self._fd
        if fd is None or size <= self._offset:
            return
        begin = self._offset
        marker = _last_marker(fd, begin, size)
        if marker is not None and marker - PRELUDE_BYTES > begin:
            at = _line_start_after(fd, marker - PRELUDE_BYTES, marker)
            self._gap(begin, at)
            begin = at
        if size - begin > self.max_read:
            half = self.max_read // 2
            self._parse_range(fd, begin, begin + half)
            tail_from = _line_start_after(fd, size - half, size)
            self._gap(begin + half, tail_from)
            begin = tail_from
        self._parse_range(fd, begin, size)
        self._flush()
        self._offset = size
        n = min(_TAIL_CHECK, size)
        self._tail = os.pread(fd, n, size - n)

    def _gap(self, start: int, end: int) -> None:
        """Bytes not parsed; ``end`` is a line boundary, so the unfinished line before it is dropped."""
        self._stats.bytes_skipped += max(0, end - start)
        self._partial, self._overlong, self._line_start = b"", False, end

    def _parse_range(self, fd: int, start: int, end: int) -> None:
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            self._stats.bytes_read += len(chunk)
            self._feed_bytes(chunk, pos)
            pos += len(chunk)

    def _feed_bytes(self, chunk: bytes, pos: int) -> None:
        if not self._partial and not self._overlong:
            self._line_start = pos
        parts = chunk.split(b"\n")
        if len(parts) > 1:
            done = len(chunk) - len(parts[-1]) - 1  # the complete lines end here
            if self._overlong:  # the first piece ends a line already fed at its cap
                self._overlong = False
                lines, region, base = parts[1:-1], chunk[len(parts[0]) + 1 : done], pos + len(parts[0]) + 1
            else:
                lines = [self._partial + parts[0], *parts[1:-1]]
                region, base = self._partial + chunk[:done], self._line_start
            self._partial = b""
            if lines and _routine(region):
                self._bulk(lines, region, base)
            else:
                for piece in lines:
                    self._feed_line(piece, base)
                    base += len(piece) + 1
            self._line_start = pos + done + 1
        if self._overlong:
            return
        self._partial += parts[-1][: MAX_LINE_BYTES - len(self._partial)]
        if len(self._partial) >= MAX_LINE_BYTES:  # feed what the cap keeps; drop the rest of the line
            self._feed_line(self._partial, self._line_start)
            self._partial, self._overlong = b"", True

    def _feed_line(self, raw: bytes, pos: int) -> None:
        self._flush()
        self._parser.feed(_decode(raw), pos)

    def _bulk(self, lines: list[bytes], region: bytes, base: int) -> None:
        """Lines of routine traffic only (``_routine``). Of their decode lines only the last
        ``MAX_SAMPLES`` of the whole read can survive in the samples, so the regions are only counted
        here and kept (as few as can hold those samples); ``_flush`` parses the survivors. This is what
        makes following a busy log cost C-speed scans per MB instead of a Python loop per line."""
        parser = self._parser
        n = region.count(_DECODE_MARK)
        parser.lines += len(lines)
        if n == 0:
            return
        parser.run.facts.decode_sample_count += n
        self._pending.append((lines, base + len(region) + 1, n))
        self._pending_n += n
        while len(self._pending) > 1 and self._pending_n - self._pending[0][2] >= 2 * MAX_SAMPLES:
            self._pending_n -= self._pending.popleft()[2]  # later regions hold enough samples

    def _flush(self) -> None:
        """Parse the decode lines ``_bulk`` deferred, newest first up to ``MAX_SAMPLES``, then feed them in
        order, before anything that follows them in the log."""
        if not self._pending:
            return
        parser = self._parser
        kept: list[DecodeSample] = []
        for lines, end, _n in reversed(self._pending):
            for piece in reversed(lines):
                end -= len(piece) + 1
                if _DECODE_MARK not in piece:
                    continue
                sample = _sample(piece, end)
                if sample is None:  # "accept len: 1.2.3" is no sample, as _feed decides
                    parser.run.facts.decode_sample_count -= 1
                    continue
                kept.append(sample)
                if len(kept) >= MAX_SAMPLES:
                    break
            if len(kept) >= MAX_SAMPLES:
                break
        self._pending.clear()
        self._pending_n = 0
        if kept:  # decode lines are a running server's: earlier resolution lines were this start's
            parser.prelude.facts.flashinfer_override = False
            parser.run.samples.extend(reversed(kept))


# Everything ``_feed`` reacts to except decode lines: a region holding none of these is routine traffic.
_NOTABLE = tuple(
    m.encode()
    for m in (
        _SERVER_ARGS, OVERRIDE_LINE, "Error: ", "Exception: ", SCHEDULER_DIED, CHILD_FAILED,
        "Traceback (most", FP8_HEAD_LINE, "for Humming backend", "Using indexed gemm for humming moe",
        "experts for FlashInfer", "for TRT-LLM MxFP4 kernel", "experts for Marlin backend",
        "Capture draft ", READY_LINE, "Load weight end.", "Loaded plugin", "Executed general plugin",
        DSPARK_RUNNER_LINE,
        "Applied ",
    )
)  # fmt: skip
_DECODE_MARK = b"accept len: "


_SAMPLE_RE_B = re.compile(
    rb"accept len: ([0-9.]+), accept rate: ([0-9.]+)(?:.*?gen throughput \(token/s\): ([0-9.]+))?"
)


def _routine(region: bytes) -> bool:
    if region.count(b"\n") + 1 == region.count(_DECODE_MARK):  # decode lines only: two C-speed counts
        return True
    return not any(m in region for m in _NOTABLE)


def _sample(line: bytes, pos: int) -> DecodeSample | None:
    """A routine decode line as ``_feed`` would record it, in one regex search."""
    m = _SAMPLE_RE_B.search(line)
    if m is None:
        return None
    try:
        tput = float(m.group(3)) if m.group(3) is not None else None
        return DecodeSample(float(m.group(1)), float(m.group(2)), tput, pos)
    except ValueError:
        return None


def _decode(raw: bytes) -> str:
    return raw[:MAX_LINE_BYTES].decode("utf-8", errors="replace").rstrip("\r")


def _last_marker(fd: int, start: int, end: int) -> int | None:
    """Offset of the last ``server_args={`` in [start, end), scanning backwards in chunks."""
    overlap = len(_MARKER) - 1
    hi = end
    while hi > start:
        lo = max(start, hi - _CHUNK)
        data = os.pread(fd, min(hi + overlap, end) - lo, lo)
        idx = data.rfind(_MARKER)
        if idx >= 0:
            return lo + idx
        hi = lo
    return None


def _line_start_after(fd: int, at: int, limit: int) -> int:
    """The offset just after the first newline at or after ``at`` (before ``limit``): a line boundary."""
    data = os.pread(fd, limit - at, at)
    nl = data.find(b"\n")
    return at + nl + 1 if nl >= 0 else limit


class JournalLogReader:
    """The unit's current invocation in the systemd journal, followed by cursor (module docstring)."""

    def __init__(
        self, unit: str, *, max_read: int = MAX_READ_BYTES, timeout_s: float = JOURNAL_TIMEOUT_S
    ) -> None:
        self.unit = unit
        self.where = f"{JOURNAL_PREFIX}{unit}"
        self.max_read = max_read
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._invocation: str | None = None
        self._cursor: str | None = None
        self._parser = LogParser(self.where)
        self._generation = 0
        self._entries = 0
        self._stats = LogFacts(path=self.where)
        self._claims = _Claims()

    def poll(self, server: ServerId | None = None) -> LogFacts:
        with self._lock:
            invocation = self._current_invocation()
            if invocation != self._invocation:
                if self._invocation is not None:
                    self._generation += 1  # a new invocation is a new server process
                self._invocation, self._cursor = invocation, None
                self._parser = LogParser(self.where)
                self._stats = LogFacts(path=self.where)
                self._entries = 0
            self._read_entries(invocation)
            facts = self._parser.snapshot()
            st = self._stats
            facts.generation = self._generation + self._parser.starts
            facts.bytes_read = st.bytes_read
            if facts.run_start_line is not None and self._claims.stale(facts.generation, server):
                facts.stale = "the server restarted and the journal holds no start of the new process yet"
            return facts

    def _current_invocation(self) -> str:
        out = _run_bounded(
            ["systemctl", "show", "-p", "InvocationID", "--value", "--", self.unit],
            self.where,
            cap=4096,
            timeout_s=SYSTEMCTL_TIMEOUT_S,
        )
        invocation = out.decode("ascii", errors="replace").strip()
        if not re.fullmatch(r"[0-9a-f]{32}", invocation):
            raise UnavailableError(
                f"{self.where}: the unit has no current invocation (not started, or not a unit here)"
            )
        return invocation

    def _read_entries(self, invocation: str) -> None:
        cmd = ["journalctl", "-o", "json", "--all", "--no-pager", "--output-fields=MESSAGE"]
        if self._cursor is not None:
            cmd.append(f"--after-cursor={self._cursor}")
        cmd.append(f"_SYSTEMD_INVOCATION_ID={invocation}")
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise UnavailableError(f"{self.where}: cannot run journalctl: {exc.strerror or exc}") from None
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + self.timeout_s
        timer = threading.Timer(self.timeout_s, proc.kill)
        timer.start()
        read = 0
        stopped = False
        try:
            for raw in iter(lambda: proc.stdout.readline(MAX_LINE_BYTES + 1), b""):  # type: ignore[union-attr]
                read += len(raw)
                if not raw.endswith(b"\n"):
                    if len(raw) > MAX_LINE_BYTES:  # one entry over the cap: skip it
                        while (rest := proc.stdout.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                            read += len(rest)
                        continue
                    break  # killed mid-entry
                self._feed_entry(raw)
                if read >= self.max_read or time.monotonic() >= deadline:
                    stopped = True
                    break
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            err = proc.stderr.read(4096)
            proc.stderr.close()
            rc = proc.wait()
        self._stats.bytes_read += read
        if rc > 0 and not stopped:
            first = err.decode("utf-8", errors="replace").strip().splitlines()
            why = first[0][:200] if first else f"exit status {rc}"
            raise UnavailableError(f"{self.where}: journalctl failed: {why}")

    def _feed_entry(self, raw: bytes) -> None:
        try:
            entry = json.loads(raw)
        except ValueError:
            return
        if not isinstance(entry, dict):
            return
        cursor = entry.get("__CURSOR")
        if isinstance(cursor, str):
            self._cursor = cursor
        msg = entry.get("MESSAGE")
        if isinstance(msg, list):  # journald's form for a message that is not valid UTF-8
            msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        if not isinstance(msg, str):
            return
        self._entries += 1
        for line in msg[:MAX_LINE_BYTES].splitlines() or [""]:
            self._parser.feed(line, self._entries)


def _run_bounded(cmd: list[str], where: str, *, cap: int, timeout_s: float) -> bytes:
    try:
        res = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise UnavailableError(
            f"{where}: {cmd[0]} not found: the journal can only be read on a systemd host"
        ) from None
    except subprocess.TimeoutExpired:
        raise UnavailableError(f"{where}: {cmd[0]} did not answer within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise UnavailableError(f"{where}: cannot run {cmd[0]}: {exc.strerror or exc}") from None
    if res.returncode != 0:
        first = res.stderr.decode("utf-8", errors="replace").strip().splitlines()
        why = first[0][:200] if first else f"exit status {res.returncode}"
        raise UnavailableError(f"{where}: {cmd[0]} failed: {why}")
    return res.stdout[:cap]


def _feed(run: _Run, prelude: _Run, line: str, lineno: int) -> None:
    f = run.facts
    if OVERRIDE_LINE in line:
        f.flashinfer_override = True
        prelude.facts.flashinfer_override = True
        return
    if _ERROR_RE.search(line) or CHILD_FAILED in line:  # read as nothing else; marks no running server
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
    elif (m := _LOAD_END_RE.search(line)) is not None:
        f.loaded_models.append(m.group(1))
    elif DSPARK_RUNNER_LINE in line and (m := _DSPARK_RUNNER_RE.search(line)) is not None:
        f.dspark_gamma, f.dspark_verify_tokens = int(m.group(2)), int(m.group(3))
    elif (m := _DECODE_RE.search(line)) is not None:
        t = _THROUGHPUT_RE.search(line)
        try:
            sample = DecodeSample(
                float(m.group(1)), float(m.group(2)), float(t.group(1)) if t else None, lineno
            )
        except ValueError:  # "1.2.3" matches the character class but is no number
            return
        run.samples.append(sample)
        f.decode_sample_count += 1
    elif "Loaded plugin" in line or "Executed general plugin" in line or _HOOKS_RE.search(line):
        pass  # the plugin's lines: a running server's (nothing else is read from them)
    else:
        runtime = False
    if runtime:  # a running server logged this: earlier resolution lines belong to this run, not the next
        prelude.facts.flashinfer_override = False


def _note_failure(run: _Run, line: str) -> None:
    """A start's death before ready: the exception line that ends the scheduler's traceback (file and
    journal readers alike feed it as a line of its own) is the reason; the launcher's SIGQUIT line alone
    says a child failed. Error lines of a server that never reported a scheduler death are not one."""
    f = run.facts
    if SCHEDULER_DIED in line:
        run.dying = True
        f.start_failure = f.start_failure or SCHEDULER_DIED
    if run.dying:
        found = _EXCEPTION_LINE_RE.search(line)
        if found:  # the last one wins: a chained traceback ends with the exception that escaped
            f.start_failure = found.group(1).strip()[:FAILURE_CAP]
    elif CHILD_FAILED in line and f.start_failure is None:
        f.start_failure = "a child process failed (Received sigquit from a child process)"


def _parsed_args(raw: str | None) -> dict[str, object] | None:
    """The start's resolved args, redacted (None: no ``server_args=`` line, or one that does not parse)."""
    args = _parse_server_args(raw) if raw is not None else None
    return redact(args) if args is not None else None


def _parse_server_args(text: str) -> dict[str, object] | None:
    """The dict repr as Python literals; when it holds non-literals (an object repr), fall back to the
    top-level ``'key': scalar`` pairs."""
    text = text.strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        value = None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    pairs: dict[str, object] = {}
    for m in _SIMPLE_PAIR_RE.finditer(text):
        try:
            pairs.setdefault(m.group(1), ast.literal_eval(m.group(2)))
        except (ValueError, SyntaxError):
            continue
    return pairs or None
