"""Facts from an SGLang server log: a file, or the systemd journal (``--log journal:UNIT``).

The log is the only outside evidence for some things (the ``Online FP8 quantization enabled for
lm_head.`` line, which MoE kernels were prepared, draft CUDA-graph capture, the ``accept len`` of real
traffic), and the resolved ``server_args=`` line repeats what ``/server_info`` says, so checks can catch
disagreement. A log that holds no start at all (empty, truncated by logrotate's ``copytruncate``, rotated
away) says nothing about the running server: ``LogFacts.unusable()`` says so, and the live layer turns it
into a ``server.log`` error instead of letting checks read a missing FP8 line as a BF16 head.

This module is the front door: which reader a ``--log`` value names. The work is in four modules, one job
each: ``log_grammar`` (what a line says), ``log_state`` (the current start's facts, fed line by line),
``log_file`` (a file followed by offset and inode) and ``log_journal`` (the unit's journal).
"""

from __future__ import annotations

import re
from pathlib import Path

from validator.errors import UsageError
from validator.facts import JOURNAL_PREFIX, LogFacts
from validator.sources.server.log_file import FileLogReader
from validator.sources.server.log_journal import JournalLogReader
from validator.sources.server.log_state import LogReader

__all__ = [
    "FileLogReader",
    "JournalLogReader",
    "LogReader",
    "open_log_reader",
    "parse_log_spec",
    "read_server_log",
]

_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]{1,255}$")


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
