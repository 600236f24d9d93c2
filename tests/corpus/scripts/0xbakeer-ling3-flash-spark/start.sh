#!/usr/bin/env bash
# Written for spark-validate's tests; not 0xBakeer's text. It stands in for start.sh of
# github.com/0xBakeer/ling3-flash-spark (commit 49b6c9c), which publishes no licence: the same launch
# structure (see tests/corpus/scripts/README.md), in this project's words.
#
# One Ling-3.0-flash MXFP4 server on one DGX Spark. The recipe is picked by PROFILE, read from .env
# unless the caller's environment sets it:
#   cookbook, cookbook-exact   flashinfer_mxfp4 experts, BF16 head, DSPARK drafter
#   humming-nextn              humming experts, online FP8 head, the built-in MTP layer (NEXTN)
#   humming-dspark             humming experts, online FP8 head, DSPARK drafter (the default)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

die() {
  echo "start.sh: $*" >&2
  exit 1
}

# A value the caller exported beats the same name in .env: remember it, read .env, put it back.
declare -A caller=()
for key in PROFILE PORT PAGE_SIZE YARN_OVERRIDE MEM_FRACTION_STATIC MAX_RUNNING_REQUESTS \
  MAX_MAMBA_CACHE_SIZE CHUNKED_PREFILL_SIZE; do
  if [[ -n "${!key:-}" ]]; then
    caller[$key]="${!key}"
  fi
done
if [[ -f .env ]]; then
  set -a
  # shellcheck disable=SC1091
  source ./.env
  set +a
fi
for key in "${!caller[@]}"; do
  printf -v "$key" '%s' "${caller[$key]}"
done

PROFILE="${PROFILE:-humming-dspark}"
MODEL_DIR="${MODEL_DIR:-$HOME/models/Ling-3.0-flash-fp4}"
DRAFT_DIR="${DRAFT_DIR:-$HOME/models/Ling-3.0-flash-dspark}"
SERVED_MODEL_NAME="${SERVED_MODEL_NAME:-ling-3.0-flash}"
HOST="${HOST:-0.0.0.0}"
PORT="${PORT:-30000}"
MEM_FRACTION_STATIC="${MEM_FRACTION_STATIC:-0.75}"
MAX_RUNNING_REQUESTS="${MAX_RUNNING_REQUESTS:-1}"
MAX_MAMBA_CACHE_SIZE="${MAX_MAMBA_CACHE_SIZE:-64}"
CHUNKED_PREFILL_SIZE="${CHUNKED_PREFILL_SIZE:-8192}"
MAX_PREFILL_TOKENS="${MAX_PREFILL_TOKENS:-16384}"
PAGE_SIZE="${PAGE_SIZE:-64}"
RANDOM_SEED="${RANDOM_SEED:-308534008}"
REASONING_PARSER="${REASONING_PARSER:-ling3}"
TOOL_CALL_PARSER="${TOOL_CALL_PARSER:-ling3}"
YARN_OVERRIDE="${YARN_OVERRIDE:-0}"
EXTRA_FLAGS="${EXTRA_FLAGS:-}" # more server flags, split on whitespace
EXTRA_ENV="${EXTRA_ENV:-}"     # more KEY=VALUE words for the server's environment

test -d "$MODEL_DIR" || die "no checkpoint at $MODEL_DIR"
test -f .venv/bin/activate || die "no .venv here: build it first"

case "$PROFILE" in
  cookbook | cookbook-exact)
    moe=flashinfer_mxfp4
    head_env=SGLANG_ENABLE_FP8_LM_HEAD=0
    drafter=dspark
    ;;
  humming-nextn)
    moe=humming
    head_env=SGLANG_ENABLE_FP8_LM_HEAD=1
    drafter=nextn
    ;;
  humming-dspark)
    moe=humming
    head_env=SGLANG_ENABLE_FP8_LM_HEAD=1
    drafter=dspark
    ;;
  *)
    die "PROFILE=$PROFILE is none of cookbook, cookbook-exact, humming-nextn, humming-dspark"
    ;;
esac
server_env=("$head_env")

if [[ "$drafter" == nextn ]]; then
  spec=(
    --speculative-algorithm NEXTN --speculative-draft-model-path "$MODEL_DIR"
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
  )
else
  test -d "$DRAFT_DIR" || die "no DSpark drafter at $DRAFT_DIR"
  # verify window 9 (block 8 + 1): the ReplaySSM ring needs a power of two of at least twice that
  spec=(
    --speculative-algorithm DSPARK --speculative-draft-model-path "$DRAFT_DIR"
    --enable-linear-replayssm-spec --linear-replayssm-cache-len 32
  )
fi

# shellcheck disable=SC2206  # split on purpose
if [[ -n "$EXTRA_FLAGS" ]]; then spec+=($EXTRA_FLAGS); fi
# shellcheck disable=SC2206
if [[ -n "$EXTRA_ENV" ]]; then server_env+=($EXTRA_ENV); fi
if [[ "$YARN_OVERRIDE" == 1 ]]; then
  yarn='{"max_position_embeddings":262144,"rope_scaling":{"rope_type":"yarn","factor":2.0,"rope_theta":6000000,"partial_rotary_factor":0.5,"original_max_position_embeddings":131072}}'
  spec+=(--json-model-override-args "$yarn")
fi

# Refuse to start beside another resident model: the unified pool must have room for ~60 GB.
MIN_FREE_GIB="${MIN_FREE_GIB:-85}"
_avail=$(awk '/^MemAvailable:/ { printf "%d", $2 / 1048576 }' /proc/meminfo)
if (( _avail < MIN_FREE_GIB )); then
  die "MemAvailable is ${_avail} GiB, below MIN_FREE_GIB=${MIN_FREE_GIB}: stop the other server first"
fi

# empty when DROP_AUTOTUNE is set, and then left out of the command line (it is not quoted below)
autotune_flag=--disable-flashinfer-autotune
if [[ -n "${DROP_AUTOTUNE:-}" ]]; then autotune_flag=""; fi

# shellcheck disable=SC1091
source .venv/bin/activate
mkdir -p logs "$HOME/.humming/cache"
echo "start.sh: $PROFILE (moe $moe, drafter $drafter, mem $MEM_FRACTION_STATIC, port $PORT)"

if [[ "$PROFILE" == cookbook-exact ]]; then
  # the cookbook's own cell and nothing else: tp 1, its MoE backend, the drafter, 0.85
  exec env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "${server_env[@]}" \
    python3 -m sglang.launch_server --model-path "$MODEL_DIR" --served-model-name "$SERVED_MODEL_NAME" \
    --trust-remote-code --tp 1 --moe-runner-backend flashinfer_mxfp4 "${spec[@]}" \
    --mem-fraction-static 0.85 --host "$HOST" --port "$PORT"
fi

env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 SGLANG_JIT_DEEPGEMM_PRECOMPILE=0 SGLANG_ENABLE_JIT_DEEPGEMM=0 \
  SGLANG_DSV4_FP4_DEQUANT=0 SGLANG_FP8_IGNORED_LAYERS="" HUMMING_COMPILER=nvrtc \
  HUMMING_CACHE_DIR="$HOME/.humming/cache" "${server_env[@]}" \
  python3 -m sglang.launch_server \
  --model-path "$MODEL_DIR" --served-model-name "$SERVED_MODEL_NAME" --trust-remote-code \
  --host "$HOST" --port "$PORT" --dtype bfloat16 --tp-size 1 --ep-size 1 \
  --moe-runner-backend "$moe" --flashinfer-mxfp4-moe-precision default --disable-shared-experts-fusion \
  --attention-backend flashinfer --fp8-gemm-backend cutlass $autotune_flag \
  --mem-fraction-static "$MEM_FRACTION_STATIC" --max-running-requests "$MAX_RUNNING_REQUESTS" \
  --max-mamba-cache-size "$MAX_MAMBA_CACHE_SIZE" --page-size "$PAGE_SIZE" \
  --chunked-prefill-size "$CHUNKED_PREFILL_SIZE" --max-prefill-tokens "$MAX_PREFILL_TOKENS" \
  --cuda-graph-backend-decode full --cuda-graph-max-bs-decode 1 --cuda-graph-bs-decode 1 \
  --cuda-graph-backend-prefill disabled \
  --reasoning-parser "$REASONING_PARSER" --tool-call-parser "$TOOL_CALL_PARSER" --random-seed "$RANDOM_SEED" \
  "${spec[@]}"
