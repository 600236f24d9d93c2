"""Module inspection: turn a loaded model into the attestation's ``target``/``draft`` sections.

Pure functions over duck-typed torch modules, written against the attribute names SGLang 0.5.23 really
uses (``lm_head.quant_method``, ``lm_head.weight``, ``weight_scale``/``weight_scale_inv``,
``input_scale``, ``FusedMoE.quant_method.runner.runner_backend``), so the same code runs on the real
server and on the test suite's tiny models. Nothing is imported: torch is only touched through the
objects passed in, which keeps this importable (and testable) anywhere.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from validator.attestation.schema import LmHead, ModelInfo, Moe

# Quant methods under which SGLang's LogitsProcessor does a plain matmul with the raw weight
# (``should_apply_lm_head_quant_method`` returns False for them).
UNQUANTIZED_METHODS = frozenset({"UnquantizedEmbeddingMethod", "UnquantizedLinearMethod", "PackWeightMethod"})
_SCALE_NAMES = ("weight_scale", "weight_scale_inv")
_MOE_BASE = "FusedMoE"


def unwrap_lora(module: Any) -> Any:
    """The plain module behind a LoRA wrapper (SGLang's ``unwrap_lora_layer``: ``.base_layer``)."""
    base = getattr(module, "base_layer", None)
    return base if base is not None else module


def dtype_name(tensor: Any) -> str | None:
    """``torch.float8_e4m3fn`` -> ``float8_e4m3fn``; None when there is no tensor."""
    dtype = getattr(tensor, "dtype", None)
    if dtype is None:
        return None
    return str(dtype).removeprefix("torch.")


def _type_name(obj: Any) -> str | None:
    return None if obj is None else type(obj).__name__


def _has_tensor(module: Any, name: str) -> bool:
    return getattr(module, name, None) is not None


def lm_head_section(lm_head: Any) -> LmHead | None:
    """The attestation's ``lm_head`` record for one model's head; None when the model has none."""
    if lm_head is None:
        return None
    head = unwrap_lora(lm_head)
    weight = getattr(head, "weight", None)
    shape = getattr(weight, "shape", None)
    return LmHead(
        module_class=_type_name(head),
        quant_method=_type_name(getattr(head, "quant_method", None)),
        weight_dtype=dtype_name(weight),
        weight_shape=[int(d) for d in shape] if shape is not None else None,
        has_weight_scale=any(_has_tensor(head, n) for n in _SCALE_NAMES),
        has_input_scale=_has_tensor(head, "input_scale"),
    )


def is_moe_layer(module: Any) -> bool:
    """SGLang's MoE layers all derive from ``FusedMoE`` (``DeepEPMoE``, ``InklingSharedFusedMoE``, ...)."""
    return any(cls.__name__ == _MOE_BASE for cls in type(module).__mro__)


def runner_backend(layer: Any) -> str:
    """The MoE runner backend a layer really got: ``quant_method.runner.runner_backend`` (an enum whose
    value is the CLI name, e.g. ``humming``), else the MXFP4 methods' ``_dsv4_mxfp4_backend`` marker."""
    runner = getattr(getattr(layer, "quant_method", None), "runner", None)
    backend = getattr(runner, "runner_backend", None)
    if backend is not None:
        value = getattr(backend, "value", backend)
        return str(value)
    marker = getattr(layer, "_dsv4_mxfp4_backend", None)
    return str(marker) if marker else "unknown"


def moe_section(model: Any) -> Moe:
    """MoE layers counted by quant method class and runner backend (counts, not per-layer lists)."""
    methods: Counter[str] = Counter()
    backends: Counter[str] = Counter()
    layers = 0
    modules = getattr(model, "modules", None)
    for module in modules() if callable(modules) else ():
        if not is_moe_layer(module):
            continue
        layers += 1
        methods[_type_name(getattr(module, "quant_method", None)) or "None"] += 1
        backends[runner_backend(module)] += 1
    return Moe(layers=layers, quant_methods=dict(methods), runner_backends=dict(backends))


def model_section(model: Any) -> ModelInfo:
    """The attestation's ``target`` or ``draft`` record."""
    return ModelInfo(
        model_class=_type_name(model),
        lm_head=lm_head_section(getattr(model, "lm_head", None)),
        moe=moe_section(model),
    )


def sharing(target: Any, drafts: list[Any]) -> dict[str, bool | None]:
    """Whether every draft holds the target's LM-head module object, and its weight tensor. The module is
    what matters: a draft holding only the tensor reads FP8 codes without their scales."""
    t_head = unwrap_lora(getattr(target, "lm_head", None)) if target is not None else None
    heads = [unwrap_lora(getattr(d, "lm_head", None)) for d in drafts]
    if t_head is None or not heads or any(h is None for h in heads):
        return {"shared_module": None, "shared_weight": None}
    t_weight = getattr(t_head, "weight", None)
    return {
        "shared_module": all(h is t_head for h in heads),
        "shared_weight": t_weight is not None and all(getattr(h, "weight", None) is t_weight for h in heads),
    }


def hot_token_count(holders: list[Any]) -> int | None:
    """How many hot tokens the worker (SGLang's ``--speculative-token-map``) or a draft (its own
    ``hot_token_id``) narrowed the draft's head to: ``init_lm_head`` then gives the draft a sliced copy of
    the head's data instead of the module. 0 when one is set but its size is unreadable; None when none."""
    for holder in holders:
        hot = getattr(holder, "hot_token_id", None) if holder is not None else None
        if hot is None:
            continue
        try:
            shape = getattr(hot, "shape", None)
            return int(shape[0]) if shape is not None else len(hot)
        except (TypeError, ValueError, IndexError):
            return 0
    return None


def embed_shared(target: Any, drafts: list[Any]) -> bool | None:
    """Whether every draft's ``embed_tokens`` is the target's input-embedding module (DSpark shares both
    with ``attach_shared_modules``); None when either side has none to compare."""
    get = getattr(target, "get_input_embeddings", None)
    if not callable(get):
        get = getattr(getattr(target, "model", None), "get_input_embeddings", None)
    t_embed = unwrap_lora(get()) if callable(get) else None
    embeds = [unwrap_lora(getattr(d, "embed_tokens", None)) for d in drafts]
    if t_embed is None or not embeds or any(e is None for e in embeds):
        return None
    return all(e is t_embed for e in embeds)


def trap_summary(target: ModelInfo | None, draft: ModelInfo | None, shared_module: bool | None) -> str:
    """One phrase for the log line: is the FP8-head + MTP trap sprung?"""
    if draft is None:
        return "no draft"
    if shared_module:
        return "draft shares the target LM-head module"
    t_head = target.lm_head if target is not None else None
    d_head = draft.lm_head
    if t_head is None or d_head is None:
        return "draft has its own LM-head module"
    t_quant = t_head.quant_method not in UNQUANTIZED_METHODS
    d_quant = d_head.quant_method not in UNQUANTIZED_METHODS
    if t_quant and not d_quant and d_head.weight_dtype == t_head.weight_dtype:
        return "TRAP: draft reads the quantized head's codes under an unquantized method"
    return "draft has its own LM-head module"
