"""Outside data into records and records back into JSON data, with pydantic over standard-library dataclasses.

The rule pack (``pack_schema``), the report (``report``), the attestation (``attestation.schema``) and the
launch state (``sources.launch.state``) are dataclasses; each declares its own rules for pydantic
(``__pydantic_config__``, ``Annotated`` limits, ``__post_init__``), so the plugin's records need no
pydantic where they are built. Here: one cached ``TypeAdapter`` per record type, built on first use;
:func:`problems` says every ``ValidationError`` as ``(location, message)`` pairs for a file's author (the
wording below), and :func:`format_loc` writes a location (``checks[3].severity``) on one line whatever the
keys hold.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]
T = TypeVar("T")

__all__ = ["Loc", "Problem", "ValidationError", "dump", "format_loc", "load", "load_json", "problems"]


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(tp: type[Any]) -> TypeAdapter[Any]:
    """Built once per type, on first use (two threads may both build one: the same adapter)."""
    found = _ADAPTERS.get(tp)
    if found is None:
        found = _ADAPTERS[tp] = TypeAdapter(tp)
    return found


def load(tp: type[T], data: object) -> T:
    """``data`` (parsed YAML or JSON) validated into ``tp``; ``ValidationError`` lists every problem."""
    value: T = _adapter(tp).validate_python(data)
    return value


def load_json(tp: type[T], data: bytes, *, strict: bool | None = None) -> T:
    """JSON bytes validated into ``tp`` (strict mode can then read arrays as tuples, strings as enums)."""
    value: T = _adapter(tp).validate_json(data, strict=strict)
    return value


def dump(obj: object) -> Any:
    """A record as JSON-ready data: enums as values, paths and unknown objects as strings, tuples and sets
    as lists, non-finite floats as null, ``float`` fields as floats, fields marked ``exclude`` left out."""
    return _adapter(type(obj)).dump_python(obj, mode="json", fallback=str, warnings=False)


# pydantic's words for Python callers, said for a file's author instead
_SAID = {"unexpected_keyword_argument": "Extra inputs are not permitted"}
_KEY_SHOWN = 60  # characters of one key in a location: a hostile key stays one short line


def problems(exc: ValidationError) -> list[Problem]:
    """Every problem, located. A sequence short of items is one problem at the sequence (pydantic names
    each missing index, and counts only the items that validated: "not 0" of a list holding three)."""
    errors = exc.errors(include_url=False)
    bad_items = {err["loc"][:-1] for err in errors if err["loc"] and isinstance(err["loc"][-1], int)}
    out: list[Problem] = []
    short: dict[Loc, tuple[int, int]] = {}  # a fixed-length tuple: the items it needs, the items given
    for err in errors:
        loc: Loc = tuple(err["loc"])
        kind, ctx = err["type"], err.get("ctx") or {}
        if kind == "missing" and loc and isinstance(loc[-1], int) and isinstance(err["input"], list | tuple):
            if loc[:-1] not in short:
                out.append((loc[:-1], ""))  # said below, once the count is known
            short[loc[:-1]] = (max(short.get(loc[:-1], (0, 0))[0], loc[-1] + 1), len(err["input"]))
        elif kind in ("too_short", "too_long") and ctx.get("field_type") in ("List", "Tuple"):
            if kind == "too_long" or loc not in bad_items:
                bound = ctx["min_length"] if kind == "too_short" else ctx["max_length"]
                how = "at least" if kind == "too_short" else "at most"
                s = "" if bound == 1 else "s"
                out.append((loc, f"List should have {how} {bound} item{s}, not {ctx['actual_length']}"))
        elif loc and loc[-1] == "[key]":  # a mapping's key, not a value under it
            out.append((loc[:-1], "Keys should be strings" if kind == "string_type" else err["msg"]))
        else:
            out.append((loc, _SAID.get(kind, err["msg"])))
    return [(loc, msg or "List should have {} items, not {}".format(*short[loc])) for loc, msg in out]


def format_loc(loc: Loc) -> str:
    """``("checks", 3, "severity")`` -> ``checks[3].severity``; keys escaped and cut short."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        shown = part.encode("unicode_escape").decode("ascii")
        if len(shown) > _KEY_SHOWN:
            shown = shown[:_KEY_SHOWN] + "..."
        out += ("." if out else "") + shown
    return out
