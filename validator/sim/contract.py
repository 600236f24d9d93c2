"""Request checking and error replies, with SGLang 0.5.23's status codes and bodies.

A ``/generate`` body meets three gates, in order: FastAPI's parse (400 ``ErrorResponse``,
srt/entrypoints/http_server.py:635-692); the JSON contract (400 ``{"error": ...}``,
srt/entrypoints/api_contract.py:12-18, http_server.py:933-939; sampling parameters reject unknown keys);
``GenerateReqInput`` normalisation (400 ``{"error": {"message": ...}}``, or one SSE error frame when
streaming, http_server.py:2246-2250). Only the fields the simulator reads are mirrored; tests compare the
texts with the real ``api_types`` module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

NO_INPUT = "Either text, input_ids or input_embeds should be provided."


class ContractError(ValueError):
    """The body violates SGLang's JSON contract; ``str()`` is the reply's ``error`` text."""


# ---- serde-style messages (api_types.py:30-110) ----


def _unexpected(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean `{'true' if v else 'false'}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{v}`"
    if isinstance(v, str):
        return f'string "{v}"'
    if isinstance(v, list):
        return "sequence"
    if isinstance(v, dict):
        return "map"
    return type(v).__name__


def _invalid(v: Any, expected: str) -> ContractError:
    return ContractError(f"invalid type: {_unexpected(v)}, expected {expected}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(v: Any) -> None:
    if not _is_int(v):
        raise _invalid(v, "i64")


def _uint(v: Any) -> None:
    if not _is_int(v):
        raise _invalid(v, "u64")
    if v < 0:
        raise ContractError(f"invalid value: integer `{v}`, expected u64")


def _float(v: Any) -> None:
    if not (isinstance(v, (int, float)) and not isinstance(v, bool)):
        raise _invalid(v, "f64")


def _bool(v: Any) -> None:
    if not isinstance(v, bool):
        raise _invalid(v, "a boolean")


def _str(v: Any) -> None:
    if not isinstance(v, str):
        raise _invalid(v, "a string")


def _seq(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise _invalid(v, "a sequence")
    return v


def _map(v: Any, expected: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _invalid(v, expected)
    return v


def _or_list(scalar: Callable[[Any], None], kind: str) -> Callable[[Any], None]:
    """``decode_<Kind>OrList``: a list of scalars, or one scalar with the union's own wording."""

    def check(v: Any) -> None:
        if isinstance(v, list):
            for e in v:
                scalar(e)
            return
        try:
            scalar(v)
        except ContractError:
            raise _invalid(v, f"a value or an array of values for {kind}") from None

    return check


def _int_list(v: Any) -> None:
    for e in _seq(v):
        _int(e)


def _token_ids_or_list(v: Any) -> None:
    """``decode_TokenIdsOrList`` (api_types.py:1029-1035): [] and [int, ...] are flat, else a batch."""
    if not isinstance(v, list):
        raise _invalid(v, "a value or an array of values for TokenIdsOrList")
    if not v or (isinstance(v[0], (int, float)) and not isinstance(v[0], bool)):
        _int_list(v)
        return
    for seq in v:
        _int_list(seq)


def _logit_bias(v: Any) -> None:
    for e in _map(v, "a map").values():
        _float(e)


def _choice(v: Any) -> None:
    for e in _seq(v):
        _str(e)


_STRING_OR_LIST = _or_list(_str, "StringOrList")

# decode_SamplingParams (api_types.py:1256-1321): every field, in _FIELDS_SamplingParams order.
_SAMPLING: dict[str, Callable[[Any], None] | None] = {
    "max_new_tokens": _int,
    "stop": _STRING_OR_LIST,
    "stop_token_ids": _int_list,
    "stop_regex": _STRING_OR_LIST,
    "temperature": _float,
    "top_p": _float,
    "top_k": _int,
    "min_p": _float,
    "frequency_penalty": _float,
    "presence_penalty": _float,
    "repetition_penalty": _float,
    "min_new_tokens": _int,
    "n": _int,
    "json_schema": _str,
    "regex": _str,
    "ebnf": _str,
    "structural_tag": _str,
    "ignore_eos": _bool,
    "skip_special_tokens": _bool,
    "spaces_between_special_tokens": _bool,
    "no_stop_trim": _bool,
    "stream_interval": _int,
    "logit_bias": _logit_bias,
    "sampling_seed": _int,
    "custom_params": None,
    "beam_width": _int,
    "watermark": None,
    "choice": _choice,
}

# decode_GenerateRequest (api_types.py:1413-1495), the fields the simulator reads; others pass.
_REQUEST: dict[str, Callable[[Any], None]] = {
    "rid": _STRING_OR_LIST,
    "text": _STRING_OR_LIST,
    "input_ids": _token_ids_or_list,
    "stream": _bool,
    "return_logprob": _or_list(_bool, "BoolOrList"),
    "logprob_start_len": _or_list(_int, "Int64OrList"),
    "top_logprobs_num": _or_list(_int, "Int64OrList"),
    "token_ids_logprob": _token_ids_or_list,
    "return_text_in_logprobs": _bool,
    "priority": _int,
    "routing_key": _str,
    "max_thinking_tokens": _uint,
    "session_id": _str,
    "return_prompt_token_ids": _bool,
    "routed_experts_start_len": _int,
}
# Keys whose decoder has no ``None`` branch: an explicit null is a type error (api_types.py:1487-1490).
_NULL_REJECTED = frozenset({"return_prompt_token_ids", "routed_experts_start_len"})


def _unknown_field(key: str) -> ContractError:
    listed = ", ".join(f"`{f}`" for f in _SAMPLING)
    return ContractError(f"unknown field `{key}`, expected one of {listed}")


def _sampling_params(value: Any) -> None:
    m = _map(value, "struct SamplingParams")
    for key, x in m.items():
        if key not in _SAMPLING:
            raise _unknown_field(key)
        check = _SAMPLING[key]
        if x is not None and check is not None:
            check(x)


def check_generate(body: Any) -> None:
    """Raise :class:`ContractError` where ``GenerateRequest.from_json_value(body)`` would."""
    m = _map(body, "struct GenerateRequest")
    for key, x in m.items():
        if x is None and key not in _NULL_REJECTED:
            continue
        if key == "sampling_params":
            if isinstance(x, list):
                for e in x:
                    _sampling_params(e)
            else:
                _sampling_params(_map(x, "a value or an array of values for SamplingParamsOrList"))
        elif key in _REQUEST:
            _REQUEST[key](x)


# ---- the bodies ----


def decode_body(
    raw: bytes, *, model: str, method: str, path: str, handler: str, line: int
) -> tuple[Any, dict[str, Any] | None]:
    """The parsed body, or FastAPI's 400 reply when it is not JSON or not an object (``model``: the
    request type FastAPI validates it as; ``handler`` and ``line``: the endpoint function in
    http_server.py, which FastAPI's message names)."""
    where = (
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py", '
        f"line {line}, in {handler}\n    {method} {path}"
    )
    try:
        body = json.loads(raw) if raw.strip() else None
    except json.JSONDecodeError as exc:  # fastapi/routing.py: json_invalid at the decoder's position
        invalid = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {},
                   "ctx": {"error": exc.msg}}  # fmt: skip
        return None, _validation_error(invalid, where)
    except ValueError as exc:  # not UTF-8
        return None, bad_request(f"There was an error parsing the body: {exc}")
    if isinstance(body, dict):
        return body, None
    error: dict[str, Any]
    if body is None:  # no body, or JSON null
        error = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
    else:
        error = {"type": "dataclass_type", "loc": ("body",),
                 "msg": f"Input should be a dictionary or an instance of {model}", "input": body,
                 "ctx": {"class_name": model}}  # fmt: skip
    return body, _validation_error(error, where)


def _validation_error(error: dict[str, Any], where: str) -> dict[str, Any]:
    """SGLang's 400 for a ``RequestValidationError`` (http_server.py:663-692): ``str(exc)``, which is
    FastAPI's ``ValidationException.__str__`` naming the endpoint (``where``), then ``exc.errors()``."""
    return bad_request(f"1 validation error:\n  {error}\n{where} {[error]}")


def bad_request(message: str, *, err_type: str = "Bad Request", code: int = 400) -> dict[str, Any]:
    """``ErrorResponse(...).model_dump()`` (srt/entrypoints/openai/protocol.py:106-111)."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


def value_error(message: str) -> dict[str, Any]:
    """``_create_error_response`` (http_server.py:2246-2250)."""
    return {"error": {"message": message}}


def stream_error(message: str) -> dict[str, Any]:
    """The SSE frame ``serve_generate_request`` yields for a ``ValueError`` (http_server.py:961-970)."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}
