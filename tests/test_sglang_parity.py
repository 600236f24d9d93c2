"""Parity with SGLang 0.5.23's real parser: our table replay must accept, reject and value exactly as
``prepare_server_args`` does. All cases go through one subprocess of the SGLang venv (one import of torch).

The interpreter is ``$SPARK_VALIDATE_SGLANG_PYTHON`` (default ``.venv-sglang/bin/python``, built by
``scripts/setup_sglang_env.sh``). Missing: skipped locally, a failure under CI=true.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.launch_recipe import RECIPE_ARGV
from tests.support.prerequisite import missing
from validator.errors import InputError
from validator.sources.sglang.cli import parse_argv
from validator.sources.sglang.cli_table import load_table

REPO = Path(__file__).resolve().parents[1]
SGLANG_PYTHON = Path(os.environ.get("SPARK_VALIDATE_SGLANG_PYTHON", REPO / ".venv-sglang" / "bin" / "python"))

RECIPE = RECIPE_ARGV
M = ["--model-path", "/m"]

# (name, argv, {config file name: YAML text})
CASES: list[tuple[str, list[str], dict[str, str]]] = [
    ("recipe", RECIPE, {}),
    ("minimal", M, {}),
    ("model alias", ["--model", "/m"], {}),
    ("missing model", ["--port", "1"], {}),
    ("empty", [], {}),
    ("equals forms", ["--model-path=/m", "--port=31000", "--moe-runner-backend=humming"], {}),
    ("abbrev unique", [*M, "--moe-runner", "humming", "--mem-frac", "0.5"], {}),
    ("abbrev ambiguous", [*M, "--cuda-graph-max", "8"], {}),
    ("abbrev ambiguous spec", [*M, "--speculative-draft", "x"], {}),
    ("abbrev equals", [*M, "--speculative-num-st=5"], {}),
    ("bad int", [*M, "--tp-size", "x"], {}),
    ("alias int", [*M, "--tensor-parallel-size", "2"], {}),
    ("int underscores", [*M, "--port", "30_001"], {}),
    ("bad float", [*M, "--mem-fraction-static", "lots"], {}),
    ("float exp", [*M, "--mem-fraction-static", "6e-1"], {}),
    ("bad choice", [*M, "--moe-runner-backend", "humm"], {}),
    ("int choice", [*M, "--log-requests-level", "2"], {}),
    ("int choice bad", [*M, "--log-requests-level", "7"], {}),
    ("store_true explicit arg", [*M, "--enable-metrics=yes"], {}),
    ("store_true twice", [*M, "--enable-metrics", "--enable-metrics"], {}),
    ("unknown flag", [*M, "--enable-fp8-lm-head"], {}),
    ("stray positional", [*M, "extra"], {}),
    ("missing value", [*M, "--port"], {}),
    ("value looks like flag", [*M, "--served-model-name", "--port", "1"], {}),
    ("negative int", [*M, "--port", "-1"], {}),
    ("nargs plus", [*M, "--gc-threshold", "1", "2", "3"], {}),
    ("nargs plus empty", [*M, "--gc-threshold", "--port", "1"], {}),
    ("nargs star empty", [*M, "--uvicorn-access-log-exclude-prefixes"], {}),
    ("nargs optional const", [*M, "--model-checksum"], {}),
    ("human int", [*M, "--context-length", "256k", "--max-total-tokens", "1Mi"], {}),
    ("human int bad", [*M, "--context-length", "1.5Ki"], {}),
    ("json loads bad", [*M, "--preferred-sampling-params", "{nope"], {}),
    ("json loads", [*M, "--preferred-sampling-params", '{"temperature": 0.6}'], {}),
    ("boolean optional no", [*M, "--no-enable-tf32-matmul"], {}),
    ("boolean optional abbrev", [*M, "--no-enable-tf32"], {}),
    ("deprecated store true", [*M, "--disable-cuda-graph"], {}),
    ("cuda graph backend retired", [*M, "--cuda-graph-backend-decode", "tc_piecewise"], {}),
    ("last wins", [*M, "--port", "1", "--port", "2"], {}),
    ("help", [*M, "--help"], {}),
    # a retired valued flag (DeprecatedStoreConstAction with nargs=None and choices) still takes its value
    ("retired valued flag", [*M, "--monokernel-backend", "amd"], {}),
    ("retired valued flag equals", [*M, "--monokernel-backend=amd"], {}),
    ("retired valued flag bad choice", [*M, "--monokernel-backend", "x"], {}),
    ("retired valued flag no value", [*M, "--monokernel-backend"], {}),
    ("retired valued flag abbrev", [*M, "--monokernel", "amd", "--port", "1"], {}),
    ("retired valued flag in config", ["--config", "c.yaml", *M], {"c.yaml": "monokernel-backend: amd\n"}),
    # prepare_server_args sets up logging from --log-level before ServerArgs: a bad level stops the launch
    ("log level unknown", [*M, "--log-level", "verbose"], {}),
    ("log level not a level", [*M, "--log-level", "basic_format"], {}),
    ("log level not a number", [*M, "--log-level", "getLogger"], {}),
    ("log level any case", [*M, "--log-level", "WARN"], {}),
    ("log level from config", ["--config", "c.yaml", *M], {"c.yaml": "log-level: loud\n"}),
    # choices printed in another order than the table's (the last choice differs)
    ("choice order", [*M, "--sampling-backend", "FLASHINFER"], {}),
    # "--" ends the options: what follows is a positional, which the server refuses
    ("double dash", [*M, "--", "--port", "1"], {}),
    ("double dash as value", [*M, "--served-model-name", "--"], {}),
    ("negative float", [*M, "--mem-fraction-static", "-.5"], {}),
    ("negative exponent is a flag", [*M, "--mem-fraction-static", "-1e3"], {}),
    ("value with equals dash", [*M, "--served-model-name=-x"], {}),
    ("empty equals value", [*M, "--port="], {}),
    # SGLang's LoRAPathAction fails with json's error or an assertion, not an argparse message
    ("lora json without keys", [*M, '--lora-paths={"a":1}'], {}),
    ("lora bad json", [*M, "--lora-paths", "{nope}"], {}),
    ("lora json and plain", [*M, "--lora-paths", '{"lora_name":"a","lora_path":"/p"}', "b"], {}),
    # json_list_type is orjson: a number too large for a double is an error there, inf in json
    ("json list huge float", [*M, "--sidecar-args", "1e400"], {}),
    ("json list huge float inside", [*M, "--forward-hooks", "[1e400]"], {}),
    ("json list tiny float", [*M, "--sidecar-args", "[1e-400, -0.0, 2.5]"], {}),
    ("nargs plus repeated", [*M, "--cuda-graph-bs", "1", "--cuda-graph-bs", "2", "4"], {}),
    (
        "config basic",
        ["--config", "c.yaml"],
        {"c.yaml": "model-path: /m\nport: 31000\nenable-metrics: true\n"},
    ),
    (
        "config cli wins",
        ["--config", "c.yaml", "--port", "32000"],
        {"c.yaml": "model-path: /cfg\nport: 31000\nmoe-runner-backend: humming\n"},
    ),
    ("config underscore key", ["--config", "c.yaml", *M], {"c.yaml": "mem_fraction_static: 0.5\n"}),
    ("config underscore required", ["--config", "c.yaml"], {"c.yaml": "model_path: /m\n"}),
    ("config null value", ["--config", "c.yaml", *M], {"c.yaml": "tokenizer-path: null\nport: 0x10\n"}),
    ("config list", ["--config", "c.yml", *M], {"c.yml": "gc-threshold: [1, 2]\nenable-metrics: false\n"}),
    ("config bad choice", ["--config", "c.yaml", *M], {"c.yaml": "moe-runner-backend: nope\n"}),
    ("config wrong suffix", ["--config", "c.json", *M], {"c.json": "{}"}),
    ("config missing", ["--config", "absent.yaml", *M], {}),
    ("config unsupported", ["--config", "c.yaml", *M], {"c.yaml": "enable-tf32-matmul: true\n"}),
    ("config not a mapping", ["--config", "c.yaml", *M], {"c.yaml": "- a\n- b\n"}),
    ("config equals form", [*M, "--config=c.yaml"], {"c.yaml": "port: 31000\n"}),
    ("config empty name", [*M, "--config", ""], {}),
    ("config empty name, a later error", [*M, "--config", "", "--moe-runner-backend", "nope"], {}),
    ("config name too long", [*M, "--config", "c" * 300 + ".yaml"], {}),
]

_RUNNER = r"""
import contextlib, io, json, sys
real_stdout = sys.stdout
from sglang.srt.server_args import prepare_server_args
out = []
for argv in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            sa = prepare_server_args(argv)
        fields = type(sa).__struct_fields__
        out.append({"ok": True, "values": {k: getattr(sa, k) for k in fields}})
    except SystemExit as exc:
        lines = [l for l in err.getvalue().splitlines() if ": error: " in l]
        msg = lines[-1].split(": error: ", 1)[1] if lines else ""
        out.append({"ok": False, "kind": "exit%s" % exc.code, "message": msg})
    except Exception as exc:
        out.append({"ok": False, "kind": type(exc).__name__, "message": str(exc)})
real_stdout.write(json.dumps(out, default=repr))
"""


def _sglang_python() -> Path:
    if not SGLANG_PYTHON.exists():
        missing(f"{SGLANG_PYTHON} missing (bash scripts/setup_sglang_env.sh .venv-sglang)")
    return SGLANG_PYTHON


@pytest.fixture(scope="module")
def real_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    python = _sglang_python()
    work = tmp_path_factory.mktemp("parity")
    # One folder per case, so that every case can use the same relative config name.
    argvs: list[list[str]] = []
    for i, (_, argv, files) in enumerate(CASES):
        folder = work / f"case{i}"
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        argvs.append([str(folder / a) if a in files or a == "absent.yaml" else a for a in argv])
    proc = subprocess.run(
        [str(python), "-c", _RUNNER],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=240,  # SGLang's import with torch, on a loaded 2-core CI box
        cwd=work,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return work, json.loads(proc.stdout)


def _jsonish(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_parity_with_prepare_server_args(index: int, real_results: tuple[Path, list[dict[str, Any]]]) -> None:
    work, results = real_results
    name, argv, files = CASES[index]
    real = results[index]
    folder = work / f"case{index}"
    argv = [str(folder / a) if a in files or a == "absent.yaml" else a for a in argv]
    try:
        ours = parse_argv(argv, origin="--launch-cmd")
    except InputError as exc:
        assert not real["ok"], f"{name}: we reject ({exc}) but SGLang accepts"
        assert exc.where == "--launch-cmd" or exc.where.endswith((".yaml", ".yml"))
        if real["kind"] == "exit2":  # an argparse error: the very message argparse prints
            assert exc.reason == real["message"] or _same_choice_error(exc.reason, real["message"]), name
        elif real["kind"] == "exit0":
            assert "--help" in exc.reason
        else:  # SGLang's config merger raises ValueError: same text, but not an argparse exit
            assert exc.reason == real["message"], name
        return
    assert real["ok"], f"{name}: we accept but SGLang rejects with {real['kind']}: {real['message']}"
    for dest in ours.explicit:
        if dest in real["values"]:
            assert _jsonish(ours.args[dest]) == real["values"][dest], f"{name}: {dest}"
    # untouched defaults agree too (a sample that covers each type)
    for dest in ("port", "mem_fraction_static", "max_prefill_tokens", "moe_runner_backend", "enable_metrics"):
        assert _jsonish(ours.args[dest]) == real["values"][dest], f"{name}: {dest}"


def _same_choice_error(ours: str, theirs: str) -> bool:
    """Choices held in a Python set print in per-process order; compare the listed choices as sets."""
    head_o, _, tail_o = ours.partition("(choose from ")
    head_t, _, tail_t = theirs.partition("(choose from ")
    listed_o = sorted(tail_o.removesuffix(")").split(", "))
    listed_t = sorted(tail_t.removesuffix(")").split(", "))
    return bool(tail_o) and head_o == head_t and listed_o == listed_t


def test_shipped_table_matches_a_fresh_dump() -> None:
    python = _sglang_python()
    proc = subprocess.run(
        [str(python), str(REPO / "scripts" / "gen_sglang_cli_table.py"), "--stdout"],
        capture_output=True,
        text=True,
        timeout=240,  # SGLang's import with torch, on a loaded 2-core CI box
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shipped = (REPO / "validator" / "data" / "sglang-0.5.23-cli.json").read_text(encoding="utf-8")
    assert proc.stdout == shipped, "validator/data/sglang-0.5.23-cli.json is stale: rerun the generator"
    assert load_table().sglang_version == json.loads(proc.stdout)["sglang_version"]
