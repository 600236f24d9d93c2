"""The deployment guide's launch command, shared by the launch-command tests, and the shape of one mistake
made in it (for the tables of single mistakes that preflight must fail)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import NamedTuple

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


class Mistake(NamedTuple):
    """One mistake in a launch: flags added (after ``drop`` removed the recipe's own), changes to the
    environment (``None`` unsets a variable), and the check IDs that must then fail."""

    extra: tuple[str, ...]
    drop: tuple[str, ...]
    env: dict[str, str | None]
    fails: set[str]

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this mistake's environment changes made."""
        out = dict(base)
        for name, value in self.env.items():
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        return out
