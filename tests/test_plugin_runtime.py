"""The plugin's process guard, atomic writer and never-raise behaviour."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import validator.plugin as plugin
from validator.attestation import location
from validator.plugin import hooks
from validator.plugin.state import PluginState
from validator.procinfo import process_start_time


def test_guard_only_accepts_sglang_scheduler_entry() -> None:
    code = "def run_scheduler_process():\n    return probe()\n"
    inside: dict[str, Any] = {"__name__": plugin.SCHEDULER_MODULE, "probe": plugin.in_scheduler_process}
    exec(compile(code, "scheduler.py", "exec"), inside)
    assert inside["run_scheduler_process"]() is True
    elsewhere: dict[str, Any] = {
        "__name__": "sglang.srt.managers.detokenizer_manager",
        "probe": plugin.in_scheduler_process,
    }
    exec(compile(code, "detok.py", "exec"), elsewhere)
    assert elsewhere["run_scheduler_process"]() is False
    assert plugin.in_scheduler_process() is False


def test_register_outside_a_scheduler_is_a_cheap_no_op() -> None:
    t0 = time.perf_counter()
    plugin.register()  # no sglang here: would raise ImportError if it tried to install
    assert time.perf_counter() - t0 < 0.05


def test_start_time_of_this_process_is_in_the_past() -> None:
    started = process_start_time(os.getpid())
    assert started is not None and started <= time.time()
    assert process_start_time(2**22 + 12345) is None


def test_hooks_swallow_errors_and_record_them(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(location.ENV_PATH, str(tmp_path / "att.json"))
    state = PluginState()
    hooks.record_model_loaded(state, SimpleNamespace())  # no .model: AttributeError inside
    doc = json.loads((tmp_path / "att.json").read_text())
    assert doc["hooks"]["model_loaded"] == "failed"
    assert any("AttributeError" in e for e in doc["errors"])
    hooks.record_lm_head(state, object(), [object()], shares_itself=True)
    doc = json.loads((tmp_path / "att.json").read_text())
    assert doc["hooks"]["init_lm_head"] == "ran" and doc["lm_head"]["shared_module"] is None


# ---- DSpark: the worker's constructor hands the draft the target's modules (attach_shared_modules) ----


class _Head:
    """Stands in for ParallelLMHead: a quant method and a weight tensor."""

    def __init__(self, quant: str = "Fp8LinearMethod") -> None:
        self.quant_method = type(quant, (), {})()
        self.weight = SimpleNamespace(dtype="torch.float8_e4m3fn", shape=(157184, 2560))
        self.weight_scale = object()
        self.input_scale = None


class _Target:
    def __init__(self) -> None:
        self.lm_head = _Head()
        self.embed = object()

    def get_input_embeddings(self) -> object:
        return self.embed

    def modules(self) -> Any:
        return iter(())


class DSparkDraftModel:
    """The shape of sglang.srt.models.dspark's draft: no head until attach_shared_modules."""

    def __init__(self, own: bool) -> None:
        self.uses_own_vocab_modules = own
        self.lm_head: Any = _Head("UnquantizedEmbeddingMethod") if own else None
        self.embed_tokens: Any = object() if own else None

    def attach_shared_modules(self, *, embed_tokens: Any, lm_head: Any) -> None:
        if not self.uses_own_vocab_modules:
            self.embed_tokens, self.lm_head = embed_tokens, lm_head

    def modules(self) -> Any:
        return iter(())


class DSparkWorkerV2:
    """What DSparkWorkerV2.__init__ leaves behind (dspark_worker_v2.py l.307-324), with its delegating
    __getattr__ (a missing attribute is looked up on the target worker)."""

    def __init__(self, *, own: bool, hosts_draft: bool = True) -> None:
        target = _Target()
        self._target_worker = SimpleNamespace(model_runner=SimpleNamespace(model=target))
        self.server_args = SimpleNamespace(host="0.0.0.0", port=30000)
        self._hosts_draft = hosts_draft
        if not hosts_draft:
            return
        self.draft_model = DSparkDraftModel(own)
        if not getattr(self.draft_model, "uses_own_vocab_modules", False):
            self.draft_model.attach_shared_modules(embed_tokens=target.embed, lm_head=target.lm_head)

    @property
    def target_worker(self) -> Any:
        return self._target_worker

    def __getattr__(self, name: str) -> Any:
        if name == "_target_worker":
            raise AttributeError(name)
        return getattr(self.target_worker, name)


def _dspark_doc(tmp_path: Path, monkeypatch: Any, worker: DSparkWorkerV2) -> dict[str, Any]:
    monkeypatch.setenv(location.ENV_PATH, str(tmp_path / "att" / "attestation.json"))
    state = PluginState()
    hooks.record_dspark(state, worker)
    return json.loads((tmp_path / "att" / "attestation.json").read_text())


def test_dspark_shared_head_is_attested_as_the_targets_module(tmp_path: Path, monkeypatch: Any) -> None:
    doc = _dspark_doc(tmp_path, monkeypatch, DSparkWorkerV2(own=False))
    assert doc["lm_head"] == {
        "shared_module": True,
        "shared_weight": True,
        "remedy_applied": False,
        "worker": "DSparkWorkerV2",
        "own_vocab_modules": False,
        "shared_embed": True,
        "hot_token_count": None,  # no token map narrows DSpark's head
    }
    assert doc["draft"]["lm_head"]["quant_method"] == "Fp8LinearMethod"
    assert doc["draft"]["model_class"] == "DSparkDraftModel"
    assert doc["server"] == {"host": "0.0.0.0", "port": 30000}
    assert doc["hooks"]["init_lm_head"] == "ran" and doc["errors"] == []


def test_dspark_own_vocab_modules_is_told_apart(tmp_path: Path, monkeypatch: Any) -> None:
    doc = _dspark_doc(tmp_path, monkeypatch, DSparkWorkerV2(own=True))
    assert doc["lm_head"]["own_vocab_modules"] is True
    assert doc["lm_head"]["shared_module"] is False and doc["lm_head"]["shared_embed"] is False
    assert doc["draft"]["lm_head"]["quant_method"] == "UnquantizedEmbeddingMethod"


def test_dspark_stage_without_a_draft(tmp_path: Path, monkeypatch: Any) -> None:
    doc = _dspark_doc(tmp_path, monkeypatch, DSparkWorkerV2(own=False, hosts_draft=False))
    assert doc["hooks"]["init_lm_head"] == "ran" and doc["draft"] is None
    assert doc["lm_head"]["worker"] == "DSparkWorkerV2" and doc["lm_head"]["shared_module"] is None


def test_dspark_hook_failure_is_recorded_not_raised(tmp_path: Path, monkeypatch: Any) -> None:
    worker = DSparkWorkerV2(own=False)
    del worker.draft_model  # the delegating __getattr__ then raises AttributeError from the target worker
    doc = _dspark_doc(tmp_path, monkeypatch, worker)
    assert doc["hooks"]["init_lm_head"] == "failed"
    assert any("AttributeError" in e for e in doc["errors"])


def test_dspark_hook_is_registered() -> None:
    assert hooks.HOOKS[hooks.DSPARK_INIT] is hooks.after_dspark_init
