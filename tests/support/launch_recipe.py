"""The deployment guide's launch command, shared by the launch-command tests."""

from __future__ import annotations

import shlex

MODEL = "/models/Ling-3.0-flash-fp4"
RECIPE_SERVER_ARGS = (
    f"--model-path {MODEL} --trust-remote-code --moe-runner-backend humming "
    "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
    f"--speculative-num-draft-tokens 4 --speculative-draft-model-path {MODEL} "
    "--mem-fraction-static 0.6 --host 0.0.0.0 --port 30000 --enable-metrics"
)
RECIPE_CMD = f"python -m sglang.launch_server {RECIPE_SERVER_ARGS}"
RECIPE_ARGV = shlex.split(RECIPE_SERVER_ARGS)
RECIPE_ENV = {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}
