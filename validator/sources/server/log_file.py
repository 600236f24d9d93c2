"""A server log file, followed by offset and inode, so a sidecar poll costs what is new.

A poll finds the last start by scanning backwards (``rfind``), parses forward from just before it, and reads
at most ``MAX_READ_BYTES``. Truncation (``copytruncate``) restarts at 0 keeping the current start; rotation
(new inode) drains the old file first. Regular files only, lines capped at ``MAX_LINE_BYTES``; reading
blocks, so the sidecar polls through ``asyncio.to_thread``.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import deque
from pathlib import Path

from validator.bounded_files import open_regular
from validator.errors import InputError, UnavailableError
from validator.facts import DecodeSample, LogFacts
from validator.procinfo import process_uid
from validator.sources.server.log_grammar import (
    DECODE_MARK,
    RAW,
    START_MARKER,
    Stream,
    count_samples,
    is_start_line,
    is_start_message,
    last_batch,
    routine,
    sample,
    stream_of,
)
from validator.sources.server.log_state import MAX_SAMPLES, BatchWatch, Claims, LogParser, ServerId
from validator.trusted_files import replaceable_by_others, stat_unplanted

MAX_LINE_BYTES = 1 << 20  # longer lines are truncated (a server_args line is ~30 KB)
MAX_READ_BYTES = 128 << 20  # per poll; a larger new region is read as its first and last halves
PRELUDE_BYTES = 64 << 10  # read this much before the last start: its resolution-time lines
_CHUNK = 1 << 20
_HEAD_MAX = 1024  # the longest prefix before a start's server_args= (Docker's wrapper, Ray, ranks, level)
_STREAM_HEAD = 1 << 20  # how far into the file its first SGLang line is looked for
_TAIL_CHECK = 64  # bytes before the offset re-read at each poll to notice copytruncate + new writes


class FileLogReader:
    """A log file followed by offset and inode (module docstring)."""

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
        self._claims = Claims()
        self._stats = LogFacts(path=self.where)
        self._batches = BatchWatch()
        self._read_mtime: float | None = None
        # why users other than root, this one and the server's could have written the file's lines (the
        # file or a directory on its way): then none of them is evidence, whatever fact it would set
        self._open_to_others: str | None = None

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self, server: ServerId | None = None) -> LogFacts:
        with self._lock:
            note = self._poll_locked(server)
            if self._open_to_others is not None:  # a forged FP8-head line would turn a FAIL into a PASS
                raise UnavailableError(
                    f"{self.where}: not read as evidence: {self._open_to_others}, so anyone could have "
                    "written its lines"
                )
            facts = self._parser.snapshot()
            st = self._stats
            facts.generation = self._parser.starts
            facts.bytes_read, facts.bytes_skipped = st.bytes_read, st.bytes_skipped
            facts.truncations, facts.rotations = st.truncations, st.rotations
            facts.note = note
            batch = self._batches.observe(self._parser, self._last_line_age())
            facts.last_batch = batch
            if self._claims.stale(facts.generation, server):
                facts.stale = (
                    "the server restarted and the log holds no start of the new process yet "
                    "(the last start in it is the previous server's)"
                )
            return facts

    def _poll_locked(self, server: ServerId | None = None) -> str | None:
        try:  # walked as the open is: no stat through a link another user planted (it would tell them
            # whether what it points at exists)
            st = stat_unplanted(str(self.path))
        except OSError as exc:
            if self._parser.starts > 0:  # rotated away between two polls: the start read earlier stands
                return f"cannot read the file now ({exc.strerror}); facts are from the start read earlier"
            raise UnavailableError(f"{self.where}: cannot read server log: {exc.strerror or exc}") from None
        ident = (st.st_dev, st.st_ino)
        if self._fd is not None and ident != self._ident:
            if self._open_to_others is None:  # the rotated file's last lines are this start's, when it was
                self._read_new(os.fstat(self._fd).st_size)  # judged trusted (another's is never read)
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
        st_now = os.fstat(self._fd)
        size = st_now.st_size
        self._read_mtime = st_now.st_mtime  # the time of the last write within what this poll reads
        self._open_to_others = _open_to_others(st_now, self.path, _server_uid(server))
        if self._open_to_others is not None:
            return None  # not a line of it is read (poll refuses the log): its lines would stay in the facts
        if size < self._offset or not self._tail_intact():
            self._stats.truncations += 1  # copytruncate: same server, its log starts over
            self._reset_position()
        self._read_new(size)
        return None

    def _last_line_age(self) -> float | None:
        """How long ago the last batch line was written, when it was the file's last line at this poll's
        read (nothing written after it, so the file's mtime then was its time); None otherwise."""
        batch = self._parser.run.batch
        if batch is None or self._fd is None or self._read_mtime is None:
            return None
        text, pos, _at = batch
        end = self._offset  # what this poll read up to, under the mtime taken with it
        if not 0 <= end - pos <= MAX_LINE_BYTES + 2:
            return None
        try:
            raw = os.pread(self._fd, end - pos, pos)
        except OSError:
            return None
        if not raw.endswith(b"\n") or raw.count(b"\n") != 1 or _decode(raw[:-1]) != text:
            return None
        return max(0.0, time.time() - self._read_mtime)

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
        if self._parser.stream is None:  # the log's wrapper (Docker's, or none): its first SGLang line's
            self._parser.stream = _first_line_stream(fd, size)
        marker = _last_marker(fd, begin, size, self._parser.stream)
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
            stream = self._parser.stream  # known once the log's first line is: until then, line by line
            fast = lines and not self._parser.in_death_record and stream is not None
            n = count_samples(region, stream) if fast and stream is not None else -1
            if n == len(lines) or (n >= 0 and routine(region)):  # decode lines only, or routine traffic
                self._bulk(lines, n, base + len(region) + 1)
                found = last_batch(region, stream) if stream is not None else None
                if found is not None:  # a running server's line: resolution lines before it were this start's
                    self._parser.run.batch = (found[1], base + found[0], None)
                    self._parser.pending_override = False
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

    def _bulk(self, lines: list[bytes], n: int, end: int) -> None:
        """Lines of routine traffic only (``routine``). Of their decode lines only the last
        ``MAX_SAMPLES`` of the whole read can survive in the samples, so the regions are only counted
        here and kept (as few as can hold those samples); ``_flush`` parses the survivors. This is what
        makes following a busy log cost C-speed scans per MB instead of a Python loop per line."""
        parser = self._parser
        parser.lines += len(lines)
        if n == 0:
            return
        parser.run.facts.decode_sample_count += n
        self._pending.append((lines, end, n))
        self._pending_n += n
        while len(self._pending) > 1 and self._pending_n - self._pending[0][2] >= 2 * MAX_SAMPLES:
            self._pending_n -= self._pending.popleft()[2]  # later regions hold enough samples

    def _flush(self) -> None:
        """Parse the decode lines ``_bulk`` deferred, newest first up to ``MAX_SAMPLES``, then feed them in
        order, before anything that follows them in the log."""
        if not self._pending:
            return
        parser = self._parser
        stream = parser.stream or RAW  # set before any region is bulk-read
        kept: list[DecodeSample] = []
        for lines, end, _n in reversed(self._pending):
            for piece in reversed(lines):
                end -= len(piece) + 1
                if DECODE_MARK not in piece:
                    continue
                found = sample(piece, end, stream)
                if found is None:  # "accept len: 1.2.3" is no sample, as the parser decides
                    parser.run.facts.decode_sample_count -= count_samples(piece, stream)
                    continue
                kept.append(found)
                if len(kept) >= MAX_SAMPLES:
                    break
            if len(kept) >= MAX_SAMPLES:
                break
        self._pending.clear()
        self._pending_n = 0
        parser.run.samples.extend(reversed(kept))


def _server_uid(server: ServerId | None) -> int | None:
    """The UID of the process holding the server's port on this host, when it is visible."""
    pid = server.listener_pid if server is not None else None
    return process_uid(pid) if pid is not None else None


def _open_to_others(st: os.stat_result, path: Path, server_uid: int | None) -> str | None:
    """Why someone other than root, this process's user and the server's (``server_uid``, when known) could
    have written the lines of the opened log: the file's mode or owner, or a directory on its way owned
    by another user or writable by others (unless sticky and the log is a trusted user's: sticky ``/tmp``
    keeps it in place). None when only they could."""
    trusted = {os.geteuid(), *(() if server_uid is None else (server_uid,))}
    if st.st_mode & 0o022:
        return f"its group or others can write it (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_uid not in {0, *trusted}:
        return f"it is owned by UID {st.st_uid}"
    return replaceable_by_others(path, st.st_uid, trusted)


def _decode(raw: bytes) -> str:
    return raw[:MAX_LINE_BYTES].decode("utf-8", errors="replace").rstrip("\r")


def _first_line_stream(fd: int, size: int) -> Stream | None:
    """The stream the file's first SGLang logger line sets, searched in its first ``_STREAM_HEAD`` bytes
    (None: none there yet; the parser then takes it from the first such line it is fed)."""
    head = os.pread(fd, min(size, _STREAM_HEAD), 0)
    for line in head.split(b"\n")[:-1]:
        found = stream_of(line[:_HEAD_MAX].decode("utf-8", errors="replace"))
        if found is not None:
            return found
    return None


def _last_marker(fd: int, start: int, end: int, stream: Stream | None = None) -> int | None:
    """Offset of the last server start (``server_args=`` beginning one of SGLang's logger messages) in
    [start, end), scanning backwards in chunks. A marker elsewhere (a request's text in an access line) is
    passed over, so no client can make the reader skip the real start."""
    overlap = len(START_MARKER) - 1
    hi = end
    while hi > start:
        lo = max(start, hi - _CHUNK)
        data = os.pread(fd, min(hi + overlap, end) - lo, lo)
        idx = data.rfind(START_MARKER)
        while idx >= 0:
            if _starts_a_server(fd, lo + idx, stream):
                return lo + idx
            idx = data.rfind(START_MARKER, 0, idx)
        hi = lo
    return None


def _starts_a_server(fd: int, at: int, stream: Stream | None = None) -> bool:
    """Whether the ``server_args=`` at ``at`` begins a logger line's message with a start's value."""
    n = min(_HEAD_MAX, at)
    head = os.pread(fd, n, at - n)
    nl = head.rfind(b"\n")
    if nl < 0 and at - n > 0:
        return False  # more than _HEAD_MAX bytes of the line before it: no logger prefix is that long
    after = os.pread(fd, 16, at + len(START_MARKER))
    return is_start_line(head[nl + 1 :], stream) and is_start_message(after)


def _line_start_after(fd: int, at: int, limit: int) -> int:
    """The offset just after the first newline at or after ``at`` (before ``limit``): a line boundary."""
    data = os.pread(fd, limit - at, at)
    nl = data.find(b"\n")
    return at + nl + 1 if nl >= 0 else limit
