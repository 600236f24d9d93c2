"""The plugin's process guard, atomic writer and never-raise behaviour."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import validator.plugin as plugin
from validator.plugin import hooks, writer
from validator.plugin.procinfo import process_start_time
from validator.plugin.state import PluginState


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


def test_paths_per_rank(monkeypatch: Any) -> None:
    env = {writer.ENV_PATH: "/srv/att/attestation.json"}
    assert writer.attestation_path(0, env) == Path("/srv/att/attestation.json")
    assert writer.attestation_path(3, env) == Path("/srv/att/attestation.tp3.json")
    assert writer.attestation_path(0, {}) == writer.DEFAULT_PATH


def test_atomic_write_leaves_no_temporaries(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "attestation.json"
    writer.write_atomic(path, {"a": 1})
    writer.write_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["attestation.json"]


def test_start_time_of_this_process_is_in_the_past() -> None:
    started = process_start_time(os.getpid())
    assert started is not None and started <= time.time()
    assert process_start_time(2**22 + 12345) is None


def test_hooks_swallow_errors_and_record_them(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(writer.ENV_PATH, str(tmp_path / "att.json"))
    state = PluginState()
    hooks.record_model_loaded(state, SimpleNamespace())  # no .model: AttributeError inside
    doc = json.loads((tmp_path / "att.json").read_text())
    assert doc["hooks"]["model_loaded"] == "failed"
    assert any("AttributeError" in e for e in doc["errors"])
    hooks.record_lm_head(state, object(), [object()], shares_itself=True)
    doc = json.loads((tmp_path / "att.json").read_text())
    assert doc["hooks"]["init_lm_head"] == "ran" and doc["lm_head"]["shared_module"] is None
