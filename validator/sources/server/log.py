"""Facts from an SGLang server log: a file, or the systemd journal (``--log journal:UNIT``); the front door.

The log is the only outside evidence of the FP8 head line, MoE kernel preparation, draft graph capture and
real traffic's ``accept len``. A log holding no start says nothing (``LogFacts.unusable()``), so it is a
``server.log`` error, never a missing FP8 line read as a BF16 head. Work is in ``log_grammar``,
``log_state``, ``log_file`` and ``log_journal``.
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
        shown = repr(text) if len(text) <= 300 else f"{text[:60]!r}... ({len(text)} characters)"
        raise UsageError(f"--log {shown}: expected journal:UNIT with a systemd unit name (sglang.service)")
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
