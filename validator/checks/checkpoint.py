"""Checkpoint check: does the model directory hold what the pack's recipe needs?

The architecture, an ``lm_head`` of the pack's dtype and shape listed in ``modules_to_not_convert`` (so
loading does not quantize it and the online FP8 head can), the NEXTN (MTP) layer's weights with
``num_nextn_predict_layers`` at least the pack's minimum (no draft without them), and MXFP4 routed
experts when the pack says so (what Humming runs).
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import CHECKPOINT, LAUNCH, Facts


@check.builtin("checkpoint.layout", "preflight", needs=("checkpoint",), remedies=("not_convert",))
def checkpoint_layout(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    ck = facts.checkpoint
    if ck is None:
        if CHECKPOINT in facts.errors:
            return check.errored(facts.errors[CHECKPOINT], [CHECKPOINT])
        path = facts.launch.settings.model_path if facts.launch is not None else None
        where = f"--model-path {path} is not a local checkpoint here" if path else "no --model-path"
        return check.errored(
            f"the checkpoint was not read: {where} and no --model-dir was given", [CHECKPOINT]
        )
    want = check.need(ctx.expect.checkpoint, "checkpoint")
    head = ck.tensors.get("lm_head.weight")
    ev: dict[str, Any] = {
        "model_dir": str(ck.model_dir),
        "architectures": ck.architectures,
        "num_nextn_predict_layers": ck.num_nextn_predict_layers,
        "nextn_tensor_count": ck.nextn_tensor_count,
        "lm_head": {"dtype": head.dtype, "shape": head.shape} if head else None,
        "modules_to_not_convert": ck.modules_to_not_convert,
        "routed_experts_mxfp4": ck.routed_experts_mxfp4,
    }
    problems: list[str] = []
    remedy: str | None = None  # the pack's default: use the published checkpoint unmodified
    if want.architecture not in ck.architectures:
        problems.append(f"architecture {ck.architectures}, expected {want.architecture}")
    if head is None:
        problems.append("no lm_head.weight tensor")
    else:
        if head.dtype != want.lm_head_dtype:
            problems.append(f"lm_head.weight is {head.dtype}, expected {want.lm_head_dtype}")
        if tuple(head.shape) != tuple(want.lm_head_shape):
            problems.append(f"lm_head.weight shape {head.shape}, expected {list(want.lm_head_shape)}")
    mtnc = ck.modules_to_not_convert
    if mtnc is None or not any(m.startswith("lm_head") or m.endswith(".lm_head") for m in mtnc):
        problems.append("lm_head is not listed in quantization_config.modules_to_not_convert")
        remedy = "not_convert"
    if (ck.num_nextn_predict_layers or 0) < want.min_nextn_layers:
        problems.append(
            f"num_nextn_predict_layers is {ck.num_nextn_predict_layers}, need >= {want.min_nextn_layers}"
        )
    if want.min_nextn_layers > 0 and ck.nextn_tensor_count == 0:
        problems.append("no NEXTN (MTP) layer weights in the safetensors files")
    if want.routed_experts == "mxfp4" and ck.routed_experts_mxfp4 is not True:
        problems.append("routed experts are not declared MXFP4 in quantization_config")
    if problems:
        return check.failed(
            "checkpoint does not match the recipe: " + "; ".join(problems), [CHECKPOINT], remedy, **ev
        )
    if want.min_nextn_layers > 0 and ck.nextn_tensor_count is None:
        return check.errored(
            "the NEXTN (MTP) layer's weights were not counted: no SGLang loader layout is known for "
            f"{', '.join(ck.architectures) or 'a checkpoint naming no architecture'}",
            [CHECKPOINT],
            **ev,
        )
    src = [CHECKPOINT]
    if facts.launch is not None:
        src.append(LAUNCH)
    return check.passed(
        f"{want.architecture} checkpoint: {want.lm_head_dtype} lm_head {list(want.lm_head_shape)} "
        "kept unquantized, "
        f"{ck.num_nextn_predict_layers} NEXTN layer(s), {want.routed_experts.upper()} routed experts",
        src,
        **ev,
    )
