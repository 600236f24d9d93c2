#!/usr/bin/env bash
# Written for spark-validate's tests; not ly01325's text. It stands in for
# scripts/dgx-spark/launch-baseline.sh of github.com/ly01325/Ling3-Flash-DGX-Spark (commit 8cbd8ed), whose
# scripts carry no licence grant: the same launch structure (tests/corpus/scripts/README.md), our words.
#
# The same server with the three optimizations off: flashinfer_mxfp4 MoE runner, an FP32 LM head
# (SGLANG_ENABLE_FP8_LM_HEAD left unset), no speculative decoding. Everything else as the optimized launch.
set -euo pipefail

ROOT=/home/liuyang/Ling
MODEL=/home/liuyang/models/Ling-3.0-flash-fp4

# the checkout's venv and its SGLang source tree
export PATH="${ROOT}/.venv/bin:${PATH}"
export PYTHONPATH="${ROOT}/sglang/python"

# server switches
export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1
export SGLANG_ENABLE_JIT_DEEPGEMM=0
export SGLANG_JIT_DEEPGEMM_PRECOMPILE=0
export SGLANG_DSV4_FP4_DEQUANT=0
export SGLANG_FP8_IGNORED_LAYERS=""

# one compiler job at a time: kernel builds share the unified memory with the weights
export MAX_JOBS=1 NINJA_NUM_JOBS=1

exec "${ROOT}/.venv/bin/python" -m sglang.launch_server \
  --model-path "${MODEL}" \
  --served-model-name ling-v3-flash-fp4 \
  --api-key sk-ling-cookbook-test \
  --host 0.0.0.0 \
  --port 30000 \
  --trust-remote-code \
  --dtype bfloat16 \
  --tp-size 1 \
  --ep-size 1 \
  --moe-runner-backend flashinfer_mxfp4 \
  --flashinfer-mxfp4-moe-precision default \
  --disable-shared-experts-fusion \
  --enable-fp32-lm-head \
  --attention-backend flashinfer \
  --fp8-gemm-backend cutlass \
  --disable-flashinfer-autotune \
  --mem-fraction-static 0.68 \
  --max-running-requests 1 \
  --max-mamba-cache-size 64 \
  --page-size 64 \
  --chunked-prefill-size 8192 \
  --context-length 262144 \
  --cuda-graph-backend-decode full \
  --cuda-graph-bs-decode 1 \
  --cuda-graph-max-bs-decode 1 \
  --cuda-graph-backend-prefill disabled \
  --reasoning-parser deepseek-r1 \
  --tool-call-parser qwen25 \
  --random-seed 308534008 \
  --json-model-override-args '{"max_position_embeddings":262144,"rope_scaling":{"rope_type":"yarn","factor":2.0,"rope_theta":6000000,"partial_rotary_factor":0.5,"original_max_position_embeddings":131072}}'
