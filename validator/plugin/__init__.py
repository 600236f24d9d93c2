"""spark-validate's in-process SGLang plugin (entry point ``sglang.srt.plugins: spark_validate``).

SGLang calls ``register()`` in every process that runs ``load_plugins()`` (launcher, scheduler, DP
controller, detokenizer). Only scheduler processes hold models, so everywhere else it returns at once:
hooking there would import heavy modules for nothing. Importing this package imports nothing but the
standard library.
"""

from __future__ import annotations

import logging
import os
import sys
from types import FrameType

ENV_DISABLE = "SPARK_VALIDATE_PLUGIN"  # "0" turns the plugin off without uninstalling it
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
SCHEDULER_ENTRY = "run_scheduler_process"

logger = logging.getLogger("spark_validate.plugin")


def in_scheduler_process(frame: FrameType | None = None, max_depth: int = 32) -> bool:
    """True when called (through ``load_plugins``) from SGLang's ``run_scheduler_process``: the call stack
    is the one reliable marker then (the title is set later; the DP controller and detokenizer are
    children too)."""
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    for _ in range(max_depth):
        if f is None:
            return False
        if f.f_code.co_name == SCHEDULER_ENTRY and f.f_globals.get("__name__") == SCHEDULER_MODULE:
            return True
        f = f.f_back
    return False


def register() -> None:
    """Entry point: register the attestation hooks in scheduler processes; never raises."""
    try:
        if os.environ.get(ENV_DISABLE, "1").strip() == "0":
            return
        if not in_scheduler_process(sys._getframe(1)):
            return
        from validator.plugin.hooks import install

        install()
    except Exception:
        logger.exception("spark-validate plugin: registration failed; the server runs without attestation")
