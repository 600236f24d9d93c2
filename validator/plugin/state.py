"""What the plugin has learned so far in this scheduler process, and its rendering as attestation v1.

Hooks fire at different moments (target load, draft load, LM-head sharing); each updates this one record
and rewrites the file, so the file on disk is always complete and says which hooks have not run yet.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from validator import TOOL_NAME, __version__
from validator.plugin.procinfo import process_start_time

SCHEMA = "spark-validate.attestation/v1"
ENV_KEYS = (
    "SGLANG_ENABLE_FP8_LM_HEAD",
    "SPARK_VALIDATE_SHARE_LM_HEAD",
    "SGLANG_PLUGINS",
    "HUMMING_CACHE_DIR",
    "HUMMING_TMP_DIR",
)
RAN, NOT_REACHED, FAILED = "ran", "not_reached", "failed"
MAX_ERRORS = 20


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class PluginState:
    pid: int = field(default_factory=os.getpid)
    start_time: float | None = None
    tp_rank: int | None = None
    tp_size: int | None = None
    spec_enabled: bool | None = None
    target: dict[str, Any] | None = None
    draft: dict[str, Any] | None = None
    shared_module: bool | None = None
    shared_weight: bool | None = None
    remedy_applied: bool = False
    nextn_has_method: bool | None = None
    load_weight_s: float | None = None
    hooks: dict[str, str] = field(
        default_factory=lambda: {"model_loaded": NOT_REACHED, "init_lm_head": NOT_REACHED}
    )
    errors: list[str] = field(default_factory=list)
    cost_s: float = 0.0
    logged: bool = False

    def __post_init__(self) -> None:
        if self.start_time is None:
            self.start_time = process_start_time(self.pid)

    def record_error(self, where: str, exc: BaseException) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{where}: {type(exc).__name__}: {exc}"[:500])

    @property
    def complete(self) -> bool:
        """Everything this process will learn is known: the target without speculation, else sharing."""
        if self.hooks["init_lm_head"] != NOT_REACHED:
            return True
        return self.spec_enabled is False and self.hooks["model_loaded"] != NOT_REACHED

    def document(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        env = dict(os.environ) if env is None else env
        return {
            "schema": SCHEMA,
            "written_at": _utc_now(),
            "writer": {"tool": TOOL_NAME, "version": __version__},
            "process": {
                "pid": self.pid,
                "start_time": self.start_time,
                "hostname": socket.gethostname(),
                "tp_rank": self.tp_rank,
                "tp_size": self.tp_size,
                "load_weight_s": self.load_weight_s,
            },
            "sglang": {
                "version": sglang_version(),
                "declares_fp8_lm_head": declares_fp8_lm_head(),
                "nextn_has_set_lm_head_from_target": self.nextn_has_method,
            },
            "env": {k: env.get(k) for k in ENV_KEYS},
            "target": self.target,
            "draft": self.draft,
            "lm_head": {
                "shared_module": self.shared_module,
                "shared_weight": self.shared_weight,
                "remedy_applied": self.remedy_applied,
            },
            "hooks": dict(self.hooks),
            "errors": list(self.errors),
        }


def sglang_version() -> str | None:
    """The running SGLang's version, from the already-imported module (no new import)."""
    mod = sys.modules.get("sglang.version") or sys.modules.get("sglang")
    version = getattr(mod, "__version__", None)
    if version is not None:
        return str(version)
    try:
        from importlib.metadata import version as dist_version

        return dist_version("sglang")
    except Exception:
        return None


def declares_fp8_lm_head() -> bool | None:
    """Whether the running build declares ``SGLANG_ENABLE_FP8_LM_HEAD`` (the Ling-3.0 patch)."""
    mod = sys.modules.get("sglang.srt.environ")
    envs_cls = getattr(mod, "Envs", None)
    if envs_cls is None:
        return None
    return hasattr(envs_cls, "SGLANG_ENABLE_FP8_LM_HEAD")
