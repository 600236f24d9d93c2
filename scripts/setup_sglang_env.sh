#!/usr/bin/env bash
# Build a virtualenv in which SGLang 0.5.23's real argument parser runs with CPU torch, and in which the
# modules the attestation plugin hooks can be imported.
#
# Why: the parity tests and scripts/gen_sglang_cli_table.py compare spark-validate's own parser with
# `sglang.srt.server_args.prepare_server_args`, which needs `import sglang` (torch, triton and a list of
# light packages) but no GPU. sglang itself is installed with --no-deps: its real dependency set pulls CUDA
# kernels and several GB we do not need to parse a command line.
#
# Usage: bash scripts/setup_sglang_env.sh VENV_DIR     (idempotent: exits early when already working)
set -euo pipefail

VENV=${1:?usage: setup_sglang_env.sh VENV_DIR}
PY=${PYTHON:-python3}
SGLANG_VERSION=0.5.23
TORCH_VERSION=2.13.0

probe() {
  "$VENV/bin/python" - <<PYEOF >/dev/null 2>&1
import importlib.metadata as md, sys
assert md.version("sglang") == "$SGLANG_VERSION", md.version("sglang")
assert md.version("torch").split("+")[0] == "$TORCH_VERSION", md.version("torch")
from sglang.srt.server_args import prepare_server_args
sa = prepare_server_args(["--model-path", "/m", "--moe-runner-backend", "humming"])
assert sa.moe_runner_backend == "humming"
import importlib.util
for name in ("transformers", "dill", "tvm_ffi", "sentencepiece", "compressed_tensors", "loguru", "gguf",
             "openai", "partial_json_parser", "uvicorn", "fastapi", "opentelemetry", "einops", "setproctitle"):
    assert importlib.util.find_spec(name) is not None, name
PYEOF
}

if [ -x "$VENV/bin/python" ] && probe; then
  echo "setup_sglang_env: $VENV already has a working SGLang $SGLANG_VERSION parser"
  exit 0
fi

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile)
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
# Pin torch so that no later resolution replaces the CPU build with a CUDA one.
printf 'torch==%s\n' "$TORCH_VERSION" >"$constraints"

"${PIP[@]}" --upgrade pip
"${PIP[@]}" --no-deps "sglang==$SGLANG_VERSION"
# What `from sglang.srt.server_args import prepare_server_args` imports (found by importing it until clean;
# see /work/shared/sglang-0.5.23.md section 6). `setproctitle`, `pyyaml` are for --config and utils.
"${PIP[@]}" -c "$constraints" \
  "torch==$TORCH_VERSION" numpy orjson psutil pybase64 requests packaging pillow starlette msgspec \
  pydantic pyzmq tqdm ipython aiohttp triton pyyaml
# What importing the plugin's hook targets needs (ModelRunner, the EAGLE, multi-layer EAGLE, frozen-KV MTP and
# DSpark workers; found by importing them until clean), so tests/test_plugin_contract.py applies the hooks
# to SGLang's real classes. Pins are sglang 0.5.23's own. torchvision is left out on purpose: its PyPI wheel
# needs CUDA torch; the test gives it a stand-in module (only multimodal preprocessing imports it).
"${PIP[@]}" -c "$constraints" \
  "transformers==5.19.0" dill "apache-tvm-ffi==0.1.11" sentencepiece "compressed-tensors==0.18.0" loguru gguf \
  "openai==2.8.0" partial_json_parser uvicorn fastapi opentelemetry-api opentelemetry-sdk einops setproctitle

if ! probe; then
  echo "setup_sglang_env: $VENV was built but prepare_server_args still fails:" >&2
  "$VENV/bin/python" -c 'from sglang.srt.server_args import prepare_server_args' >&2 || true
  exit 1
fi
echo "setup_sglang_env: $VENV ready (sglang $SGLANG_VERSION, torch $TORCH_VERSION CPU)"
