"""What a live SGLang server's replies must look like, checked before anything reads them.

Bytes become values or one :class:`ServerError` naming the endpoint: JSON that decodes (UTF-8, no ``NaN``,
depth at most ``MAX_JSON_DEPTH``), the objects callers expect, ``/generate``'s shape. Pure functions, so
every hostile shape is tested without a socket.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from validator.bounded_files import MAX_JSON_DEPTH, json_depth, json_loads, json_values
from validator.errors import UnavailableError

# Values in one reply (every member of every object and list): what reads a reply walks it whole (the
# redactor copies it for the report), so a bound on bytes alone lets millions of small values hold a check.
# The largest reply read here, /weights_checker's checksums, has one value per parameter tensor: far fewer.
MAX_JSON_VALUES = 500_000


class ServerError(UnavailableError):
    """The server could not give the evidence asked for; names the endpoint and what went wrong."""

    def __init__(
        self, endpoint: str, reason: str, status: int | None = None, *, transient: bool = False
    ) -> None:
        super().__init__(f"{endpoint}: {reason}")
        self.endpoint = endpoint
        self.reason = reason
        self.status = status
        self.transient = transient  # connect error, timeout or 502/503/504: may heal by itself


@dataclass(frozen=True)
class Generation:
    """One ``/generate`` reply, shape-checked. ``ttft_s`` is measured client-side when streamed."""

    text: str
    output_ids: list[int] | None
    meta_info: dict[str, Any]
    ttft_s: float | None = None
    wall_s: float | None = None


def parse_json(endpoint: str, body: bytes) -> Any:
    """Decode a JSON body, turning every decoder failure into a ServerError naming the byte offset."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServerError(endpoint, f"body is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise ServerError(endpoint, "empty body, expected JSON")
    # every value but a container's first follows a comma, so a body with more commas than the bound (in
    # values, or inside strings: neither in a reply SGLang sends) is refused before the parse, which
    # holds the GIL, and so the sidecar's event loop, for its whole length
    if body.count(b",") > MAX_JSON_VALUES:
        raise ServerError(endpoint, f"JSON holds more than {MAX_JSON_VALUES:,} values")
    try:
        doc = json_loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ServerError(endpoint, f"invalid JSON at byte {exc.pos}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise ServerError(endpoint, f"invalid JSON: {type(exc).__name__}") from None
    if json_depth(doc) > MAX_JSON_DEPTH:
        raise ServerError(endpoint, f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    if json_values(doc, MAX_JSON_VALUES) > MAX_JSON_VALUES:
        raise ServerError(endpoint, f"JSON holds more than {MAX_JSON_VALUES:,} values")
    return doc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _type_name(v: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null" if v is None else type(v).__name__
    )


def expect_object(endpoint: str, value: Any, what: str = "reply") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ServerError(endpoint, f"{what}: expected an object, got {_type_name(value)}")
    return value


def parse_generation(endpoint: str, value: Any) -> Generation:
    """Check a ``/generate`` reply's shape: an object with string ``text`` and object ``meta_info`` whose
    numeric fields are finite numbers. A list (batch reply) or an ``error`` object is rejected."""
    obj = expect_object(endpoint, value)
    if "error" in obj and "meta_info" not in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise ServerError(endpoint, f"server reported an error: {str(msg)[:200]}")
    if "text" not in obj:
        raise ServerError(endpoint, "missing field text")
    if not isinstance(obj["text"], str):
        raise ServerError(endpoint, f"text: expected a string, got {_type_name(obj['text'])}")
    if "meta_info" not in obj:
        raise ServerError(endpoint, "missing field meta_info")
    meta = expect_object(endpoint, obj["meta_info"], "meta_info")
    for key, val in meta.items():
        if key.startswith("spec_") or key in _NUMERIC_META:
            _check_meta_value(endpoint, key, val)
    if "completion_tokens" not in meta:
        raise ServerError(endpoint, "missing field meta_info.completion_tokens")
    ids = obj.get("output_ids")
    if ids is not None and not (isinstance(ids, list) and all(type(i) is int for i in ids)):
        raise ServerError(endpoint, "output_ids: expected a list of integers")
    return Generation(text=obj["text"], output_ids=ids, meta_info=meta)


_NUMERIC_META = frozenset(
    {"completion_tokens", "prompt_tokens", "e2e_latency", "first_token_latency", "decode_throughput"}
)
_INT_META = frozenset(
    {
        "completion_tokens",
        "prompt_tokens",
        "spec_verify_ct",
        "spec_num_correct_drafts",
        "spec_num_proposed_drafts",
        "spec_accept_token_num",  # the names other builds give the same counts
        "spec_draft_token_num",
        "spec_accepted_drafts",
        "spec_proposed_drafts",
    }
)


def _check_meta_value(endpoint: str, key: str, val: Any) -> None:
    where = f"meta_info.{key}"
    if key.endswith("_histogram"):
        if val is not None and not (isinstance(val, list) and all(type(v) is int and v >= 0 for v in val)):
            raise ServerError(endpoint, f"{where}: expected a list of non-negative integers")
        return
    if val is None:
        return
    if key in _INT_META:
        if type(val) is not int or val < 0:
            raise ServerError(endpoint, f"{where}: expected a non-negative integer, got {_type_name(val)}")
        return
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val) or val < 0:
        raise ServerError(endpoint, f"{where}: expected a non-negative number, got {_type_name(val)}")
