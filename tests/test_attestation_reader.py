"""The attestation reader: strict schema, one-line errors naming the file, staleness."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from validator.errors import InputError, UnavailableError
from validator.plugin.procinfo import process_start_time
from validator.plugin.state import PluginState
from validator.sources.attestation import read_attestation, staleness


def _doc(**process: Any) -> dict[str, Any]:
    doc = PluginState().document(env={})
    doc["process"].update(process)
    doc["sglang"]["version"] = "0.5.23"
    return doc


def _write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "attestation.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_reads_what_the_plugin_writes(tmp_path: Path) -> None:
    att = read_attestation(_write(tmp_path, _doc()))
    assert att.process.pid == os.getpid() and att.hooks["init_lm_head"] == "not_reached"
    assert att.draft is None and att.lm_head.remedy_applied is False


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"schema": "other/v9"}), "schema is 'other/v9'"),
    ],
)
def test_malformed_files_are_input_errors(tmp_path: Path, content: str, needle: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(InputError) as info:
        read_attestation(path)
    assert str(path) in str(info.value) and needle in str(info.value)


def test_wrong_field_is_named(tmp_path: Path) -> None:
    doc = _doc()
    doc["hooks"]["init_lm_head"] = "maybe"
    del doc["lm_head"]["remedy_applied"]
    with pytest.raises(InputError, match=r"attestation.json: .*(hooks|lm_head)"):
        read_attestation(_write(tmp_path, doc))


def test_missing_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="no attestation file"):
        read_attestation(tmp_path / "nope.json")


def test_fresh_attestation_of_a_running_process_is_not_stale(tmp_path: Path) -> None:
    att = read_attestation(_write(tmp_path, _doc(load_weight_s=52.5, tp_size=1)))
    info = {"version": "0.5.23", "tp_size": 1, "internal_states": [{"startup_time": {"load_weight": 52.5}}]}
    assert staleness(att, info) is None


def test_previous_run_is_stale(tmp_path: Path) -> None:
    here = socket.gethostname()
    gone = read_attestation(_write(tmp_path, _doc(pid=2**22 + 12345, hostname=here)))
    assert "not running" in (staleness(gone, {"version": "0.5.23"}) or "")
    me = process_start_time(os.getpid())
    assert me is not None
    reused = read_attestation(_write(tmp_path, _doc(start_time=me - 3600, hostname=here)))
    assert "PID" in (staleness(reused, {}) or "")
    other_load = read_attestation(_write(tmp_path, _doc(load_weight_s=52.5, tp_rank=0)))
    info = {"internal_states": [{"startup_time": {"load_weight": 61.0}}]}
    assert "another server run" in (staleness(other_load, info) or "")
    assert "SGLang 0.5.23" in (staleness(other_load, {"version": "0.5.24"}) or "")
