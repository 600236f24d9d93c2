"""The table-driven parser on its own: table loading, argparse rules, SGLang's type functions, --config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.launch_recipe import RECIPE_ARGV
from validator.errors import InputError
from validator.sources.sglang.cli import parse_argv, parse_server_args
from validator.sources.sglang.cli_table import load_table
from validator.sources.sglang.config import merge_config

M = ["--model-path", "/m"]


def _reason(argv: list[str], **kw: object) -> str:
    with pytest.raises(InputError) as info:
        parse_argv(argv, origin="--launch-cmd", **kw)  # type: ignore[arg-type]
    assert info.value.where == "--launch-cmd" or info.value.where.endswith(".yaml")
    return info.value.reason


def test_table_is_sglang_0_5_23_and_complete() -> None:
    table = load_table()
    assert table.sglang_version == "0.5.23"
    assert table.allow_abbrev and table.prefix_chars == "-"
    assert len(table.actions) == 532  # 531 server options + -h/--help
    backend = table.by_option["--moe-runner-backend"]
    assert (
        backend.choices is not None and "humming" in backend.choices and "flashinfer_mxfp4" in backend.choices
    )
    assert table.by_option["--tp-size"] is table.by_option["--tensor-parallel-size"]
    assert load_table() is table  # cached


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d["actions"][3].pop("dest"), "actions[3].dest: Field required"),
        (
            lambda d: d["actions"][3].update(option_strings="--x"),
            "actions[3].option_strings: Input should be",
        ),
        (lambda d: d["actions"][3].update(dest=5), "actions[3].dest: Input should be a valid string"),
        (lambda d: d["actions"][3].update(required="maybe"), "actions[3].required: Input should be a valid"),
        (lambda d: d.pop("parser"), "parser: Field required"),
    ],
)
def test_a_generated_table_that_is_not_one_is_said_in_one_line(tmp_path: Path, edit: Any, said: str) -> None:
    """A table generated from another build (``spark-validate sglang-table``) is read with the shipped
    table's own schema: a missing or mistyped field is named (it was a bare ``KeyError`` text such as
    ``'dest'``, or a string taken for a list of options, one per character)."""
    doc = _shipped()
    edit(doc)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_table(path)
    assert str(info.value).startswith(f"{path}: not a valid SGLang CLI table: {said}")
    assert "\n" not in str(info.value)


def _shipped() -> Any:
    from validator.sources.sglang.cli_table import _DATA_DIR, TABLE_RESOURCE

    return json.loads((_DATA_DIR / TABLE_RESOURCE).read_text())


def test_table_matches_the_shared_reference_dump() -> None:
    """Independent cross-check against the project's reference dump of SGLang 0.5.23's real parser (all
    531 argparse actions, dumped from ``ServerArgs.add_cli_args`` with CPU torch), kept in the checkout so
    that the check runs wherever the checkout lives (tests/data/sglang/README.md)."""
    ref_path = Path(__file__).resolve().parent / "data" / "sglang" / "sglang-0.5.23-cli-spec.json"
    ref = {tuple(a["option_strings"]): a for a in json.loads(ref_path.read_text())["actions"]}
    ours = {a.option_strings: a for a in load_table().actions}
    assert set(ref) == set(ours) - {("-h", "--help")}
    for key, a in ref.items():
        assert (ours[key].dest, ours[key].nargs, ours[key].type) == (a["dest"], a["nargs"], a["type"]), key
        assert ours[key].default == a["default"], key


def test_recipe_parses_to_the_values_the_checks_need() -> None:
    args, explicit = parse_server_args(RECIPE_ARGV, origin="--launch-cmd")
    assert args["moe_runner_backend"] == "humming"
    assert args["speculative_algorithm"] == "NEXTN"
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"]) == (3, 1)
    assert args["speculative_num_draft_tokens"] == 4
    assert args["mem_fraction_static"] == 0.6 and args["port"] == 30000
    assert args["enable_metrics"] is True and args["enable_fp32_lm_head"] is False
    assert args["speculative_moe_runner_backend"] is None  # default, not given
    assert "enable_fp32_lm_head" not in explicit and "moe_runner_backend" in explicit


def test_abbreviation_equals_and_alias() -> None:
    args, explicit = parse_server_args(
        [*M, "--moe-runner=humming", "--tensor-parallel-size", "2", "--enable-fp32"], origin="x"
    )
    assert args["moe_runner_backend"] == "humming" and args["tp_size"] == 2
    assert args["enable_fp32_lm_head"] is True and "enable_fp32_lm_head" in explicit


def test_argparse_messages() -> None:
    assert (
        _reason([*M, "--tp-size", "x"]) == "argument --tp-size/--tensor-parallel-size: invalid int value: 'x'"
    )
    assert _reason([*M, "--nope"]) == "unrecognized arguments: --nope"
    assert _reason([*M, "--cuda-graph-max", "1"]).startswith(
        "ambiguous option: --cuda-graph-max could match "
    )
    assert _reason([*M, "--moe-runner-backend", "x"]).startswith(
        "argument --moe-runner-backend: invalid choice: 'x' (choose from 'auto', "
    )
    assert _reason(["--port", "1"]) == "the following arguments are required: --model-path/--model"
    assert _reason([*M, "--port"]) == "argument --port: expected one argument"
    assert _reason([*M, "--enable-metrics=1"]) == "argument --enable-metrics: ignored explicit argument '1'"
    assert "--help" in _reason([*M, "-h"])


def test_ambiguity_is_reported_before_later_value_errors() -> None:
    # argparse classifies every word first: the ambiguous prefix wins over the earlier bad int
    assert _reason([*M, "--port", "x", "--cuda-graph-max", "1"]).startswith("ambiguous option")


def test_sglang_type_functions() -> None:
    args, _ = parse_server_args([*M, "--context-length", "25.6k", "--max-total-tokens", "2Ki"], origin="x")
    assert (args["context_length"], args["max_total_tokens"]) == (25600, 2048)
    assert "Decimals are not allowed" in _reason([*M, "--context-length", "1.5Mi"])
    assert "Invalid JSON list" in _reason([*M, "--forward-hooks", "[NaN]"])
    args, _ = parse_server_args([*M, "--forward-hooks", '[{"a": 1}]'], origin="x")
    assert args["forward_hooks"] == [{"a": 1}]
    assert _reason([*M, "--extra-metric-labels", "{"]).endswith("invalid loads value: '{'")
    args, _ = parse_server_args([*M, "--quantization-param-path", "None"], origin="x")
    assert args["quantization_param_path"] is None
    assert "unknown phase 'warmup'" in _reason([*M, "--cuda-graph-config", '{"warmup": {}}'])
    args, _ = parse_server_args([*M, "--cuda-graph-config", '{"decode": {"max_bs": 8}}'], origin="x")
    assert args["cuda_graph_config"] == {"decode": {"max_bs": 8}}


def test_nargs_and_special_actions() -> None:
    args, explicit = parse_server_args(
        [
            *M,
            "--gc-threshold",
            "1",
            "2",
            "--no-enable-tf32-matmul",
            "--model-checksum",
            "--disable-cuda-graph",
        ],
        origin="x",
    )
    assert args["gc_threshold"] == [1, 2] and args["enable_tf32_matmul"] is False
    assert args["model_checksum"] == "" and args["disable_cuda_graph"] is True
    assert {"gc_threshold", "enable_tf32_matmul", "model_checksum"} <= explicit
    parsed = parse_argv([*M, "--disable-cuda-graph"], origin="x")
    assert any("deprecated" in w for w in parsed.warnings)
    args, _ = parse_server_args([*M, "--lora-paths", "a", '{"lora_name": "n", "lora_path": "p"}'], origin="x")
    assert args["lora_paths"] == ["a", {"lora_name": "n", "lora_path": "p"}]
    assert "lora_name" in _reason([*M, "--lora-paths", '{"x": 1}'])


def test_config_merge_precedence_and_spelling(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "model-path: /cfg\nport: 31000\nenable-metrics: true\nenable-fp32-lm-head: false\n"
        "gc-threshold: [5, 6]\npreferred-sampling-params: {temperature: 0.5}\n"
    )
    parsed = parse_argv(["--config", "c.yaml", "--port", "32000"], origin="x", base_dir=tmp_path)
    assert parsed.config_file == tmp_path / "c.yaml"
    assert parsed.args["port"] == 32000  # the command line wins over the file
    assert parsed.args["model_path"] == "/cfg" and parsed.args["enable_metrics"] is True
    assert parsed.args["enable_fp32_lm_head"] is False and parsed.args["gc_threshold"] == [5, 6]
    assert parsed.args["preferred_sampling_params"] == {"temperature": 0.5}
    assert parsed.argv[:2] == ["--model-path", "/cfg"] and parsed.argv[-2:] == ["--port", "32000"]
    assert {"model_path", "port", "enable_metrics"} <= parsed.explicit


def test_config_keys_are_used_verbatim_as_flags(tmp_path: Path) -> None:
    """SGLang writes ``--{key}`` as spelled: an underscore key is not the flag (checked against the real
    parser in test_sglang_parity's 'config underscore key')."""
    (tmp_path / "c.yaml").write_text("mem_fraction_static: 0.5\n")
    assert (
        _reason(["--config", str(tmp_path / "c.yaml"), *M])
        == "unrecognized arguments: --mem_fraction_static 0.5"
    )


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("port: [1\n")
    with pytest.raises(InputError) as info:
        merge_config(["--config", "bad.yaml"], origin="x", base_dir=tmp_path)
    assert info.value.where == str(tmp_path / "bad.yaml") and info.value.line is not None
    (tmp_path / "u.yaml").write_text("no-enable-tf32-matmul: true\n")
    assert "Unsupported config option" in _reason(["--config", str(tmp_path / "u.yaml"), *M])
    assert "Multiple config files" in _reason(["--config", "a.yaml", "--config", "b.yaml"])
    assert "No config file specified" in _reason([*M, "--config"])
    assert "Config file not found" in _reason([*M, "--config", str(tmp_path / "none.yml")])


def test_config_equals_form_is_ignored_like_sglang_but_warned(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("port: 31000\n")
    parsed = parse_argv([*M, f"--config={tmp_path / 'c.yaml'}"], origin="x")
    assert parsed.args["port"] == 30000 and parsed.config_file is None
    assert any("ignored by SGLang" in w for w in parsed.warnings)


def test_a_launch_of_many_arguments_is_refused_before_argparse_takes_quadratic_time(tmp_path: Path) -> None:
    """Red team 22: another user's unit with 100,000 ``--x`` words (400 KB, one exec's worth) held
    preflight past 300 s (32,000: 52 s), in argparse's search of the option indices; the same through a
    ``bash -c`` string's ``"$@"``. Past MAX_SERVER_ARGS words the launch is refused, in one short line;
    a --config file's words count too."""
    import time

    start = time.monotonic()
    with pytest.raises(InputError, match="20002 server arguments, more than the 4096 read"):
        parse_argv(["--model-path", "/m", *["--x"] * 20000], origin="unit")
    config = tmp_path / "c.yaml"
    config.write_text("cuda-graph-bs:\n" + "".join(f"  - {i}\n" for i in range(5000)))
    with pytest.raises(InputError, match="with the --config file's, more than the 4096 read"):
        parse_argv(["--model-path", "/m", "--config", str(config)], origin="unit")
    assert time.monotonic() - start < 20
