"""Typed records from plain data and back: the rule pack and the report, as frozen dataclasses.

Why not pydantic here: ``preflight`` runs as a systemd ``ExecStartPre=`` before every start of the
server, and importing pydantic and building the pack and report models cost about four times a bare
interpreter start, more than everything else preflight does. The two schemas need a small subset of what
pydantic offers, which this module provides on the standard library alone:

- ``load(cls, data)`` validates YAML/JSON data into a dataclass: scalars (lax where pydantic is: ``"3"``
  is an int, ``3`` a float), ``Literal``, ``Enum``, ``X | None``, ``tuple[X, ...]``, fixed tuples,
  ``list[X]``, ``dict[str, X]``, ``datetime.date``, nested dataclasses; limits as
  ``Annotated[int, Ge(1)]``; unknown keys refused; a class's own rules in ``__check__``. Every problem is
  collected with its location, in pydantic's wording, so ``rules lint`` lists them all with their lines.
- ``dump(obj)`` turns a record into JSON-ready data, as pydantic's ``model_dump(mode="json")`` did:
  fields in order, enums as values, paths as strings, tuples and sets as lists, non-finite floats as
  null, ``float`` fields as floats, and fields marked ``exclude`` left out.

Why not msgspec, which is typed and as quick to import (17 ms against this module's 13 ms, measured with
``python -X importtime``): it stops at the first problem (``Expected `int`, got `str` - at `$.x```), and a
pack author fixing a pack one error per run is what ``rules lint`` exists to spare; it also has no place
for a record's cross-field rules. What this module adds over it is exactly that: every problem, located.

The plugin does not use this module (it is standard-library only and writes its own format, in
``validator.attestation``); the attestation reader validates that format with pydantic in strict mode,
off preflight's path (CONTRIBUTING's "Schemas" says why each of the two is the one it uses).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import math
import re
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any, ClassVar, Literal, Protocol, TypeVar, Union

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]


class _Limit:
    """One constraint on a value, placed in ``Annotated[...]``; ``holds`` tells, ``says`` words it."""

    op: ClassVar[str]

    def __init__(self, bound: Any) -> None:
        self.bound = bound

    def holds(self, value: Any) -> bool:  # pragma: no cover - every limit overrides it
        raise NotImplementedError

    def says(self, value: Any) -> str:
        return f"Input should be {self.op} {self.bound}"


class Ge(_Limit):
    op = "greater than or equal to"

    def holds(self, value: Any) -> bool:
        return bool(value >= self.bound)


class Gt(_Limit):
    op = "greater than"

    def holds(self, value: Any) -> bool:
        return bool(value > self.bound)


class Le(_Limit):
    op = "less than or equal to"

    def holds(self, value: Any) -> bool:
        return bool(value <= self.bound)


class Lt(_Limit):
    op = "less than"

    def holds(self, value: Any) -> bool:
        return bool(value < self.bound)


class MinLen(_Limit):
    def holds(self, value: Any) -> bool:
        return len(value) >= int(self.bound)

    def says(self, value: Any) -> str:
        what = "String" if isinstance(value, str) else "List"
        unit = "character" if isinstance(value, str) else "item"
        return f"{what} should have at least {self.bound} {unit}{'' if self.bound == 1 else 's'}"


class Pattern(_Limit):
    def __init__(self, bound: str) -> None:
        super().__init__(re.compile(bound))

    def holds(self, value: Any) -> bool:
        return self.bound.search(value) is not None

    def says(self, value: Any) -> str:
        return f"String should match pattern '{self.bound.pattern}'"


class Checked(Protocol):
    """A record with rules over several fields, run once its fields are valid (pydantic's model
    validators). Each problem is ``(location below the record, message)``."""

    def __check__(self) -> Iterator[Problem]: ...


class SchemaError(ValueError):
    """Data that does not fit the schema: every problem, with its location."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{format_loc(loc) or 'value'}: {msg}" for loc, msg in problems))
        self.problems = problems


def format_loc(loc: Loc) -> str:
    """``("checks", 3, "severity")`` -> ``checks[3].severity``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + part
    return out


T = TypeVar("T")


def load(cls: type[T], data: object) -> T:
    """Validate ``data`` into ``cls`` (a dataclass); ``SchemaError`` lists every problem."""
    problems: list[Problem] = []
    value = _convert(cls, data, (), problems)
    if problems:
        raise SchemaError(problems)
    return typing.cast(T, value)


_MISSING = object()
_TRUE = {"true", "yes", "on", "1", "y", "t"}
_FALSE = {"false", "no", "off", "0", "n", "f"}


def _hints(cls: type) -> dict[str, Any]:
    cached = _HINTS.get(cls)
    if cached is None:
        cached = _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return cached


_HINTS: dict[type, dict[str, Any]] = {}


def _record(cls: type, data: object, loc: Loc, problems: list[Problem]) -> object:
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        problems.append((loc, f"Input should be a valid dictionary or instance of {cls.__name__}"))
        return None
    hints = _hints(cls)
    before = len(problems)
    kwargs: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                problems.append(((*loc, f.name), "Field required"))
            continue
        kwargs[f.name] = _convert(hints[f.name], data[f.name], (*loc, f.name), problems)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            problems.append(((*loc, str(key)), "Extra inputs are not permitted"))
    if len(problems) > before:
        return None
    obj = cls(**kwargs)
    check = getattr(obj, "__check__", None)
    if check is not None:
        problems.extend(((*loc, *where), msg) for where, msg in typing.cast(Checked, obj).__check__())
    return obj


def _convert(tp: Any, data: object, loc: Loc, problems: list[Problem]) -> object:
    """``data`` as type ``tp``, or a problem appended (and None returned)."""
    limits: tuple[Any, ...] = ()
    if typing.get_origin(tp) is typing.Annotated:
        tp, *extra = typing.get_args(tp)
        limits = tuple(extra)
    value = _typed(tp, data, loc, problems)
    for limit in limits:
        if isinstance(limit, _Limit) and value is not None and not limit.holds(value):
            problems.append((loc, limit.says(value)))
            return None
    return value


def _typed(tp: Any, data: object, loc: Loc, problems: list[Problem]) -> object:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return data
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _convert(rest[0], data, loc, problems)
        raise TypeError(f"unsupported union {tp!r}")  # a schema mistake, not a data one
    if origin is Literal:
        if data in args and any(type(data) is type(a) for a in args):
            return data
        problems.append((loc, f"Input should be {_either(args)}"))
        return None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if data == member.value or data is member:
                return member
        problems.append((loc, f"Input should be {_either([m.value for m in tp])}"))
        return None
    if dataclasses.is_dataclass(tp):
        return _record(typing.cast(type, tp), data, loc, problems)
    if origin is tuple:
        return _tuple(args, data, loc, problems)
    if origin is list:
        if not isinstance(data, (list, tuple)):
            problems.append((loc, "Input should be a valid list"))
            return None
        return [_convert(args[0], item, (*loc, i), problems) for i, item in enumerate(data)]
    if origin is dict:
        if not isinstance(data, Mapping):
            problems.append((loc, "Input should be a valid dictionary"))
            return None
        out: dict[object, object] = {}
        for key, item in data.items():
            k = _convert(args[0], key, (*loc, str(key)), problems)
            out[k] = _convert(args[1], item, (*loc, str(key)), problems)
        return out
    return _scalar(tp, data, loc, problems)


def _tuple(args: tuple[Any, ...], data: object, loc: Loc, problems: list[Problem]) -> object:
    if not isinstance(data, (list, tuple)):
        problems.append((loc, "Input should be a valid tuple"))
        return None
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(args[0], item, (*loc, i), problems) for i, item in enumerate(data))
    if len(data) != len(args):
        problems.append((loc, f"Tuple should have {len(args)} items, not {len(data)}"))
        return None
    pairs = enumerate(zip(args, data, strict=True))
    return tuple(_convert(a, item, (*loc, i), problems) for i, (a, item) in pairs)


def _scalar(tp: Any, data: object, loc: Loc, problems: list[Problem]) -> object:
    if tp is bool:
        if isinstance(data, bool):
            return data
        if isinstance(data, int) and data in (0, 1):
            return bool(data)
        if isinstance(data, str) and data.lower() in _TRUE | _FALSE:
            return data.lower() in _TRUE
        problems.append((loc, "Input should be a valid boolean"))
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        if isinstance(data, float):
            if data.is_integer():
                return int(data)
            problems.append((loc, "Input should be a valid integer, got a number with a fractional part"))
            return None
        if isinstance(data, str):
            try:
                return int(data.strip())
            except ValueError:
                what = "Input should be a valid integer, unable to parse string as an integer"
                problems.append((loc, what))
                return None
        problems.append((loc, "Input should be a valid integer"))
    elif tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        if isinstance(data, str):
            try:
                return float(data.strip())
            except ValueError:
                problems.append((loc, "Input should be a valid number, unable to parse string as a number"))
                return None
        problems.append((loc, "Input should be a valid number"))
    elif tp is str:
        if isinstance(data, str):
            return data
        problems.append((loc, "Input should be a valid string"))
    elif tp is _dt.date:
        if isinstance(data, _dt.date) and not isinstance(data, _dt.datetime):
            return data
        if isinstance(data, str):
            try:
                return _dt.date.fromisoformat(data.strip())
            except ValueError:
                pass
        problems.append((loc, "Input should be a valid date in the format YYYY-MM-DD"))
    else:
        raise TypeError(f"unsupported type {tp!r}")  # a schema mistake, not a data one
    return None


def _either(values: Any) -> str:
    shown = [repr(v) if isinstance(v, str) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


# ---- back to plain data ----


def dump(obj: object) -> Any:
    """A record (or any value it holds) as JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        hints = _hints(type(obj))
        return {
            f.name: _dump_as(hints[f.name], getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("exclude")
        }
    if isinstance(obj, enum.Enum):
        return dump(obj.value)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, Mapping):
        return {_key(k): dump(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [dump(v) for v in obj]
    if isinstance(obj, (_dt.date, _dt.time)):
        return obj.isoformat()
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    return str(obj)


def _dump_as(tp: Any, value: object) -> Any:
    """``float`` fields hold floats in the JSON even when given an int (``3`` is written ``3.0``)."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if isinstance(value, int) and not isinstance(value, bool) and float in _floats(tp):
        return float(value)
    if isinstance(value, tuple) and typing.get_origin(_without_none(tp)) is tuple:
        inner = typing.get_args(_without_none(tp))
        if inner and inner[-1] is not Ellipsis and len(inner) == len(value):
            return [_dump_as(a, v) for a, v in zip(inner, value, strict=True)]
    return dump(value)


def _floats(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return tp


def _key(key: object) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    return key if isinstance(key, str) else str(dump(key))


__all__ = [
    "Ge",
    "Gt",
    "Le",
    "Lt",
    "MinLen",
    "Pattern",
    "SchemaError",
    "dump",
    "format_loc",
    "load",
]
