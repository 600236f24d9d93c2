"""Unknown is a type: a value known only at run time is ``Unresolved(name, why, where)``; reading one while
a check judges raises ``UnresolvedRead``, which the engine turns into that check's ``error``.

A raise, not a text search: rewording a message can never change a verdict. Only while judging
(``judging()``): sources read the same records to derive theirs. ``WatchedMapping`` and ``watched`` stand in
for the records' containers in the engine's view. Imports nothing of the validator.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")
_V = TypeVar("_V")


@dataclass(frozen=True)
class Unresolved:
    """A value known only at run time: ``name`` (an argparse dest, an environment variable, or one that
    stands for more: ``*``, ``environment``, ``sglang``), ``why`` it is not known, and ``where`` the
    evidence says so (a script's file and line, a unit, a process)."""

    name: str
    why: str
    where: str


class UnresolvedRead(BaseException):
    """A check read ``value`` (as ``read``: the variable, flag or record it asked for). A BaseException so
    that a check's own ``except Exception`` cannot swallow it and judge on a stand-in value."""

    def __init__(self, value: Unresolved, read: str) -> None:
        super().__init__(f"{read}: {value.why}")
        self.value = value
        self.read = read


_judging: ContextVar[bool] = ContextVar("spark_validate_judging", default=False)


@contextmanager
def judging() -> Iterator[None]:
    """While a check runs: reading an unresolved value raises ``UnresolvedRead``."""
    token = _judging.set(True)
    try:
        yield
    finally:
        _judging.reset(token)


def reach(value: Unresolved | None, read: str) -> None:
    """Raise ``UnresolvedRead`` when a check (``judging()``) reads ``value``; else nothing."""
    if value is not None and _judging.get():
        raise UnresolvedRead(value, read)


class WatchedMapping(dict[str, _V]):
    """A record's mapping (environment, parsed arguments) whose ``unknown`` keys, or every key (``every``:
    the whole mapping is not known, as after a sourced file that could not be read), raise while judging.
    Iterating reads every key: it raises when any is unknown."""

    def __init__(
        self,
        data: Mapping[str, _V],
        unknown: Mapping[str, Unresolved],
        every: Unresolved | None = None,
        known: Collection[str] = (),
    ) -> None:
        super().__init__(data)
        self._unknown = dict(unknown)
        self._every = every
        self._known = frozenset(known)  # set over what ``every`` hides (docker exec -e): known all the same

    def _key(self, key: object) -> None:
        if key not in self._known:
            reach(self._every, str(key))
        if isinstance(key, str):
            reach(self._unknown.get(key), key)

    def _all(self) -> None:
        reach(self._every or next(iter(self._unknown.values()), None), "every variable")

    def __getitem__(self, key: str) -> _V:
        self._key(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._key(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._key(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def items(self) -> Any:
        self._all()
        return super().items()

    def values(self) -> Any:
        self._all()
        return super().values()

    def __len__(self) -> int:
        self._all()
        return super().__len__()


class _Watched:
    """Mixin of ``watched``: a public attribute named in ``_hidden`` raises while judging."""

    _hidden: dict[str, Unresolved]

    def __getattribute__(self, name: str) -> Any:
        if name[:1] != "_" and _judging.get():
            reach(object.__getattribute__(self, "_hidden").get(name), name)
        return object.__getattribute__(self, name)


_views: dict[type, type] = {}


def watched(record: _T, hidden: Mapping[str, Unresolved], **replace: object) -> _T:
    """A copy of ``record`` (a plain or frozen dataclass instance) whose ``hidden`` attributes raise while
    judging, with ``replace``'s attributes put in (a watched mapping, a watched sub-record)."""
    kind = type(record)
    view = _views.get(kind)
    if view is None:
        view = _views[kind] = type(f"Watched{kind.__name__}", (_Watched, kind), {})
    copy: Any = object.__new__(view)
    copy.__dict__.update(record.__dict__)
    copy.__dict__.update(replace)
    copy.__dict__["_hidden"] = dict(hidden)
    result: _T = copy
    return result


__all__ = ["Unresolved", "UnresolvedRead", "WatchedMapping", "judging", "reach", "watched"]
