"""SGLang's argparse type functions, reproduced: what a flag's value becomes, and the message a bad one gets.

Why apart from the parser: these are SGLang's own functions (``human_readable_int``, ``json_list_type``
with orjson's limits, the CUDA-graph config and backend parsers), each copied from the release and kept to
its behaviour by the parity test; the flag table names them by their ``__name__`` and the parser looks
them up in ``TYPES``. Upgrading SGLang touches this module when a type function changes, and nothing else.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any


class ArgumentTypeError(Exception):
    """A type function's own message (argparse.ArgumentTypeError): printed verbatim after the flag."""


def _human_readable_int(value: str) -> int:
    # sglang/srt/utils/common.py: human_readable_int

    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _nullable_str(value: str) -> str | None:
    return None if not value or value == "None" else value


def _orjson_int(text: str) -> int:
    # orjson (used by json_list_type) refuses integers outside 64 bits.
    number = int(text)
    if not -(2**63) <= number < 2**64:
        raise ValueError("integer out of range")
    return number


def _orjson_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # orjson refuses a number too large for a double (1e400); json makes it inf
        raise ValueError("number out of range")
    return number


def _orjson_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")  # orjson rejects NaN/Infinity


def _json_list_type(value: str) -> Any:
    try:
        return json.loads(
            value, parse_int=_orjson_int, parse_float=_orjson_float, parse_constant=_orjson_constant
        )
    except ValueError:
        raise ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


_CUDA_GRAPH_PHASES = ("decode", "prefill")
# sglang/srt/model_executor/cuda_graph_config.py: ALLOWED_KEYS_PER_PHASE
_CUDA_GRAPH_KEYS = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": (
        "backend",
        "max_bs",
        "bs",
        "max_context_size",
        "full_prefill_max_req",
        "full_prefill_prefix_chunk_tokens",
        "max_seq_len",
    ),
}


def _parse_cuda_graph_backend_arg(raw: str) -> str:
    if raw == "tc_piecewise":
        raise ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _parse_cuda_graph_config_arg(raw: str) -> dict[str, dict[str, Any]]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ArgumentTypeError(f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    result: dict[str, dict[str, Any]] = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CUDA_GRAPH_PHASES:
            raise ArgumentTypeError(
                f"--cuda-graph-config: unknown phase '{phase}', expected one of {_CUDA_GRAPH_PHASES}"
            )
        if not isinstance(settings, dict):
            raise ArgumentTypeError(
                f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}"
            )
        if "backend" in settings:
            _parse_cuda_graph_backend_arg(settings["backend"])
        allowed = _CUDA_GRAPH_KEYS[phase]
        result[phase] = {}
        for key, value in settings.items():
            if key not in allowed:
                raise ArgumentTypeError(
                    f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}"
                )
            result[phase][key] = value
    return result


def identity(value: str) -> str:
    return value


TYPES: dict[str | None, Any] = {
    None: identity,
    "str": str,
    "int": int,
    "float": float,
    "loads": json.loads,
    "human_readable_int": _human_readable_int,
    "nullable_str": _nullable_str,
    "json_list_type": _json_list_type,
    "parse_cuda_graph_backend_arg": _parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": _parse_cuda_graph_config_arg,
}
