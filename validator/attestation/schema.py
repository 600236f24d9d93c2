"""The attestation document: its one definition (schema ``spark-validate.attestation/v2``).

The in-process plugin (``validator.plugin``) builds it inside each SGLang scheduler process; ``check`` and the
sidecar validate what they read against these same dataclasses (``validator.sources.server.attestation`` runs
pydantic over them). Standard library only: the plugin runs inside SGLang, where importing pydantic (or
anything heavy) is not ours to do.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

SCHEMA: Final = "spark-validate.attestation/v2"  # also the Literal of Attestation.schema below
MAX_BYTES = 256 * 1024  # a real document is about 3 KB
MAX_DEPTH = 12  # the document nests 5 deep; a reader refuses deeper

HookStatus = Literal["ran", "not_reached", "failed"]
RAN: HookStatus = "ran"
NOT_REACHED: HookStatus = "not_reached"
FAILED: HookStatus = "failed"
HOOK_NAMES = ("model_loaded", "init_lm_head")
ENV_KEYS = (
    "SGLANG_ENABLE_FP8_LM_HEAD",
    "SPARK_VALIDATE_SHARE_LM_HEAD",
    "SGLANG_PLUGINS",
    "HUMMING_CACHE_DIR",
    "HUMMING_TMP_DIR",
)


class _Strict:
    """Base of every record of the document, for the reader's rules: pydantic reads ``__pydantic_config__``
    on standard-library dataclasses (through their bases), so the reader is strict (no "1" for 1, no 1 for
    true, no NaN or infinity: NaN compares false with everything, so a NaN start time would match any
    process) and rejects unknown fields, without this module importing pydantic."""

    __pydantic_config__: ClassVar[Any] = {"strict": True, "extra": "forbid", "allow_inf_nan": False}


@dataclass(frozen=True)
class Writer(_Strict):
    """The tool that wrote the document and its version (a reader can tell which writer's rules apply)."""

    tool: str
    version: str


@dataclass(frozen=True)
class Process(_Strict):
    """The scheduler process that wrote the document: what binds the file to one server run."""

    pid: int
    start_time: float | None  # epoch seconds, from /proc/<pid>/stat; None only where /proc is absent
    hostname: str
    uid: int  # effective UID of the writer: the file's owner must be it (or root)
    tp_rank: int | None
    tp_size: int | None
    load_weight_s: float | None = None  # target + draft weight-load seconds (ModelRunner.weight_load_time)


@dataclass(frozen=True)
class Server(_Strict):
    """The HTTP address SGLang was told to serve on (``ServerArgs.host``/``port``), for binding to a URL."""

    host: str | None
    port: int | None


@dataclass(frozen=True)
class SGLangInfo(_Strict):
    """The SGLang build the scheduler process runs: its version; whether its ``Envs`` declares
    ``SGLANG_ENABLE_FP8_LM_HEAD`` (the Ling-3.0 patch: stock 0.5.23 ignores the variable silently); whether
    the NEXTN draft class has ``set_lm_head_from_target``. None where the process could not tell."""

    version: str | None
    declares_fp8_lm_head: bool | None
    nextn_has_set_lm_head_from_target: bool | None


@dataclass(frozen=True)
class LmHead(_Strict):
    """One model's LM head as loaded: module and ``quant_method`` classes, the weight's dtype and shape, and
    whether FP8 scales are attached (a head read as BF16 while holding FP8 codes is the integration trap)."""

    module_class: str | None
    quant_method: str | None
    weight_dtype: str | None
    weight_shape: list[int] | None
    has_weight_scale: bool
    has_input_scale: bool


@dataclass(frozen=True)
class Moe(_Strict):
    """A model's MoE layers, counted by quant method class and by the runner backend each layer really got
    (counts rather than one entry per layer, so the document stays a few KB)."""

    layers: int
    quant_methods: dict[str, int]
    runner_backends: dict[str, int]


@dataclass(frozen=True)
class ModelInfo(_Strict):
    """What the plugin saw of one loaded model, the target or the draft: its class, LM head and MoE layers."""

    model_class: str | None
    lm_head: LmHead | None
    moe: Moe | None


@dataclass(frozen=True)
class LmHeadSharing(_Strict):
    """How the draft got its LM head, as the draft worker's set-up left it (``worker``: its class).

    DSpark shares the target's module by construction unless the draft declares ``uses_own_vocab_modules``
    (then its own head is expected, ``shared_module`` False): ``own_vocab_modules`` tells the two apart."""

    shared_module: bool | None
    shared_weight: bool | None
    remedy_applied: bool
    worker: str | None = None
    own_vocab_modules: bool | None = None  # DSpark: the draft model's uses_own_vocab_modules
    shared_embed: bool | None = None  # DSpark: the draft's embed_tokens is the target's module
    # the worker (--speculative-token-map) or the draft (its own hot_token_id) narrows the head to these
    # many hot tokens: SGLang then gives the draft a sliced copy, never the module (0 when the count is
    # unreadable); None when neither does
    hot_token_count: int | None = None


@dataclass(frozen=True)
class Attestation(_Strict):
    """Schema ``spark-validate.attestation/v2``: one scheduler process's account of its loaded models."""

    schema: Literal["spark-validate.attestation/v2"]
    written_at: str
    writer: Writer
    process: Process
    server: Server
    sglang: SGLangInfo
    env: dict[str, str | None]
    target: ModelInfo | None
    draft: ModelInfo | None
    lm_head: LmHeadSharing
    hooks: dict[str, HookStatus]
    errors: list[str] = field(default_factory=list)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def to_json(doc: Attestation) -> bytes:
    """The document as written: indented JSON, keys in definition order, one trailing newline."""
    return (json.dumps(dataclasses.asdict(doc), indent=2) + "\n").encode()
