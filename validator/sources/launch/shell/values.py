"""The values the static shell reader computes: known text, or ``Unknown`` with the reason bash alone
knows it at run time; and the two ways a reading stops short (``Unmodelled``, ``Unbound``).

Apart from the expansion code so that every layer of the reader (words, state, evaluator, adapter) shares
one definition without importing the expansion machinery.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Unknown:
    """A value bash computes at run time; ``reason`` says what. ``nonempty``: known not to be empty
    (``$BASH_VERSION``), which is all a ``-n`` test needs."""

    reason: str
    nonempty: bool = False


@dataclass(frozen=True)
class Unsplit(Unknown):
    """An unquoted unknown: even how many words it becomes is known only at run time."""


Value = str | Unknown
Field = list[Value]  # one argv word: known text and unknown runs, e.g. ``--model-path=`` + Unknown
Fields = list[Field] | Unknown  # Unknown: even how many words is known only at run time


class Unmodelled(Exception):
    """A construct the reader does not model: the path's outcome is unresolved, never guessed."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(f"line {line}: {reason}")
        self.reason = reason
        self.line = line
        self.where: str | None = None  # the file (a sourced one), set where it is known


class Unbound(Exception):
    """``set -u`` and an unset variable: bash prints an error and the script exits."""


def count(text: str) -> int | None:
    """``text`` as the number bash reads in ``exit N``, ``shift N``, ``break N`` or ``$N``: ASCII digits
    only (``str.isdigit`` also takes "²", which ``int`` refuses) and at most 18 of them (more overflow
    bash's ``intmax_t``, and Python refuses to convert over 4,300 digits); None for anything else."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


# the longest value the reader builds: Linux refuses to exec an argument or variable over 128 KiB
# (MAX_ARG_STRLEN), so a longer one never reaches the server; doubling a variable 40 times (``a=$a$a``)
# would otherwise take terabytes (red team 19: MemoryError, exit 1, or the OOM killer)
MAX_VALUE = 1 << 20


# the work one reading of a script may do, in statements (about 4 us each; a value built or a pattern
# matched is charged as the statements its time is worth): MAX_STEPS per path times MAX_PATHS paths let a
# ten-line script of another user's take 21 s (red team 19), each path replaying the same loop
MAX_WORK = 200_000
_WORK: ContextVar[list[int] | None] = ContextVar("spark_validate_shell_work", default=None)


@contextlib.contextmanager
def work_budget() -> Iterator[None]:
    """One reading's budget of ``MAX_WORK`` (``charge``); readings nest (a ``-c`` string), each its own."""
    token = _WORK.set([MAX_WORK])
    try:
        yield
    finally:
        _WORK.reset(token)


def charge(units: int) -> bool:
    """Spend ``units`` of the reading's work; False once it is spent (outside a reading, always True)."""
    left = _WORK.get()
    if left is None:
        return True
    left[0] -= units
    return left[0] >= 0


_PROCESS_FILES = re.compile(r"/(?:proc|dev/fd|dev/stdin|dev/stdout|dev/stderr)(?:/|$)")


def process_file(path: str) -> bool:
    """``path`` (absolute) names a process's files: ``/proc/self`` is the shell running the script (its
    working directory, its descriptors), ``/proc/N`` whatever runs then, ``/dev/fd/N`` and ``/dev/stdin``
    its descriptors. What this process finds there is its own, so a test, ``cd`` or lookup there is known
    only at run time."""
    return _PROCESS_FILES.match(os.path.normpath(path)) is not None


def join(parts: list[Value]) -> Value:
    """Concatenate parts; any unknown part makes the whole unknown (with the first reason), and so does a
    result over ``MAX_VALUE`` characters, measured before it is built, or one past the reading's work."""
    size = 0
    for p in parts:
        if isinstance(p, Unknown):
            return p
        size += len(p)
    if size > MAX_VALUE:
        return Unknown(f"a value of {size} characters, over the {MAX_VALUE} the reader builds")
    if size > 65536 and not charge(size >> 16):
        return Unknown(f"a value of {size} characters, past the work one reading does ({MAX_WORK})")
    return "".join(p for p in parts if isinstance(p, str))


def join_with(values: list[Value], sep: Value) -> Value:
    """``values`` with ``sep`` between each two, joined (``"$*"``, ``echo a b``, ``eval a b``)."""
    parts: list[Value] = []
    for k, v in enumerate(values):
        if k:
            parts.append(sep)
        parts.append(v)
    return join(parts)
