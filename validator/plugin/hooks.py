"""The hook targets in SGLang 0.5.23 and the AFTER hooks the plugin puts on them (targets read from the real
wheel by tests/test_plugin_contract.py).

``ModelRunner.load_model`` (per model; the remedy is applied to the draft class here); the ``init_lm_head``
of ``EagleDraftWorker`` and ``MultiLayerEagleDraftWorker``; the constructors of ``FrozenKVMTPDraftWorker``
and ``DSparkWorkerV2`` (shares the module unless ``uses_own_vocab_modules``). Every hook records what it
raises: the server must start even when the plugin is wrong. No forward hooks: nothing runs per token.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from validator.attestation import location, writer
from validator.attestation.schema import ModelInfo
from validator.plugin import inspect as insp
from validator.plugin import remedy
from validator.plugin.state import FAILED, RAN, PluginState
from validator.redact import neutralize_controls

logger = logging.getLogger("spark_validate.plugin")

MODEL_RUNNER_LOAD = "sglang.srt.model_executor.model_runner.ModelRunner.load_model"
EAGLE_INIT_LM_HEAD = "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker.init_lm_head"
MULTI_LAYER_INIT_LM_HEAD = (
    "sglang.srt.speculative.multi_layer_eagle_worker_v2.MultiLayerEagleDraftWorker.init_lm_head"
)
FROZEN_KV_INIT = "sglang.srt.speculative.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker.__init__"
DSPARK_INIT = "sglang.srt.speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2.__init__"
RUNTIME_CONTEXT = "sglang.srt.runtime_context"

STATE = PluginState()


def _parallel() -> tuple[int | None, int | None]:
    """TP rank and size from SGLang's runtime context, when it is already loaded (never imported here)."""
    mod = sys.modules.get(RUNTIME_CONTEXT)
    get_parallel = getattr(mod, "get_parallel", None)
    if get_parallel is None:
        return None, None
    par = get_parallel()
    return int(par.tp_rank), int(par.tp_size)


def _fill_parallel(state: PluginState) -> None:
    """TP rank/size once; a failure here is recorded but does not stop the inspection."""
    if state.tp_rank is not None:
        return
    try:
        state.tp_rank, state.tp_size = _parallel()
    except Exception as exc:
        state.record_error("tp_rank", exc)


def _fill_server(state: PluginState, server_args: Any) -> None:
    """The HTTP host and port SGLang serves on (``ServerArgs.host``/``port``), once: the reader binds the
    document to the URL it checks and to ``/server_info`` with them."""
    if state.port is not None or server_args is None:
        return
    host, port = getattr(server_args, "host", None), getattr(server_args, "port", None)
    if isinstance(host, str) and isinstance(port, int) and not isinstance(port, bool):
        state.host, state.port = host, port


def _spec_enabled(runner: Any) -> bool | None:
    algo = getattr(runner, "spec_algorithm", None)
    is_none = getattr(algo, "is_none", None)
    return None if is_none is None else not is_none()


def flush(state: PluginState) -> None:
    """Write the attestation for this rank; log the one summary line once the facts are complete.

    Never blocks on the path: the writer only creates its own temporary file (``O_EXCL``) in a directory it
    opened with ``O_NOFOLLOW`` and renames it, so a FIFO or symlink planted there is replaced or refused."""
    path = location.attestation_path(state.tp_rank)
    written = "not written"
    if path is None:
        if not state.location_warned:
            state.location_warned = True
            logger.warning(
                "spark-validate: no private runtime directory for the attestation (set %s, or run with "
                "systemd RuntimeDirectory=, a writable /run or XDG_RUNTIME_DIR); none written",
                location.ENV_PATH,
            )
    else:
        try:
            writer.write_document(path, state.document(), gid=location.configured_gid())
            written = str(path)
        except Exception as exc:
            state.record_error("write", exc)
            # one line whatever the path or the error holds: a newline would put a line of someone
            # else's making into the log the validator reads as the server's own
            logger.warning(
                "spark-validate: could not write attestation %s", neutralize_controls(f"{path}: {exc}")
            )
    if state.complete and not state.logged:  # the log line is evidence of its own, file or no file
        state.logged = True
        logger.info("%s", neutralize_controls(summary_line(state, written)))


def summary_line(state: PluginState, path: str) -> str:
    """The concise, verdict-relevant log line."""

    def head(section: ModelInfo | None) -> str:
        h = section.lm_head if section is not None else None
        if h is None:
            return "none"
        scale = "scaled" if h.has_weight_scale else "no-scale"
        return f"{h.quant_method}/{h.weight_dtype}/{scale}"

    def moe(section: ModelInfo | None) -> str:
        backends = section.moe.runner_backends if section is not None and section.moe is not None else {}
        return ",".join(f"{k}:{v}" for k, v in sorted(backends.items())) or "none"

    parts = [
        f"spark-validate attestation: target head={head(state.target)} moe={moe(state.target)}",
        f"draft head={head(state.draft)} moe={moe(state.draft)}" if state.draft else "draft=none",
        f"shared_module={state.shared_module} shared_weight={state.shared_weight}"
        + (f" own_vocab_modules={state.own_vocab_modules}" if state.own_vocab_modules is not None else ""),
        f"remedy_applied={state.remedy_applied}",
        insp.trap_summary(state.target, state.draft, state.shared_module),
        f"errors={len(state.errors)} cost_ms={state.cost_s * 1000:.1f} -> {path}",
    ]
    return "; ".join(parts)


def _timed(fn: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # the server must never notice the plugin
            STATE.record_error(fn.__name__, exc)
        finally:
            STATE.cost_s += time.perf_counter() - t0

    return run


def record_model_loaded(state: PluginState, runner: Any) -> None:
    """After ``ModelRunner.load_model``: describe the target or the draft; apply the remedy to the draft."""
    try:
        _fill_parallel(state)
        _fill_server(state, getattr(runner, "server_args", None))
        state.spec_enabled = _spec_enabled(runner) if state.spec_enabled is None else state.spec_enabled
        model = runner.model
        load_time = getattr(runner, "weight_load_time", None)
        if isinstance(load_time, (int, float)):  # the scheduler reports target + draft seconds
            state.load_weight_s = (state.load_weight_s or 0.0) + float(load_time)
        if getattr(runner, "is_draft_worker", False):
            if getattr(runner, "draft_model_idx", None) in (None, 0) or state.draft is None:
                if type(model).__name__ == remedy.NEXTN_CLASS and state.nextn_has_method is None:
                    state.nextn_has_method = hasattr(type(model), remedy.METHOD)
                if remedy.remedy_enabled() and remedy.apply_share_method(model):
                    state.remedy_applied = True
                state.draft = insp.model_section(model)
        else:
            state.target = insp.model_section(model)
        state.hooks["model_loaded"] = RAN
    except Exception as exc:
        state.hooks["model_loaded"] = FAILED
        state.record_error("model_loaded", exc)
    flush(state)


def record_lm_head(
    state: PluginState,
    target: Any,
    drafts: list[Any],
    shares_itself: bool,
    *,
    worker: Any = None,
    own_vocab_modules: bool | None = None,
) -> None:
    """After the draft worker's LM-head set-up: the sharing facts, with the remedy where the worker
    never calls ``set_lm_head_from_target`` itself (``shares_itself`` False)."""
    try:
        _fill_parallel(state)
        _fill_server(state, getattr(worker, "server_args", None))
        state.spec_enabled = True
        state.worker = type(worker).__name__ if worker is not None else state.worker
        state.own_vocab_modules = own_vocab_modules
        if remedy.remedy_enabled() and not shares_itself:
            for draft in drafts:
                if remedy.apply_share_method(draft):
                    state.remedy_applied = True
                remedy.share_now(target, draft)
        if drafts and type(drafts[0]).__name__ == remedy.NEXTN_CLASS and state.nextn_has_method is None:
            state.nextn_has_method = hasattr(type(drafts[0]), remedy.METHOD)
        state.target = insp.model_section(target)
        state.draft = insp.model_section(drafts[0]) if drafts else None
        shared = insp.sharing(target, drafts)
        state.shared_module, state.shared_weight = shared["shared_module"], shared["shared_weight"]
        state.hot_token_count = insp.hot_token_count([worker, *drafts])
        if own_vocab_modules is not None:
            state.shared_embed = insp.embed_shared(target, drafts)
        state.hooks["init_lm_head"] = RAN
    except Exception as exc:
        state.hooks["init_lm_head"] = FAILED
        state.record_error("init_lm_head", exc)
    flush(state)


# --- the AFTER hooks: fn(result, self, *args, **kwargs); returning None keeps the result ---------------


@_timed
def after_load_model(result: Any, runner: Any, *args: Any, **kwargs: Any) -> None:
    record_model_loaded(STATE, runner)


@_timed
def after_eagle_init_lm_head(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    target = worker.target_worker.model_runner.model
    record_lm_head(STATE, target, [worker.draft_runner.model], shares_itself=True, worker=worker)


@_timed
def after_multi_layer_init_lm_head(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    target = worker.target_worker.model_runner.model
    drafts = [runner.model for runner in worker.draft_runner_list]
    record_lm_head(STATE, target, drafts, shares_itself=False, worker=worker)


@_timed
def after_frozen_kv_init(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    target = worker.target_worker.model_runner.model
    record_lm_head(STATE, target, [worker.draft_model_runner.model], shares_itself=False, worker=worker)


def record_dspark(state: PluginState, worker: Any) -> None:
    """After ``DSparkWorkerV2.__init__``: the draft's head is the target's module (``attach_shared_modules``)
    unless the draft model sets ``uses_own_vocab_modules``; a pipeline stage that hosts no draft
    (``_hosts_draft`` False) records only that speculation is on."""
    try:
        hosts_draft = vars(worker).get("_hosts_draft", True)  # vars(): the worker's __getattr__ delegates
        if hosts_draft:
            draft = worker.draft_model
            own = bool(getattr(draft, "uses_own_vocab_modules", False))
            target = worker.target_worker.model_runner.model
    except Exception as exc:
        state.hooks["init_lm_head"] = FAILED
        state.record_error("init_lm_head", exc)
        flush(state)
        return
    if not hosts_draft:
        _fill_parallel(state)
        state.spec_enabled, state.worker = True, type(worker).__name__
        state.hooks["init_lm_head"] = RAN
        flush(state)
        return
    record_lm_head(state, target, [draft], shares_itself=True, worker=worker, own_vocab_modules=own)


@_timed
def after_dspark_init(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    record_dspark(STATE, worker)


HOOKS: dict[str, Callable[..., None]] = {
    MODEL_RUNNER_LOAD: after_load_model,
    EAGLE_INIT_LM_HEAD: after_eagle_init_lm_head,
    MULTI_LAYER_INIT_LM_HEAD: after_multi_layer_init_lm_head,
    FROZEN_KV_INIT: after_frozen_kv_init,
    DSPARK_INIT: after_dspark_init,
}


def install(registry: Any = None, hook_type: Any = None) -> list[str]:
    """Register the AFTER hooks with SGLang's ``HookRegistry`` (``load_plugins`` applies them)."""
    if registry is None or hook_type is None:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        registry, hook_type = HookRegistry, HookType
    for target, hook in HOOKS.items():
        registry.register(target, hook, hook_type.AFTER)
    return list(HOOKS)
