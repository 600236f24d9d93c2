"""``spec.lm_head_shared`` reads when the installed build skips sharing the head module (issue 29, item 1).

SGLang 0.5.23's ``eagle_worker_v2.py`` ``init_lm_head`` calls ``set_lm_head_from_target`` only when
``self.hot_token_id is None`` (set by ``init_token_map`` from ``--speculative-token-map``, except under
EAGLE3) and the draft model's own ``hot_token_id`` is None; otherwise the draft gets a sliced clone of the
head's data, which with the FP8 head is the FP8-codes-as-BF16 trap. The condition is read from the
build's own file (the real wheel's, copied into each test build), and each case runs the real CLI.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import preflight_json
from tests.support.in_process import preflight_json_in_process
from tests.support.sglang_wheel import sglang_root
from tests.test_preflight import Server, _server

SHARED = "spec.lm_head_shared"


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("share"), "patched")


def _check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


def _token_map(tmp_path: Path) -> Path:
    path = tmp_path / "hot-tokens.pt"
    path.write_bytes(b"PK\x03\x04")  # the server loads it with torch; preflight never opens it
    return path


def test_the_real_build_skips_sharing_under_a_token_map() -> None:
    """The property, in 0.5.23's own file: the hook is called under a hot_token_id test."""
    text = (sglang_root() / "srt" / "speculative" / "eagle_worker_v2.py").read_text()
    assert "and self.hot_token_id is None" in text
    assert "self.draft_runner.model.set_lm_head_from_target(" in text
    assert "self.hot_token_id = load_token_map(get_spec().speculative_token_map)" in text


def test_a_token_map_fails_before_start_naming_the_flag(patched: Server, tmp_path: Path) -> None:
    rc, report, err = preflight_json_in_process(patched.env, "--launch-cmd", patched.cmd())
    assert rc == 0 and _check(report, SHARED)["status"] == "pass", err  # the control: the recipe shares
    flag = f"--speculative-token-map {_token_map(tmp_path)}"
    rc, report, err = preflight_json_in_process(patched.env, "--launch-cmd", patched.cmd(flag))
    shared = _check(report, SHARED)
    assert rc == 78 and shared["status"] == "fail", (err, shared)
    assert "--speculative-token-map" in shared["message"] and "--speculative-token-map" in shared["remedy"]
    # the FP8 head off: the copy holds BF16 weights, nothing to mis-read
    env = {**patched.env, "SGLANG_ENABLE_FP8_LM_HEAD": "0"}
    rc, report, err = preflight_json_in_process(env, "--launch-cmd", patched.cmd(flag))
    assert _check(report, SHARED)["status"] == "skip", err


def test_the_condition_is_the_builds_own(tmp_path: Path) -> None:
    """A build whose worker shares whatever the token map (its condition has no hot_token_id test) is
    not failed for the flag: the reading follows the file, not a list of flags."""
    server = _server(tmp_path, "lenient")
    worker = tmp_path / "lenient" / "site-packages" / "sglang" / "srt" / "speculative" / "eagle_worker_v2.py"
    text = worker.read_text()
    assert "                and self.hot_token_id is None\n" in text
    worker.write_text(text.replace("                and self.hot_token_id is None\n", "", 1))
    flag = f"--speculative-token-map {_token_map(tmp_path)}"
    rc, report, err = preflight_json_in_process(server.env, "--launch-cmd", server.cmd(flag))
    assert rc == 0 and _check(report, SHARED)["status"] == "pass", err


def test_a_draft_that_sets_its_own_hot_token_id_fails(tmp_path: Path) -> None:
    server = _server(tmp_path, "own-tokens")
    nextn = tmp_path / "own-tokens" / "site-packages" / "sglang" / "srt" / "models" / "bailing_moe_nextn.py"
    head = "class BailingMoeForCausalLMNextN(nn.Module):\n"
    text = nextn.read_text()
    assert head in text
    own = "    def load_hot_tokens(self, loaded_weight):\n        self.hot_token_id = loaded_weight\n\n"
    nextn.write_text(text.replace(head, head + own, 1))
    rc, report, err = preflight_json_in_process(server.env, "--launch-cmd", server.cmd())
    shared = _check(report, SHARED)
    assert rc == 78 and shared["status"] == "fail", (err, shared)
    assert "hot_token_id" in shared["message"] and "BailingMoeForCausalLMNextN" in shared["message"]


# ---- live: the plugin's attestation records the narrowing, and the check names it ----


class _Hot:
    """Stands in for the worker's hot_token_id tensor (``init_token_map``): only its shape is read."""

    shape = (32768,)


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: object) -> dict[str, Any]:
    import json
    from types import SimpleNamespace

    from validator.attestation import location
    from validator.plugin import hooks
    from validator.plugin.state import PluginState

    monkeypatch.setenv(location.ENV_PATH, str(tmp_path / "att.json"))
    head = SimpleNamespace(weight=object())
    target, draft = SimpleNamespace(lm_head=head), SimpleNamespace(lm_head=SimpleNamespace(weight=object()))
    hooks.record_lm_head(PluginState(), target, [draft], shares_itself=True, worker=worker)
    doc: dict[str, Any] = json.loads((tmp_path / "att.json").read_text())
    return doc


def test_the_plugin_attests_a_head_narrowed_by_a_token_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    doc = _record(tmp_path, monkeypatch, SimpleNamespace(hot_token_id=_Hot()))
    assert doc["lm_head"]["hot_token_count"] == 32768 and doc["lm_head"]["shared_module"] is False
    doc = _record(tmp_path, monkeypatch, SimpleNamespace(hot_token_id=None))  # the control: no map
    assert doc["lm_head"]["hot_token_count"] is None


# ---- a second local user owns the install: hostile worker files are never a pass, never a wait ----


def test_hostile_worker_files_of_another_user_are_no_pass() -> None:
    """As a REAL second user (setpriv): the install's owner puts a FIFO where eagle_worker_v2.py is, a
    /dev/zero symlink and a method nested past the parser among the worker files. The reader (root here)
    neither blocks nor reads for ever, and a token-map launch is error (not proven), never pass."""
    from tests.support.second_user import ensure_user

    user = ensure_user()
    tmp_path = Path(tempfile.mkdtemp(prefix="sv-hostile-install-", dir="/tmp"))  # the user can reach it
    tmp_path.chmod(0o755)
    try:
        _hostile_install(user, tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _hostile_install(user: Any, tmp_path: Path) -> None:
    from tests.support.second_user import run_as

    server = _server(tmp_path, "hostile")
    for d in (tmp_path / "hostile", tmp_path / "hostile" / "site-packages"):
        d.chmod(0o755)
    spec = tmp_path / "hostile" / "site-packages" / "sglang" / "srt" / "speculative"
    os.chown(spec, user.uid, user.gid)
    (spec / "eagle_worker_v2.py").unlink()
    deep = "class W:\n    def init_lm_head(self):\n        x = " + "(" * 5000 + ")" * 5000
    deep += "\n        self.draft.set_lm_head_from_target(x)\n"
    script = (
        "import os, sys; d = sys.argv[1]; os.mkfifo(os.path.join(d, 'eagle_worker_v2.py'));"
        "os.symlink('/dev/zero', os.path.join(d, 'a_zero_worker.py'));"
        "open(os.path.join(d, 'b_deep_worker.py'), 'w').write(sys.argv[2])"
    )
    made = run_as(user, [sys.executable, "-c", script, str(spec), deep])
    assert made.returncode == 0, made.stderr
    assert (spec / "eagle_worker_v2.py").stat().st_uid == user.uid
    flag = f"--speculative-token-map {_token_map(tmp_path)}"
    started = time.monotonic()
    rc, report, err = preflight_json(server.env, "--launch-cmd", server.cmd(flag), timeout=60)
    assert time.monotonic() - started < 60
    shared = _check(report, SHARED)
    assert rc == 69 and shared["status"] == "error", (err, shared)
    assert "cannot be read" in shared["message"] and "Traceback" not in err
