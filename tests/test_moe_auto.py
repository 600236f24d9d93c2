"""``moe.backend`` says what ``--moe-runner-backend auto`` resolves to for the launch's own checkpoint
(issue 29, item 6), from its ``quantization_config``, or that it cannot be known; never both.

The case is ling-cookbook's SGLang INT4 cell (cited in tests/corpus/notebooks/README.md): no
``--moe-runner-backend``, an INT4 checkpoint. FAIL is right for the Humming recipe; the reason used to
say that 'auto' "picks flashinfer_mxfp4 for this checkpoint" whatever the checkpoint. SGLang 0.5.23's
``_bailing_moe_v3_overrides`` picks flashinfer_mxfp4 only for an FP8 checkpoint with MXFP4 routed
experts; INT4 MoE weights run Marlin kernels (sglang#36204).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.in_process import preflight_json_in_process
from tests.support.sglang_wheel import sglang_root
from tests.test_preflight import Server, _server

# ling-cookbook's SGLang INT4 cell (tests/corpus/notebooks/README.md cites it; the repository has no licence,
# so its shape is written here): the flags of its launch that decide moe.backend and the head.
CELL = (
    "python3 -m sglang.launch_server --model-path ~/models/Ling-3.0-flash-int4 "
    "--served-model-name ling-v3-flash-int4 --host 0.0.0.0 --port 30000 --mem-fraction-static 0.75 "
    "--max-running-requests 8 --tp-size 1 --chunked-prefill-size 8192 --allow-auto-truncate "
    "--tool-call-parser ling3 --reasoning-parser ling3 --context-length 262144 "
    "--speculative-algorithm NEXTN --max-mamba-cache-size 32 --enable-fp32-lm-head "
    "--disable-shared-experts-fusion"
)


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("auto"), "patched")


def _cell(server: Server, model: str | None = None) -> str:
    """The cell's command, its ``python3`` the test venv's (whose site holds the build)."""
    text = CELL.replace("python3 -m sglang.launch_server", f"{server.python} -m sglang.launch_server")
    return text if model is None else text.replace("~/models/Ling-3.0-flash-int4", model)


def _moe(server: Server, command: str) -> dict[str, Any]:
    rc, report, err = preflight_json_in_process(server.env, "--launch-cmd", command)
    assert rc == 78 and report, err  # the cell fails the Humming recipe whatever 'auto' resolves to
    return next(c for c in report["checks"] if c["id"] == "moe.backend")


def test_the_real_override_needs_fp8_with_mxfp4_experts() -> None:
    text = (sglang_root() / "srt" / "arg_groups" / "model_overrides" / "bailing_moe_v3.py").read_text()
    assert 'model_config.quantization != "fp8" or not model_config.is_fp4_experts' in text
    assert '{"moe_runner_backend": "flashinfer_mxfp4"}' in text


def test_the_cookbook_int4_cell_says_auto_is_unknown_without_the_checkpoint(patched: Server) -> None:
    moe = _moe(patched, _cell(patched))
    assert moe["status"] == "fail", moe
    assert "unknown" in moe["message"] and "flashinfer_mxfp4" not in moe["message"], moe["message"]
    assert moe["evidence"]["auto_resolves_to"] is None


def test_an_int4_checkpoint_resolves_auto_to_marlin(patched: Server, tmp_path: Path) -> None:
    int4 = write_checkpoint(tmp_path / "int4", quant_method="gptq", routed_experts_quant_method=None)
    moe = _moe(patched, _cell(patched, str(int4)))
    assert moe["status"] == "fail" and "picks marlin" in moe["message"], moe
    assert "flashinfer_mxfp4" not in moe["message"] and moe["evidence"]["auto_resolves_to"] == "marlin"


def test_the_mxfp4_checkpoint_resolves_auto_to_flashinfer_mxfp4(patched: Server) -> None:
    """The control: the recipe's own FP8 + MXFP4 checkpoint."""
    moe = _moe(patched, _cell(patched, str(patched.model)))
    assert moe["status"] == "fail" and "picks flashinfer_mxfp4" in moe["message"], moe
    assert "unknown" not in moe["message"]


def _compressed_tensors(num_bits: int, kind: str) -> dict[str, Any]:
    """A compressed-tensors ``quantization_config`` as llm-compressor writes it: one config group."""
    weights = {"num_bits": num_bits, "type": kind, "symmetric": True, "strategy": "group", "group_size": 128}
    group = {"targets": ["Linear"], "weights": weights, "input_activations": None}
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": group},
    }


@pytest.mark.parametrize(
    ("num_bits", "kind", "resolves_to"),
    [(4, "int", "marlin"), (8, "int", None), (4, "float", None)],
    ids=["w4a16", "w8a16", "fp4"],
)
def test_a_compressed_tensors_checkpoint_resolves_auto_by_its_weight_bits(
    patched: Server, tmp_path: Path, num_bits: int, kind: str, resolves_to: str | None
) -> None:
    """compressed-tensors names no precision in its quant_method: its config groups' weights decide. 4-bit
    integers (W4A16) run Marlin MoE kernels; 8-bit integers or 4-bit floats (NVFP4) are not guessed."""
    ckpt = write_checkpoint(
        tmp_path / "ct",
        routed_experts_quant_method=None,
        config_overrides={"quantization_config": _compressed_tensors(num_bits, kind)},
    )
    moe = _moe(patched, _cell(patched, str(ckpt)))
    assert moe["evidence"]["auto_resolves_to"] == resolves_to, moe
    if resolves_to is None:
        assert "quant_method compressed-tensors" in moe["message"] and "unknown" in moe["message"], moe
    else:
        assert f"picks {resolves_to}" in moe["message"], moe
