"""A server log in the systemd journal (``--log journal:UNIT``): the unit's current invocation.

``JournalLogReader`` reads it with ``systemctl show -p InvocationID``, then ``journalctl -o json
_SYSTEMD_INVOCATION_ID=...``, continuing from the last entry's cursor; a new invocation is a new start.
``journalctl`` rather than the ``systemd`` Python bindings: it is present wherever journald is, needs no
compiled dependency, and as a subprocess it can be killed at a deadline and capped in bytes (a journal read
inside the process cannot be interrupted). Reading blocks: the sidecar calls ``poll`` off its event loop.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

from validator.errors import UnavailableError
from validator.facts import JOURNAL_PREFIX, LogFacts
from validator.sources.server.log_file import MAX_LINE_BYTES, MAX_READ_BYTES
from validator.sources.server.log_state import BatchWatch, Claims, LogParser, ServerId

JOURNAL_TIMEOUT_S = 30.0  # per journalctl call; the rest is read by the next poll
SYSTEMCTL_TIMEOUT_S = 10.0


class JournalLogReader:
    """The unit's current invocation in the systemd journal, followed by cursor (module docstring)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.where = f"{JOURNAL_PREFIX}{unit}"
        self._lock = threading.Lock()
        self._invocation: str | None = None
        self._cursor: str | None = None
        self._parser = LogParser(self.where)
        self._generation = 0
        self._entries = 0
        self._bytes_read = 0
        self._claims = Claims()
        self._batches = BatchWatch()

    def poll(self, server: ServerId | None = None) -> LogFacts:
        with self._lock:
            invocation = self._current_invocation()
            if invocation != self._invocation:
                if self._invocation is not None:
                    self._generation += 1  # a new invocation is a new server process
                self._invocation, self._cursor = invocation, None
                self._parser = LogParser(self.where)
                self._bytes_read = self._entries = 0
            self._read_entries(invocation)
            facts = self._parser.snapshot()
            facts.last_batch = self._batches.observe(self._parser)
            facts.generation = self._generation + self._parser.starts
            facts.bytes_read = self._bytes_read
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
        deadline = time.monotonic() + JOURNAL_TIMEOUT_S
        timer = threading.Timer(JOURNAL_TIMEOUT_S, proc.kill)
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
                if read >= MAX_READ_BYTES or time.monotonic() >= deadline:
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
        self._bytes_read += read
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
        self._parser.clock = _realtime(entry.get("__REALTIME_TIMESTAMP"))
        for line in msg[:MAX_LINE_BYTES].split("\n"):  # only a newline ends a line, as in a file
            self._parser.feed(line, self._entries)


def _realtime(value: object) -> float | None:
    """journald's receipt time of an entry (``__REALTIME_TIMESTAMP``, microseconds since the epoch, as a
    decimal string) in seconds; None when absent or not that."""
    if isinstance(value, str) and value.isdigit() and len(value) <= 20:
        return int(value) / 1e6
    return None


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
