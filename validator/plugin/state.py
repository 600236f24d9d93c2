"""What the plugin has learned so far in this scheduler process, rendered as the attestation document.

Hooks fire at different moments (target load, draft load, the draft worker's LM-head set-up); each updates
this one record and rewrites the file, so the file on disk is always complete and says which hooks have
not run yet. The document itself is defined in ``validator.attestation.schema``; this module only fills it.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from validator import TOOL_NAME, __version__
from validator.attestation.schema import (
    ENV_KEYS,
    FAILED,
    HOOK_NAMES,
    NOT_REACHED,
    RAN,
    SCHEMA,
    Attestation,
    HookStatus,
    LmHeadSharing,
    ModelInfo,
    Process,
    Server,
    SGLangInfo,
    Writer,
    utc_now,
)
from validator.procinfo import process_start_time

__all__ = ["FAILED", "NOT_REACHED", "RAN", "PluginState"]
MAX_ERRORS = 20


@dataclass
class PluginState:
    pid: int = field(default_factory=os.getpid)
    uid: int = field(default_factory=os.geteuid)
    start_time: float | None = None
    tp_rank: int | None = None
    tp_size: int | None = None
    host: str | None = None  # ServerArgs.host / port: what binds the document to a URL
    port: int | None = None
    spec_enabled: bool | None = None
    target: ModelInfo | None = None
    draft: ModelInfo | None = None
    shared_module: bool | None = None
    shared_weight: bool | None = None
    remedy_applied: bool = False
    worker: str | None = None  # the draft worker class whose LM-head set-up was observed
    own_vocab_modules: bool | None = None  # DSpark: the draft declares uses_own_vocab_modules
    shared_embed: bool | None = None
    hot_token_count: int | None = (
        None  # the head narrowed to hot tokens (a token map): a copy, not the module
    )
    nextn_has_method: bool | None = None
    load_weight_s: float | None = None
    hooks: dict[str, HookStatus] = field(default_factory=lambda: dict.fromkeys(HOOK_NAMES, NOT_REACHED))
    errors: list[str] = field(default_factory=list)
    cost_s: float = 0.0
    logged: bool = False  # the summary line, once
    location_warned: bool = False  # "no private runtime directory", once

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

    def document(self, env: Mapping[str, str] | None = None) -> Attestation:
        env = os.environ if env is None else env
        return Attestation(
            schema=SCHEMA,
            written_at=utc_now(),
            writer=Writer(tool=TOOL_NAME, version=__version__),
            process=Process(
                pid=self.pid,
                start_time=self.start_time,
                hostname=socket.gethostname(),
                uid=self.uid,
                tp_rank=self.tp_rank,
                tp_size=self.tp_size,
                load_weight_s=self.load_weight_s,
            ),
            server=Server(host=self.host, port=self.port),
            sglang=SGLangInfo(
                version=sglang_version(),
                declares_fp8_lm_head=declares_fp8_lm_head(),
                nextn_has_set_lm_head_from_target=self.nextn_has_method,
            ),
            env={k: env.get(k) for k in ENV_KEYS},
            target=self.target,
            draft=self.draft,
            lm_head=LmHeadSharing(
                shared_module=self.shared_module,
                shared_weight=self.shared_weight,
                remedy_applied=self.remedy_applied,
                worker=self.worker,
                own_vocab_modules=self.own_vocab_modules,
                shared_embed=self.shared_embed,
                hot_token_count=self.hot_token_count,
            ),
            hooks=dict(self.hooks),
            errors=list(self.errors),
        )


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
