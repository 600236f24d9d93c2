"""``/weights_checker`` checksums for the simulated model, following SGLang's weight checker.

Only the entries that matter for the LM-head question are modelled, plus a few others so that the reply is
not trivially small. A shared module gives ``draft.lm_head.*`` the same names and checksums as the
target's ``lm_head.*``; weight-only sharing of a per-tensor FP8 head gives the draft only
``draft.lm_head.weight`` (same raw bytes) and no ``weight_scale``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from validator.sim.scenarios import Scenario


def _chk(seed: int, what: str) -> str:
    return hashlib.sha256(f"{seed}:{what}".encode()).hexdigest()[:16]


def overall_checksum(checksums: dict[str, str]) -> str:
    """SGLang's ``overall_checksum``: sha256 over sorted name and value pairs."""
    h = hashlib.sha256()
    for name in sorted(checksums):
        h.update(name.encode())
        h.update(checksums[name].encode())
    return h.hexdigest()


def _target(scenario: Scenario, seed: int) -> dict[str, str]:
    out = {
        "model.word_embeddings.weight": _chk(seed, "embed"),
        "model.layers.0.attention.query_key_value.weight": _chk(seed, "l0.qkv"),
        "model.layers.1.mlp.experts.w13_weight": _chk(seed, "l1.w13"),
        "model.layers.1.mlp.experts.w2_weight": _chk(seed, "l1.w2"),
        "model.norm.weight": _chk(seed, "norm"),
        "lm_head.weight": _chk(seed, f"lm_head.weight:{scenario.head_dtype}"),
    }
    if scenario.fp8_head:
        out["lm_head.weight_scale"] = _chk(seed, "lm_head.weight_scale")
    return out


def _draft(scenario: Scenario, seed: int, target: dict[str, str]) -> dict[str, str]:
    if scenario.dspark:
        # LingDSparkModel (srt/models/dspark.py): a dense 5-layer BF16 draft whose embedding and LM head are
        # the target's modules (attach_shared_modules), so their entries repeat the target's.
        out = {
            f"model.layers.{i}.self_attn.qkv_proj.weight": _chk(seed, f"dspark.l{i}.qkv") for i in range(5)
        }
        out["model.norm.weight"] = _chk(seed, "dspark.norm")
        out["model.embed_tokens.weight"] = target["model.word_embeddings.weight"]
        out.update({k: v for k, v in target.items() if k.startswith("lm_head.")})
        return out
    out = {
        "model.word_embeddings.weight": target["model.word_embeddings.weight"],
        "model.eh_proj.weight": _chk(seed, "draft.eh_proj"),
        "model.enorm.weight": _chk(seed, "draft.enorm"),
        "model.hnorm.weight": _chk(seed, "draft.hnorm"),
        "model.decoder.mlp.experts.w13_weight": _chk(seed, "draft.w13"),
        "model.final_layernorm.weight": _chk(seed, "draft.final_norm"),
        "lm_head.weight": target["lm_head.weight"],
    }
    if scenario.module_shared:
        out.update({k: v for k, v in target.items() if k.startswith("lm_head.")})
    return out


def _parallelism(role: str) -> dict[str, Any]:
    return {"role": role, "tp_rank": 0, "tp_size": 1, "dp_rank": 0, "dp_size": 1, "pp_rank": 0,
            "pp_size": 1, "rank": 0, "size": 1}  # fmt: skip


def reply(scenario: Scenario, seed: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for a ``/weights_checker`` request."""
    action = body.get("action", "checksum")
    selector = body.get("selector", "target")
    if selector not in ("target", "draft", "all"):
        return 400, {
            "success": False,
            "message": f"invalid selector {selector!r}; expected 'target', 'draft', or 'all'",
        }
    if action != "checksum":
        return 200, {"success": True, "message": f"{action} done"}
    if selector == "draft" and not scenario.spec:
        return 400, {"success": False, "message": "no draft worker: speculative decoding is off"}
    target = _target(scenario, seed)
    merged: dict[str, str] = {}
    infos: list[dict[str, Any]] = []
    if selector in ("target", "all"):
        merged.update(target)
        infos.append(_parallelism("target"))
    if selector in ("draft", "all") and scenario.spec:
        merged.update({f"draft.{k}": v for k, v in _draft(scenario, seed, target).items()})
        infos.append(_parallelism("draft"))
    rank: dict[str, Any] = {
        "checksums": merged,
        "per_gpu_checksum": overall_checksum(merged),
        "parallelism_info": infos,
    }
    return 200, {
        "success": True,
        "message": "checksum done",
        "ranks": [rank],
        "per_engine_checksum": overall_checksum({"0": rank["per_gpu_checksum"]}),
    }
