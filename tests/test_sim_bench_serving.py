"""SGLang's own benchmark client (``python -m sglang.bench_serving`` from the 0.5.23 wheel) against the
simulator: it must run to the end (``--flush-cache`` included) and report the scenario's acceptance length.

It runs in ``.venv-sglang`` (SGLang 0.5.23 with CPU torch, scripts/setup_sglang_env.sh) with the client's
extra imports (``transformers``, ``datasets``) from a directory of their own
(scripts/setup_sglang_bench_client.sh), and a tokenizer built here with the ``tokenizers`` library (word
level, the simulator's vocabulary; no hub download). One import is stubbed, because it needs a CUDA build
of torch: ``sglang.srt.disaggregation.utils``, which ``sglang/benchmark/serving.py:57`` imports for one
constant and which pulls ``sglang.srt.configs`` -> ``internvl_utils`` -> ``torchvision`` (PyPI's torchvision
wheel registers CUDA operators and fails on CPU torch). The stub carries that constant's real value, read
from the wheel's source.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prerequisite import missing
from tests.support.sglang_wheel import CACHE
from tests.support.sim_process import REPO, SimProcess, sim_process, wait_healthy
from validator.sim.decode import word
from validator.sim.scenarios import resolve

SGLANG_VENV = REPO / ".venv-sglang"
CLIENT_DIR = CACHE / "sglang-bench-client"
MODEL = "/models/Ling-3.0-flash-fp4"

_RUN = """
import runpy, sys, types
stub = types.ModuleType("sglang.srt.disaggregation.utils")
stub.FAKE_BOOTSTRAP_HOST = {host!r}
sys.modules[stub.__name__] = stub
sys.argv = ["sglang.bench_serving", *sys.argv[1:]]
runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
"""

_TOKENIZER = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
words = json.load(open(sys.argv[1]))
vocab = {{"[UNK]": 0, "<s>": 1, "</s>": 2}}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(sys.argv[2] + "/tokenizer.json")
config = {{"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "bos_token": "<s>",
          "eos_token": "</s>", "model_max_length": 262144}}
json.dump(config, open(sys.argv[2] + "/tokenizer_config.json", "w"))
"""


def _python() -> Path:
    python = SGLANG_VENV / "bin" / "python"
    if not python.exists():
        missing(f"{python} missing (bash scripts/setup_sglang_env.sh .venv-sglang)")
    return python


@pytest.fixture(scope="module")
def client_env() -> dict[str, str]:
    """The environment that runs SGLang's client: its extra packages on PYTHONPATH, offline."""
    _python()  # SGLang's environment first: the client's packages go beside it
    subprocess.run(
        ["bash", str(REPO / "scripts" / "setup_sglang_bench_client.sh"), str(SGLANG_VENV), str(CLIENT_DIR)],
        check=True,
        timeout=1200,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY", "API_KEY")}
    env.update(PYTHONPATH=str(CLIENT_DIR), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", NO_COLOR="1")
    return env


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory, client_env: dict[str, str]) -> Path:
    out = tmp_path_factory.mktemp("tokenizer")
    words = sorted({word(i) for i in range(1000, 1000 + 16 * 16 * 16 * 3)})
    (out / "words.json").write_text(json.dumps(words))
    script = _TOKENIZER.format()
    subprocess.run([str(_python()), "-c", script, str(out / "words.json"), str(out)], check=True,
                   env=client_env, timeout=120)  # fmt: skip
    return out


def _fake_bootstrap_host(stock_sglang_root: Path) -> str:
    tree = ast.parse((stock_sglang_root / "srt" / "disaggregation" / "utils.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FAKE_BOOTSTRAP_HOST" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise AssertionError("FAKE_BOOTSTRAP_HOST not found in sglang/srt/disaggregation/utils.py")


@pytest.fixture(scope="module", params=["healthy", "dspark"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, SimProcess]]:
    name = str(request.param)
    with sim_process(tmp_path_factory.mktemp(name), "--scenario", name, "--seed", "5") as sim:
        wait_healthy(sim.url)
        yield name, sim


def test_bench_serving_reports_the_scenarios_accept_length(
    server: tuple[str, SimProcess],
    client_env: dict[str, str],
    tokenizer_dir: Path,
    stock_sglang_root: Path,
    tmp_path: Path,
) -> None:
    name, sim = server
    out = tmp_path / "bench.jsonl"
    args = [
        "--backend", "sglang", "--base-url", sim.url, "--model", MODEL, "--tokenizer", str(tokenizer_dir),
        "--dataset-name", "random-ids", "--random-input-len", "32", "--random-output-len", "256",
        "--random-range-ratio", "1.0", "--num-prompts", "48", "--max-concurrency", "8",
        "--request-rate", "inf", "--flush-cache", "--output-file", str(out), "--disable-tqdm", "--seed", "1",
    ]  # fmt: skip
    run = _RUN.format(host=_fake_bootstrap_host(stock_sglang_root))
    proc = subprocess.run([str(_python()), "-c", run, *args], capture_output=True, text=True, env=client_env,
                          timeout=600, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    printed = [ln for ln in proc.stdout.splitlines() if ln.startswith("Accept length:")]
    assert printed, proc.stdout[-2000:]
    result = json.loads(out.read_text().splitlines()[-1])
    assert result["completed"] == 48
    assert result["total_output_tokens"] == 48 * 256
    expected = resolve(name).accept_mean(0.0)  # bench_serving's default temperature is 0 (greedy)
    # 48 x 256 tokens: about 2,300 DSpark verify rounds (per-round sd ~3), so 5% is over 4 standard errors
    assert result["accept_length"] == pytest.approx(expected, rel=0.05)
    assert float(printed[0].split()[-1]) == pytest.approx(result["accept_length"], abs=0.01)
    print(f"{name}: bench_serving accept length {result['accept_length']:.3f} (scenario mean {expected})")
