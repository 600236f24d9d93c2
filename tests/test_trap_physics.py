"""The FP8-LM-head + MTP trap, measured with real torch on CPU, and the plugin's view of it.

A draft that holds only the target's FP8 weight tensor under its own unquantized method proposes garbage
(acceptance length 1.00); sharing the whole module restores it; the plugin's inspection tells the two
apart and its remedy turns the first into the second.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.support.prerequisite import missing

if importlib.util.find_spec("torch") is None:
    missing("torch not installed (pip install torch==2.13.0, CPU build)")

from validator.plugin import hooks
from validator.plugin.state import PluginState


def _trap() -> ModuleType:
    """tests/support/plugin_trap.py (it imports torch), imported when a test runs, not when every xdist
    worker collects the suite."""
    import tests.support.plugin_trap as trap

    return trap


PROMPT = list(range(1, 17))
MAX_NEW = 128


class _Spec:
    def is_none(self) -> bool:
        return False


def _runner(model: Any, draft: bool) -> SimpleNamespace:
    return SimpleNamespace(model=model, is_draft_worker=draft, spec_algorithm=_Spec(), weight_load_time=0.5)


def _serve(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, *, remedy: bool, native: bool = False):
    """Load target and draft, share heads like EagleDraftWorker.init_lm_head, with the plugin's hooks."""
    monkeypatch.setenv("SPARK_VALIDATE_ATTESTATION", str(tmp_path / "att.json"))
    if remedy:
        monkeypatch.setenv("SPARK_VALIDATE_SHARE_LM_HEAD", "1")
    else:
        monkeypatch.delenv("SPARK_VALIDATE_SHARE_LM_HEAD", raising=False)
    state = PluginState()
    target, draft = _trap().build(with_share_method=native)
    hooks.record_model_loaded(state, _runner(target, draft=False))
    hooks.record_model_loaded(state, _runner(draft, draft=True))
    _trap().eagle_init_lm_head(target, draft)
    hooks.record_lm_head(state, target, [draft], shares_itself=True)
    return state, target, draft


def _generate(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any, what: str, **serve: bool):
    """Serve (``_serve``), generate greedily with speculation, and print what it accepted: the figure the
    trap is about, shown in the test run."""
    state, target, draft = _serve(tmp_path, monkeypatch, **serve)
    result = _trap().speculative_generate(target, draft, PROMPT, MAX_NEW)
    with capsys.disabled():
        print(
            f"\n[trap] {what}: accept length {result.accept_length:.2f} "
            f"({result.correct_drafts} drafts accepted in {result.verify_ct} verify rounds)"
        )
    return state, target, draft, result


def test_stock_draft_is_broken_and_the_plugin_says_so(tmp_path, monkeypatch, capsys):
    state, _, _, result = _generate(
        tmp_path, monkeypatch, capsys, "tensor-only sharing (stock)", remedy=False
    )
    assert f"{result.accept_length:.2f}" == "1.00"
    assert state.shared_module is False and state.shared_weight is True
    assert state.target is not None and state.target.lm_head is not None
    assert state.target.lm_head.quant_method == "Fp8LinearMethod"
    assert state.target.lm_head.has_weight_scale is True
    assert state.draft is not None and state.draft.lm_head is not None
    assert dataclasses.asdict(state.draft.lm_head) == {
        "module_class": "ParallelLMHead",
        "quant_method": "UnquantizedEmbeddingMethod",
        "weight_dtype": "float8_e4m3fn",
        "weight_shape": [32768, 64],
        "has_weight_scale": False,
        "has_input_scale": False,
    }
    assert state.nextn_has_method is False and state.remedy_applied is False
    assert state.errors == []


def test_shared_module_accepts_well_above_one(tmp_path, monkeypatch, capsys):
    what = "whole-module sharing (patched build)"
    state, _, _, result = _generate(tmp_path, monkeypatch, capsys, what, remedy=False, native=True)
    assert result.accept_length > 2.5
    assert state.shared_module is True and state.shared_weight is True
    assert state.draft is not None and state.draft.lm_head is not None
    assert state.draft.lm_head.quant_method == "Fp8LinearMethod"
    assert state.nextn_has_method is True and state.remedy_applied is False


def test_remedy_turns_the_broken_setup_into_the_working_one(tmp_path, monkeypatch, capsys):
    what = "stock build + SPARK_VALIDATE_SHARE_LM_HEAD=1"
    state, target, draft, result = _generate(tmp_path, monkeypatch, capsys, what, remedy=True)
    assert state.remedy_applied is True
    assert state.nextn_has_method is False  # what the installed build had, before the remedy
    assert state.shared_module is True
    assert draft.lm_head is target.lm_head
    assert result.accept_length > 2.5
    # Same greedy output either way: speculation is lossless, only its speed differs.
    broken_target, broken_draft = _trap().build()
    _trap().eagle_init_lm_head(broken_target, broken_draft)
    broken = _trap().speculative_generate(broken_target, broken_draft, PROMPT, MAX_NEW)
    assert broken.tokens[:MAX_NEW] == result.tokens[:MAX_NEW]
