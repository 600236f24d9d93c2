"""Evidence from the in-process plugin: the attestation file (schema ``spark-validate.attestation/v1``).

The plugin (``validator.plugin``) writes it from inside each SGLang scheduler process; the simulator
imitates it; ``check`` and the sidecar read it here. Reading is strict, because a malformed file must
never count as evidence, and the reader also tells a file left by a previous server run (``staleness``).

About SGLang's timing facts: ``/server_info["startup_time"]`` is not a timestamp. It is a dict of
durations in seconds (``load_weight``, ``kv_cache_allocation``, ``scheduler_e2e``, ``cuda_graph``,
``tokenizer_e2e``; ``srt/observability/startup_time.py``), and each ``internal_states[i]["startup_time"]``
holds one scheduler's (``load_weight`` = target + draft weight-load seconds). So staleness is judged by
the process identity (PID plus its start time, when the server runs on this host and its PIDs are
visible), by the SGLang version and TP size, and by the weight-load duration the plugin recorded against
the one the server reports.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from validator.errors import InputError, UnavailableError
from validator.plugin.procinfo import PROC, process_start_time

SCHEMA_V1 = "spark-validate.attestation/v1"
HookStatus = Literal["ran", "not_reached", "failed"]
# PID start times come from clock ticks (10 ms) on both sides; a second covers rounding and clock steps.
START_TIME_TOLERANCE_S = 1.0
# Weight-load seconds are the same float on both sides for one run; a previous run differs by far more.
LOAD_WEIGHT_TOLERANCE_S = 0.05


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Writer(_Strict):
    tool: str
    version: str


class Process(_Strict):
    pid: int
    start_time: float | None
    hostname: str | None
    tp_rank: int | None
    tp_size: int | None
    load_weight_s: float | None = None  # optional extension: target + draft weight-load seconds


class SGLangInfo(_Strict):
    version: str | None
    declares_fp8_lm_head: bool | None
    nextn_has_set_lm_head_from_target: bool | None


class LmHead(_Strict):
    module_class: str | None
    quant_method: str | None
    weight_dtype: str | None
    weight_shape: list[int] | None
    has_weight_scale: bool | None
    has_input_scale: bool | None


class Moe(_Strict):
    layers: int
    quant_methods: dict[str, int]
    runner_backends: dict[str, int]


class ModelInfo(_Strict):
    model_class: str | None
    lm_head: LmHead | None
    moe: Moe | None


class LmHeadSharing(_Strict):
    shared_module: bool | None
    shared_weight: bool | None
    remedy_applied: bool


class Attestation(_Strict):
    schema_: Literal["spark-validate.attestation/v1"]
    written_at: str
    writer: Writer
    process: Process
    sglang: SGLangInfo
    env: dict[str, str | None]
    target: ModelInfo | None
    draft: ModelInfo | None
    lm_head: LmHeadSharing
    hooks: dict[str, HookStatus]
    errors: list[str]

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Attestation:
        data = dict(doc)
        if "schema" in data:
            data["schema_"] = data.pop("schema")
        return cls.model_validate(data)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]).replace("schema_", "schema") or "(document)"
    extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{extra}"


def read_attestation(path: Path | str) -> Attestation:
    """Read and validate one attestation file.

    Raises UnavailableError (exit 69) when the file cannot be read, InputError (exit 65) when it is not a
    v1 attestation; the message names the file.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnavailableError(
            f"{p}: no attestation file (is the spark-validate plugin installed?)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnavailableError(f"{p}: cannot read attestation: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"not JSON: {exc.msg}", exc.lineno) from None
    if not isinstance(doc, dict):
        raise InputError(str(p), "not a JSON object")
    if doc.get("schema") != SCHEMA_V1:
        raise InputError(str(p), f"schema is {doc.get('schema')!r}, expected {SCHEMA_V1!r}")
    try:
        return Attestation.from_doc(doc)
    except ValidationError as exc:
        raise InputError(str(p), _first_error(exc)) from None


def _server_load_weight(server_info: dict[str, Any]) -> float | None:
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        st = states[0].get("startup_time")
        if isinstance(st, dict) and isinstance(st.get("load_weight"), (int, float)):
            return float(st["load_weight"])
    return None


def staleness(
    att: Attestation,
    server_info: dict[str, Any],
    *,
    hostname: str | None = None,
    proc: Path = PROC,
) -> str | None:
    """Why ``att`` does not describe the server behind ``server_info`` (a previous run), or None.

    The PID test applies when the file was written on this host: the writer must still be running with
    the same start time. (A server in another PID namespace, e.g. a Kubernetes container without
    ``shareProcessNamespace``, looks gone; run the sidecar where the server's PIDs are visible.)
    """
    version = server_info.get("version")
    if version is not None and att.sglang.version is not None and str(version) != att.sglang.version:
        return f"written by SGLang {att.sglang.version}, the server reports {version}"
    tp_size = server_info.get("tp_size")
    if isinstance(tp_size, int) and att.process.tp_size is not None and tp_size != att.process.tp_size:
        return f"written with tp_size {att.process.tp_size}, the server reports {tp_size}"
    here = hostname if hostname is not None else socket.gethostname()
    if att.process.hostname == here:
        started = process_start_time(att.process.pid, proc)
        if started is None:
            return f"the writing process (PID {att.process.pid}) is not running on this host"
        if (
            att.process.start_time is not None
            and abs(started - att.process.start_time) > START_TIME_TOLERANCE_S
        ):
            return (
                f"PID {att.process.pid} now belongs to a process started at {started:.2f}, "
                f"not the writer (started {att.process.start_time:.2f})"
            )
    server_load = _server_load_weight(server_info)
    if (
        server_load is not None
        and att.process.load_weight_s is not None
        and att.process.tp_rank in (0, None)
        and abs(server_load - att.process.load_weight_s) > LOAD_WEIGHT_TOLERANCE_S
    ):
        return (
            f"weights loaded in {att.process.load_weight_s:.2f} s per the attestation, "
            f"{server_load:.2f} s per /server_info: another server run"
        )
    return None
