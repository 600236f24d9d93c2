from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from validator.errors import InputError
from validator.sources.host.checkpoint import nextn_layer_id, read_checkpoint


def test_healthy_small_checkpoint(tmp_path: Path) -> None:
    f = read_checkpoint(write_checkpoint(tmp_path / "m"))
    assert f.architectures == ["BailingMoeV3ForCausalLM"]
    assert (f.num_hidden_layers, f.num_nextn_predict_layers, f.hidden_size, f.vocab_size) == (3, 1, 64, 256)
    assert f.quant_method == "fp8" and f.modules_to_not_convert == ["lm_head"]
    assert f.routed_experts_mxfp4 is True
    assert f.tensors["lm_head.weight"].dtype == "BF16" and f.tensors["lm_head.weight"].shape == [256, 64]
    assert f.tensors["model.layers.3.eh_proj.weight"].dtype == "F8_E4M3"
    assert f.nextn_tensor_count == sum(1 for n in _all_names(f.model_dir) if n.startswith("model.layers.3."))
    assert f.nextn_tensor_count > 0 and f.tensor_count == len(_all_names(f.model_dir))
    assert f.files == ["model.safetensors"]


def _all_names(d: Path) -> list[str]:
    from safetensors import safe_open

    names: list[str] = []
    for p in sorted(d.glob("*.safetensors")):
        with safe_open(str(p), "np") as fh:
            names.extend(fh.keys())
    return names


def test_real_shapes_sharded_reads_only_needed_shards(tmp_path: Path) -> None:
    d = write_checkpoint(tmp_path / "big", small=False, shards=8)
    index = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
    nextn = sorted(n for n in index if n.startswith("model.layers.42."))
    spec = [n for n in nextn if re.search(r"\.(eh_proj|enorm|hnorm|final_layernorm)\.", n)]
    expert = min(n for n in index if re.match(r"model\.layers\.[12]\.mlp\.experts\.\d+\.\w+\.weight$", n))
    needed = {index[n] for n in ["lm_head.weight", *spec, nextn[0], expert]}
    unneeded = sorted(set(index.values()) - needed)
    assert unneeded, "the factory should spread tensors over more shards than the reader needs"
    for shard in unneeded:  # garbage in a shard we must not open
        (d / shard).write_bytes(b"\xff" * 16)
    f = read_checkpoint(d)
    assert f.tensors["lm_head.weight"].shape == [157184, 2560]
    assert f.tensors["lm_head.weight"].file == index["lm_head.weight"]
    assert f.tensor_count == len(index)
    assert f.nextn_tensor_count == sum(1 for n in index if n.startswith("model.layers.42."))
    assert len(f.files) == 8


def test_each_single_mistake_shows_in_facts(tmp_path: Path) -> None:
    f = read_checkpoint(write_checkpoint(tmp_path / "a", lm_head_dtype="F8_E4M3"))
    assert f.tensors["lm_head.weight"].dtype == "F8_E4M3"
    f = read_checkpoint(write_checkpoint(tmp_path / "b", with_nextn=False))
    assert f.nextn_tensor_count == 0 and not any(n.startswith("model.layers.3.") for n in f.tensors)
    f = read_checkpoint(write_checkpoint(tmp_path / "c", nextn_under_mtp=True))
    assert f.nextn_tensor_count == 0  # SGLang's loader skips model.mtp*: not a usable NEXTN layer
    f = read_checkpoint(write_checkpoint(tmp_path / "d", modules_to_not_convert=[]))
    assert f.modules_to_not_convert == []
    f = read_checkpoint(write_checkpoint(tmp_path / "e", modules_to_not_convert=None))
    assert f.modules_to_not_convert is None
    f = read_checkpoint(write_checkpoint(tmp_path / "f", routed_experts_quant_method=None))
    assert f.routed_experts_mxfp4 is False
    f = read_checkpoint(write_checkpoint(tmp_path / "g", expert_dtype="F8_E4M3"))
    assert f.routed_experts_mxfp4 is False  # config claims mxfp4, tensors say FP8
    f = read_checkpoint(write_checkpoint(tmp_path / "h", num_nextn_predict_layers=None))
    assert f.num_nextn_predict_layers is None and f.nextn_tensor_count > 0
    f = read_checkpoint(write_checkpoint(tmp_path / "i", with_lm_head=False))
    assert "lm_head.weight" not in f.tensors
    f = read_checkpoint(write_checkpoint(tmp_path / "j", lm_head_shape=[1000, 64]))
    assert f.tensors["lm_head.weight"].shape == [1000, 64]


def test_ignored_layers_take_precedence_like_fp8config(tmp_path: Path) -> None:
    d = write_checkpoint(tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["quantization_config"]["ignored_layers"] = ["model.layers.0.mlp"]
    (d / "config.json").write_text(json.dumps(cfg))
    assert read_checkpoint(d).modules_to_not_convert == ["model.layers.0.mlp"]


def test_nextn_layer_id_mirrors_sglang() -> None:
    assert nextn_layer_id(42) == 42 and nextn_layer_id(1) == 0


def test_invalid_config_json_names_file_and_line(tmp_path: Path) -> None:
    d = write_checkpoint(tmp_path / "m", config_text='{\n  "architectures": ["X"],\n  oops\n}')
    with pytest.raises(InputError) as ei:
        read_checkpoint(d)
    assert ei.value.where == str(d / "config.json") and ei.value.line == 3


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"num_hidden_layers": "42"}, "num_hidden_layers"),
        ({"architectures": "BailingMoeV3ForCausalLM"}, "architectures"),
        ({"quantization_config": ["fp8"]}, "quantization_config"),
    ],
)
def test_wrong_types_in_config(tmp_path: Path, overrides: dict[str, object], needle: str) -> None:
    d = write_checkpoint(tmp_path / "m", config_overrides=overrides)
    with pytest.raises(InputError, match=needle):
        read_checkpoint(d)


def test_missing_dir_config_and_shards(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        read_checkpoint(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=re.escape("config.json: missing")):
        read_checkpoint(tmp_path / "empty")
    d = write_checkpoint(tmp_path / "s", shards=2)
    index = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
    (d / index["lm_head.weight"]).unlink()
    with pytest.raises(InputError, match=re.escape("missing, but model.safetensors.index.json")):
        read_checkpoint(d)


def test_index_errors(tmp_path: Path) -> None:
    d = write_checkpoint(tmp_path / "s", shards=2)
    idx = d / "model.safetensors.index.json"
    doc = json.loads(idx.read_text())
    real_holder = doc["weight_map"]["lm_head.weight"]
    other = next(s for s in set(doc["weight_map"].values()) if s != real_holder)
    doc["weight_map"]["lm_head.weight"] = other
    idx.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=re.escape("does not hold 'lm_head.weight'")):
        read_checkpoint(d)
    doc["weight_map"]["lm_head.weight"] = "../escape.safetensors"
    idx.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="inside the model directory"):
        read_checkpoint(d)
    idx.write_text(json.dumps({"weight_map": ["x"]}))
    with pytest.raises(InputError, match="weight_map must map"):
        read_checkpoint(d)
    idx.write_text("{not json")
    with pytest.raises(InputError, match=re.escape("index.json:1: invalid JSON")):
        read_checkpoint(d)


def test_corrupt_single_shard_is_input_error(tmp_path: Path) -> None:
    d = write_checkpoint(tmp_path / "m")
    (d / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(InputError, match=r"model\.safetensors: truncated"):
        read_checkpoint(d)


def test_the_layout_is_the_loader_of_the_checkpoints_own_architecture(tmp_path: Path) -> None:
    """The NEXTN layer and the routed experts are found where SGLang's Bailing V3 loader finds them
    only in a Bailing V3 checkpoint: the same names under another architecture are not counted (the
    experts are then judged by quantization_config alone), never counted with Ling's layout."""
    bailing = read_checkpoint(write_checkpoint(tmp_path / "b"))
    assert bailing.nextn_tensor_count is not None and bailing.nextn_tensor_count > 0
    expert = next(n for n in bailing.tensors if ".mlp.experts." in n)
    assert bailing.tensors[expert].dtype in ("U8", "I8")
    other = read_checkpoint(write_checkpoint(tmp_path / "o", architectures=("AcmeMoeForCausalLM",)))
    assert other.nextn_tensor_count is None
    assert not any(".mlp.experts." in n or n.startswith("model.layers.3.") for n in other.tensors)
    assert other.routed_experts_mxfp4 is True  # as quantization_config declares: no expert was sampled
    fp8 = read_checkpoint(
        write_checkpoint(tmp_path / "f", architectures=("AcmeMoeForCausalLM",), expert_dtype="F8_E4M3")
    )
    assert fp8.routed_experts_mxfp4 is True  # its expert weights are not named here: the config decides
