"""The attestation file the in-process plugin would write for the simulated server (schema v1).

Same shape and the same atomic write (temp file in the target directory, fsync, rename) as the real
plugin, so ``check`` reads the simulator's file exactly as it reads a real one. The broken trap shows as
the plugin sees it: draft head ``UnquantizedEmbeddingMethod`` over a ``float8_e4m3fn`` tensor without a
scale, ``shared_module`` false and ``shared_weight`` true.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from validator import __version__
from validator.sim.scenarios import DRAFT_CLASS, HIDDEN, MOE_LAYERS, TARGET_CLASS, VOCAB, Scenario
from validator.sim.server_args import SGLANG_VERSION

SCHEMA = "spark-validate.attestation/v1"
DEFAULT_PATH = Path("/tmp/spark-validate/attestation.json")


def _moe(scenario: Scenario, layers: int) -> dict[str, Any]:
    method = (
        "Mxfp4HummingMoEMethod" if scenario.moe_backend == "humming" else "Mxfp4FlashinferCutlassMoEMethod"
    )
    return {
        "layers": layers,
        "quant_methods": {method: layers},
        "runner_backends": {scenario.moe_backend: layers},
    }


def _head(fp8: bool, *, own_method: bool) -> dict[str, Any]:
    """``own_method``: the draft's own unquantized method sitting on whatever tensor it was given."""
    quantized = fp8 and not own_method
    return {
        "module_class": "ParallelLMHead",
        "quant_method": "Fp8LinearMethod" if quantized else "UnquantizedEmbeddingMethod",
        "weight_dtype": "float8_e4m3fn" if fp8 else "bfloat16",
        "weight_shape": [VOCAB, HIDDEN],
        "has_weight_scale": quantized,
        "has_input_scale": False,
    }


def build(scenario: Scenario, *, pid: int, start_time: float) -> dict[str, Any]:
    fp8 = scenario.fp8_head
    draft: dict[str, Any] | None = None
    if scenario.spec:
        draft = {
            "model_class": DRAFT_CLASS,
            "lm_head": _head(fp8, own_method=not scenario.module_shared),
            "moe": _moe(scenario, 1),
        }
    return {
        "schema": SCHEMA,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "writer": {"tool": "spark-validate", "version": __version__},
        "process": {
            "pid": pid,
            "start_time": start_time,
            "hostname": socket.gethostname(),
            "tp_rank": 0,
            "tp_size": 1,
        },
        "sglang": {
            "version": SGLANG_VERSION,
            "declares_fp8_lm_head": scenario.build_declares_fp8,
            "nextn_has_set_lm_head_from_target": scenario.build_shares_module,
        },
        "env": {
            "SGLANG_ENABLE_FP8_LM_HEAD": "1" if scenario.fp8_env else None,
            "SPARK_VALIDATE_SHARE_LM_HEAD": None,
            "SGLANG_PLUGINS": None,
            "HUMMING_CACHE_DIR": None,
            "HUMMING_TMP_DIR": None,
        },
        "target": {
            "model_class": TARGET_CLASS,
            "lm_head": _head(fp8, own_method=False),
            "moe": _moe(scenario, MOE_LAYERS),
        },
        "draft": draft,
        "lm_head": {
            "shared_module": scenario.module_shared,
            "shared_weight": scenario.spec,
            "remedy_applied": False,
        },
        "hooks": {"model_loaded": "ran", "init_lm_head": "ran" if scenario.spec else "not_reached"},
        "errors": [],
    }


def write(path: Path, document: dict[str, Any]) -> None:
    """Atomic replace: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=2, sort_keys=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
