"""The values the static shell reader computes: known text, or ``Unknown`` with the reason bash alone
knows it at run time; and the two ways a reading stops short (``Unmodelled``, ``Unbound``).

Apart from the expansion code so that every layer of the reader (words, state, evaluator, adapter) shares
one definition without importing the expansion machinery.
"""

from __future__ import annotations

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


def join(parts: list[Value]) -> Value:
    """Concatenate parts; any unknown part makes the whole unknown (with the first reason)."""
    for p in parts:
        if isinstance(p, Unknown):
            return p
    return "".join(p for p in parts if isinstance(p, str))


def join_with(values: list[Value], sep: Value) -> Value:
    """``values`` with ``sep`` between each two, joined (``"$*"``, ``echo a b``, ``eval a b``)."""
    parts: list[Value] = []
    for k, v in enumerate(values):
        if k:
            parts.append(sep)
        parts.append(v)
    return join(parts)
