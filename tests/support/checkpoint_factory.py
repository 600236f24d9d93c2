"""Write Ling-3.0-flash-like checkpoints for tests: one healthy default, one keyword per single mistake.

``small=True`` writes real tensors with the ``safetensors`` library (tiny shapes, real data).
``small=False`` writes the real shapes (LM head 157184 x 2560 BF16, 42 layers, hidden 2560) as headers
over sparse files, so no tensor data touches the disk: the reader must never need it.
Both are real safetensors files; sharded=True splits them and writes ``model.safetensors.index.json``.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from validator.sources.host.safetensors_header import DTYPE_BITS

REAL = {"hidden_size": 2560, "vocab_size": 157184, "num_hidden_layers": 42, "moe_intermediate_size": 768}
SMALL = {"hidden_size": 64, "vocab_size": 256, "num_hidden_layers": 3, "moe_intermediate_size": 32}
HEALTHY_SKIP = ("lm_head",)


def write_checkpoint(
    directory: Path | str,
    *,
    small: bool = True,
    lm_head_dtype: str = "BF16",
    lm_head_shape: Sequence[int] | None = None,
    with_lm_head: bool = True,
    with_nextn: bool = True,
    nextn_under_mtp: bool = False,
    num_nextn_predict_layers: int | None = 1,
    modules_to_not_convert: Sequence[str] | None = HEALTHY_SKIP,
    routed_experts_quant_method: str | None = "mxfp4",
    expert_dtype: str = "U8",
    quant_method: str = "fp8",
    architectures: Sequence[str] = ("BailingMoeV3ForCausalLM",),
    shards: int = 1,
    config_overrides: dict[str, Any] | None = None,
    config_text: str | None = None,
) -> Path:
    """Write a checkpoint into ``directory`` (created) and return it. Defaults are healthy."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    dims = SMALL if small else REAL
    h, v, n_layers, inter = (
        dims["hidden_size"],
        dims["vocab_size"],
        dims["num_hidden_layers"],
        dims["moe_intermediate_size"],
    )
    quant: dict[str, Any] = {
        "quant_method": quant_method,
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128],
    }
    if routed_experts_quant_method is not None:
        quant["routed_experts_quant_method"] = routed_experts_quant_method
    if modules_to_not_convert is not None:
        quant["modules_to_not_convert"] = list(modules_to_not_convert)
    config: dict[str, Any] = {
        "architectures": list(architectures),
        "model_type": "bailing_hybrid",
        "hidden_size": h,
        "vocab_size": v,
        "num_hidden_layers": n_layers,
        "moe_intermediate_size": inter,
        "num_experts": 512 if not small else 4,
        "num_experts_per_tok": 8 if not small else 2,
        "first_k_dense_replace": 1,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": quant,
    }
    if num_nextn_predict_layers is not None:
        config["num_nextn_predict_layers"] = num_nextn_predict_layers
    config.update(config_overrides or {})
    (d / "config.json").write_text(config_text if config_text is not None else json.dumps(config, indent=2))

    specs = _tensor_specs(h, v, n_layers, inter, lm_head_dtype, lm_head_shape, with_lm_head, expert_dtype)
    if with_nextn:
        prefix = "model.mtp.layers.0" if nextn_under_mtp else f"model.layers.{n_layers}"
        specs.update(_nextn_specs(prefix, h, inter, expert_dtype))
    _write_shards(d, specs, shards, real_data=small)
    return d


def _tensor_specs(
    h: int,
    v: int,
    n_layers: int,
    inter: int,
    lm_head_dtype: str,
    lm_head_shape: Sequence[int] | None,
    with_lm_head: bool,
    expert_dtype: str,
) -> dict[str, tuple[str, list[int]]]:
    specs: dict[str, tuple[str, list[int]]] = {"model.word_embeddings.weight": ("BF16", [v, h])}
    specs["model.layers.0.mlp.gate_proj.weight"] = ("F8_E4M3", [inter, h])
    for layer in range(1, min(n_layers, 3)):  # a few MoE layers are representative
        specs.update(_moe_specs(f"model.layers.{layer}", h, inter, expert_dtype))
    specs["model.norm.weight"] = ("BF16", [h])
    if with_lm_head:
        specs["lm_head.weight"] = (lm_head_dtype, list(lm_head_shape or [v, h]))
    return specs


def _moe_specs(prefix: str, h: int, inter: int, expert_dtype: str) -> dict[str, tuple[str, list[int]]]:
    packed = expert_dtype in ("U8", "I8")  # MXFP4: two 4-bit values per byte, K/2
    specs: dict[str, tuple[str, list[int]]] = {
        f"{prefix}.attention.dense.weight": ("F8_E4M3", [h, h]),
        f"{prefix}.mlp.gate.weight": ("BF16", [2, h]),
        f"{prefix}.mlp.shared_experts.gate_proj.weight": ("F8_E4M3", [inter, h]),
    }
    for e in range(2):
        for proj, (out_dim, in_dim) in {
            "gate_proj": (inter, h),
            "up_proj": (inter, h),
            "down_proj": (h, inter),
        }.items():
            base = f"{prefix}.mlp.experts.{e}.{proj}"
            specs[f"{base}.weight"] = (expert_dtype, [out_dim, in_dim // 2 if packed else in_dim])
            specs[f"{base}.weight_scale_inv"] = ("U8", [out_dim, max(1, in_dim // 32)])
    return specs


def _nextn_specs(prefix: str, h: int, inter: int, expert_dtype: str) -> dict[str, tuple[str, list[int]]]:
    specs = {
        f"{prefix}.eh_proj.weight": ("F8_E4M3", [h, 2 * h]),
        f"{prefix}.enorm.weight": ("BF16", [h]),
        f"{prefix}.hnorm.weight": ("BF16", [h]),
        f"{prefix}.final_layernorm.weight": ("BF16", [h]),
        f"{prefix}.input_layernorm.weight": ("BF16", [h]),
    }
    specs.update(_moe_specs(prefix, h, inter, expert_dtype))
    return specs


def _write_shards(d: Path, specs: dict[str, tuple[str, list[int]]], shards: int, *, real_data: bool) -> None:
    names = list(specs)
    if shards <= 1:
        groups = {"model.safetensors": names}
    else:
        groups = {f"model-{i + 1:05d}-of-{shards:05d}.safetensors": names[i::shards] for i in range(shards)}
    for fname, group in groups.items():
        part = {n: specs[n] for n in group}
        if real_data:
            _save_real(d / fname, part)
        else:
            write_sparse_safetensors(d / fname, part)
    if shards > 1:
        weight_map = {n: f for f, group in groups.items() for n in group}
        index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
        (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def _save_real(path: Path, specs: dict[str, tuple[str, list[int]]]) -> None:
    """Real tensors through the safetensors library, from numpy arrays: ml_dtypes gives numpy the BF16 and
    FP8 dtypes, so a fixture needs no torch (torch is only for the trap experiment). Imported here: a
    dozen test modules import this one, and every xdist worker collects them all."""
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import save_file

    dtypes: dict[str, Any] = {
        "BF16": ml_dtypes.bfloat16,
        "F16": np.float16,
        "F32": np.float32,
        "F8_E4M3": ml_dtypes.float8_e4m3fn,
        "U8": np.uint8,
        "I8": np.int8,
    }
    tensors = {n: np.zeros(shape, dtype=dtypes[dt]) for n, (dt, shape) in specs.items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def write_sparse_safetensors(path: Path, specs: dict[str, tuple[str, list[int]]]) -> None:
    """A well-formed safetensors file whose data area is a hole: real-shape headers at no disk cost."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in specs.items():
        nbytes = math.prod(shape) * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the library pads headers to 8 bytes
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + offset)
