#!/usr/bin/env bash
# Add what SGLang 0.5.23's own benchmark client (`python -m sglang.bench_serving`) imports beyond the
# parser environment of scripts/setup_sglang_env.sh, into a separate directory put on PYTHONPATH only by the
# test that runs it (tests/test_sim_bench_serving.py), so the parser environment itself stays as it is.
#
# Why these: sglang/benchmark/serving.py imports `transformers` (AutoTokenizer) at top level and its
# dataset registry imports `datasets` (for MMMU); the versions are the ones SGLang 0.5.23's wheel pins.
#
# Usage: bash scripts/setup_sglang_bench_client.sh SGLANG_VENV TARGET_DIR   (idempotent)
set -euo pipefail

VENV=${1:?usage: setup_sglang_bench_client.sh SGLANG_VENV TARGET_DIR}
TARGET=${2:?usage: setup_sglang_bench_client.sh SGLANG_VENV TARGET_DIR}

if [ -f "$TARGET/.complete" ]; then
  echo "setup_sglang_bench_client: $TARGET already complete"
  exit 0
fi
rm -rf "$TARGET"
mkdir -p "$TARGET"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile --target "$TARGET" \
  "transformers==5.19.0" "tokenizers==0.23.2" datasets 2>&1 | grep -v "^WARNING: Location\|sglang 0.5.23 requires" || true
PYTHONPATH="$TARGET" "$VENV/bin/python" -c 'import transformers, tokenizers, datasets' 
touch "$TARGET/.complete"
echo "setup_sglang_bench_client: $TARGET ready"
