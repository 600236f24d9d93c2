"""The files a verdict trusts, attacked by a real second local user (``tests/support/second_user.py``).

Each attack is the one that turned a wrong-backend launch from FAIL into PASS, or a broken server from
inconclusive into PASS: a rule pack (and a directory of that name) planted in a shared working directory; a
flag-table cache planted under the build's key (computable from world-readable SGLang files) that re-points
``--moe-runner-backend``; and, in a Kubernetes emptyDir-like layout (a world-writable parent holding the
plugin's 0700 directory), the attestation directory renamed away and replaced by a document naming the
attacker's own process with the rest copied from the server's public state. The attacker's steps run under
``setpriv`` as that user, on real directories; the victim runs the real CLI. Every attack must come out
refused or inconclusive, and a control shows the same legitimate file in a private place still used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.check_helpers import run_check
from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import REPO, run_cli
from tests.support.launch_recipe import RECIPE_CMD, RECIPE_ENV
from tests.support.second_user import User, run_as
from tests.support.sim_process import SimProcess, sim_process
from tests.test_sglang_table import DEV, dev_build, dev_table
from validator.attestation import schema, writer
from validator.errors import InputError, UnavailableError
from validator.probe import load_prompts
from validator.procinfo import process_start_time
from validator.sources.server.attestation import read_attestation
from validator.sources.sglang.tables import build_key, store

PACK = "ling-3.0-flash-dgx-spark"
BUILTIN = REPO / "validator" / "data" / "rules" / f"{PACK}.yaml"
WRONG_BACKEND = RECIPE_CMD.replace("--moe-runner-backend humming", "--moe-runner-backend triton")


def _attack(user: User, script: str, cwd: Path, data: bytes | None = None) -> None:
    done = run_as(user, ["sh", "-c", script], input=data, cwd=str(cwd))
    assert done.returncode == 0, done.stderr.decode(errors="replace")


_LING: dict[str, Path] = {}


@pytest.fixture(scope="module", autouse=True)
def _ling_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A Ling checkpoint for ``--rules auto``, which chooses no pack for a model nothing names."""
    _LING["model"] = tmp_path_factory.mktemp("ling") / "Ling-3.0-flash-fp4"
    write_checkpoint(_LING["model"], small=False)


def _preflight(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    if "auto" in args:
        args = (*args, "--model-dir", str(_LING["model"]))
    full = {**os.environ, **RECIPE_ENV, **(env or {})}
    proc = run_cli("preflight", "--format", "json", *args, env=full, cwd=cwd, timeout=120)
    report = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
    return proc.returncode, report, proc.stderr


def _status(report: dict[str, Any], check_id: str) -> str:
    return next(str(c["status"]) for c in report["checks"] if c["id"] == check_id)


def _message(report: dict[str, Any], check_id: str) -> str:
    return json.dumps(next(c for c in report["checks"] if c["id"] == check_id))


# --- rule packs ---------------------------------------------------------------------------------------


def _forged_pack() -> bytes:
    """The built-in pack, expecting the wrong backend: what would make the triton launch pass."""
    text = BUILTIN.read_text()
    forged = text.replace("\n  moe_runner_backend: humming\n", "\n  moe_runner_backend: triton\n")
    assert forged != text
    return forged.encode()


@pytest.mark.parametrize("rules", [None, PACK, "auto"])
def test_a_pack_planted_in_a_shared_cwd_is_never_used(
    attacker: User, shared: Path, tmp_path: Path, rules: str | None
) -> None:
    args = ["--launch-cmd", WRONG_BACKEND] + (["--rules", rules] if rules else [])
    rc_clean, clean, _ = _preflight(tmp_path, *args)
    assert rc_clean == 78 and _status(clean, "moe.backend") == "fail"
    # the pack's file name, and its bare name (what a lookup in the current directory would find first)
    _attack(attacker, f"tee {PACK}.yaml > {PACK} && chmod 644 {PACK}.yaml {PACK}", shared, _forged_pack())
    rc, report, err = _preflight(shared, *args)
    assert rc == 78, err
    assert _status(report, "moe.backend") == "fail"  # the planted pack expects triton: it would pass


def test_a_directory_named_like_the_pack_changes_nothing(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    _attack(attacker, f"mkdir {PACK}.yaml {PACK}", shared)
    for rules in (None, PACK, "auto"):
        args = ["--launch-cmd", WRONG_BACKEND] + (["--rules", rules] if rules else [])
        rc, report, err = _preflight(shared, *args)
        assert rc == 78 and _status(report, "moe.backend") == "fail", (rules, err)


def test_a_pack_named_by_path_in_a_shared_directory_is_refused_naming_it(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    _attack(attacker, "cat > site.yaml && chmod 644 site.yaml", shared, _forged_pack())
    rc, _, err = _preflight(tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", str(shared / "site.yaml"))
    assert rc == 65 and str(shared / "site.yaml") in err and "anyone could have written" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # the attacker's own directory (0755, nobody else can write it) is still not the reading user's
    _attack(
        attacker,
        "mkdir -m 755 packs && cat > packs/site.yaml && chmod 644 packs/site.yaml",
        shared,
        _forged_pack(),
    )
    theirs = shared / "packs" / "site.yaml"
    rc, _, err = _preflight(tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", str(theirs))
    assert rc == 65 and "not trusted as a rule pack" in err and f"owned by UID {attacker.uid}" in err, err
    # control: the same pack file, written by this user in a private directory, is the operator's choice
    mine = tmp_path / "site.yaml"
    mine.write_bytes(_forged_pack())
    rc, report, err = _preflight(tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", str(mine))
    assert rc != 65 and _status(report, "moe.backend") == "pass", err


# --- the generated flag table ------------------------------------------------------------------------


def _repointing_table() -> str:
    """A table for the dev build in which ``--moe-runner-backend`` no longer sets moe_runner_backend, whose
    default becomes humming: every launch then reads as the recipe's backend."""
    table: dict[str, Any] = json.loads(dev_table())
    real = next(a for a in table["actions"] if a["dest"] == "moe_runner_backend")
    decoy = {**real, "dest": "moe_runner_backend_requested", "default": None}
    real.update(option_strings=["--moe-runner-backend-unused"], default="humming")
    table["actions"].append(decoy)
    table["n_actions"] = len(table["actions"])
    return json.dumps(table)


def _table_run(root: Path, cache: Path) -> tuple[int, dict[str, Any], str]:
    env = {"SPARK_VALIDATE_CACHE_DIR": str(cache)}
    return _preflight(REPO, "--sglang-root", str(root), "--launch-cmd", WRONG_BACKEND, env=env)


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """A dev build: another version, its own flag sources, so the cache's table is the one parsed with."""
    return dev_build(tmp_path)


def test_a_planted_flag_table_is_ignored_and_says_so(
    attacker: User, shared: Path, tmp_path: Path, build: Path
) -> None:
    key = build_key(build, DEV)  # what the attacker computes from the build's world-readable files
    # control first: this user's own table, in its private cache, is used and re-points the flag (the
    # attack's table is effective when trusted)
    private = tmp_path / "cache"
    store(_repointing_table(), build, DEV, {"SPARK_VALIDATE_CACHE_DIR": str(private)})
    rc, report, _ = _table_run(build, private)
    assert _status(report, "moe.backend") == "pass"
    assert f"table generated from SGLang {DEV}" in _message(report, "launch.warnings")
    # the attack: the victim's cache in a shared directory, the attacker's table under the build's key
    cache = shared / "cache"
    _attack(
        attacker,
        f"mkdir -p cache/sglang-tables && cat > cache/sglang-tables/{key}.json",
        shared,
        _repointing_table().encode(),
    )
    rc, report, err = _table_run(build, cache)
    assert rc == 78 and _status(report, "moe.backend") == "fail", err
    shown = _message(report, "launch.warnings")
    assert "the generated table was ignored" in shown and f"{key}.json" in shown and "leniently" in shown


def test_a_flag_table_cache_below_a_world_writable_directory_is_never_written_or_trusted(
    attacker: User, shared: Path, build: Path
) -> None:
    """The victim's cache inside a world-writable parent: anyone could rename it away and put another in
    its place, so the parent alone disqualifies it. The writer refuses to make it (naming the parent), and
    a table the second user plants there under the build's key is ignored."""
    key = build_key(build, DEV)
    cache = shared / "cache"
    with pytest.raises(
        UnavailableError, match="directory /tmp on the way is writable by its group or others"
    ):
        store(dev_table(), build, DEV, {"SPARK_VALIDATE_CACHE_DIR": str(cache)})
    assert list(shared.iterdir()) == []  # nothing of the victim's was made there
    _attack(
        attacker,
        f"mkdir -p cache/sglang-tables && cat > cache/sglang-tables/{key}.json",
        shared,
        _repointing_table().encode(),
    )
    rc, report, err = _table_run(build, cache)
    assert rc == 78 and _status(report, "moe.backend") == "fail", err
    assert "the generated table was ignored" in _message(report, "launch.warnings")


def test_the_table_writer_refuses_a_directory_it_does_not_own(attacker: User, tmp_path: Path) -> None:
    """The cache directory (or one on the way) is the second user's, though nobody else can write it."""
    for mine, theirs in (("cache", "cache/sglang-tables"), ("", "cache")):
        (tmp_path / theirs).mkdir(parents=True, mode=0o755)
        os.chown(tmp_path / theirs, attacker.uid, attacker.gid)
        root = dev_build(tmp_path / f"build-src{len(mine)}")
        with pytest.raises(UnavailableError, match=f"{tmp_path / theirs}.* owned by UID {attacker.uid}"):
            store(dev_table(), root, DEV, {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")})
        assert list((tmp_path / theirs).iterdir()) == []
        shutil.rmtree(tmp_path / "cache")


# --- the attestation ---------------------------------------------------------------------------------


def _wait_file(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    assert path.exists(), path


@pytest.fixture
def squatter(attacker: User) -> Iterator[int]:
    """A process of the attacker's own, for its document to name."""
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={attacker.uid}", f"--regid={attacker.gid}", "--clear-groups", "sleep", "60"]
    )
    try:
        for _ in range(100):
            if process_start_time(proc.pid) is not None:
                break
            time.sleep(0.02)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def _forged_document(server: SimProcess, pid: int, user: User) -> bytes:
    """The broken server's own account made healthy, naming the attacker's process: the host, port, build
    and weight-load seconds are what ``/server_info`` shows anyone."""
    doc = read_attestation(server.attestation)
    start = process_start_time(pid)
    assert start is not None
    process = dataclasses.replace(doc.process, pid=pid, start_time=start, uid=user.uid)
    head = dataclasses.replace(doc.lm_head, shared_module=True, shared_weight=True)
    return schema.to_json(dataclasses.replace(doc, process=process, lm_head=head))


def _assert_refused(run: Any, *reasons: str) -> None:
    assert run.report is not None, run.explain()
    assert run.report["verdict"] != "pass" and run.rc in (69, 78), run.explain()
    trust = run.check("attestation.trust")
    assert trust["status"] == "error", run.explain()
    for reason in reasons:
        assert reason in trust["message"], trust["message"]
    assert run.status("spec.lm_head_shared") != "pass", run.explain()


def test_attestation_in_a_private_layout_binds(tmp_path: Path, attacker: User) -> None:
    """The control: the server's own document, in directories only root and the server's user can write,
    binds to the process listening on the URL."""
    with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as broken:
        _wait_file(broken.attestation)
        run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(broken.attestation))
        assert run.rc == 78, run.explain()
        assert run.status("attestation.trust") == "pass"
        assert f"listening on port {broken.port}" in run.check("attestation.trust")["message"]
        assert run.status("spec.lm_head_shared") == "fail"  # the document's own finding stands
        # --server-user: where the listener is visible, it must be that process's user
        args = ("--wait", "20", "--no-probe", "--attestation", str(broken.attestation))
        assert (
            run_check(broken.url, *args, "--server-user", str(os.geteuid())).status("attestation.trust")
            == "pass"
        )
        wrong = run_check(broken.url, *args, "--server-user", attacker.name)
        assert wrong.status("attestation.trust") == "error"
        assert (
            f"not the declared --server-user (UID {attacker.uid})"
            in wrong.check("attestation.trust")["message"]
        )
        unknown = run_check(broken.url, *args, "--server-user", "no-such-user-here")
        assert unknown.rc == 2 and "no such user" in unknown.stderr


def test_attestation_swapped_in_an_emptydir_like_layout(
    attacker: User, shared: Path, squatter: int, tmp_path: Path
) -> None:
    """A 0700 directory of the server's user inside a world-writable emptyDir: the plugin refuses to write
    there; a document put there all the same (a copy of the server's own) is refused, and so is the one
    the second user renames in."""
    private = shared / "attestation"
    with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as broken:
        _wait_file(broken.attestation)
        with pytest.raises(Exception, match="directory /tmp on the way is writable by its group or others"):
            writer.write_document(private / broken.attestation.name, read_attestation(broken.attestation))
        private.mkdir(mode=0o700)  # the layout as an older writer made it, as the server's user
        shutil.copy(broken.attestation, private / broken.attestation.name)
        copy = private / broken.attestation.name
        args = ("--wait", "20", "--no-probe", "--attestation", str(copy))
        _assert_refused(run_check(broken.url, *args), f"directory {shared} is writable by others")
        forged = _forged_document(broken, squatter, attacker)
        name = broken.attestation.name
        _attack(
            attacker,
            f"mv attestation gone && mkdir -m 700 attestation && cat > attestation/{name} "
            f"&& chmod 644 attestation/{name}",
            shared,
            forged,
        )
        assert copy.stat().st_uid == attacker.uid  # the swap took place
        _assert_refused(
            run_check(broken.url, *args),
            f"PID {squatter} is neither the process listening on port {broken.port}",
            f"directory {shared} is writable by others",
            f"owned by UID {attacker.uid}",
        )


def test_attestation_planted_before_the_server_in_a_sticky_shared_directory(
    attacker: User, squatter: int, tmp_path: Path
) -> None:
    """A /tmp-like directory (root's, sticky, world-writable): the attacker creates the server's directory
    first and puts its document there; the plugin then refuses to write, and the reader refuses the file."""
    sticky = Path(tempfile.mkdtemp(prefix="sv-sticky-", dir="/tmp"))
    os.chmod(sticky, 0o1777)
    try:
        with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as broken:
            _wait_file(broken.attestation)
            target = sticky / "attestation" / broken.attestation.name
            _attack(
                attacker,
                f"mkdir -m 700 attestation && cat > attestation/{target.name} "
                f"&& chmod 644 attestation/{target.name}",
                sticky,
                _forged_document(broken, squatter, attacker),
            )
            with pytest.raises(
                Exception, match="directory /tmp on the way is writable by its group or others"
            ):
                writer.write_document(target, read_attestation(broken.attestation))  # the plugin refuses
            run = run_check(broken.url, "--wait", "20", "--no-probe", "--attestation", str(target))
            _assert_refused(
                run,
                f"PID {squatter} is neither the process listening",
                f"directory {sticky} is writable by others",
            )
    finally:
        shutil.rmtree(sticky, ignore_errors=True)


# --- the other files a verdict trusts ----------------------------------------------------------------


def test_an_environment_file_planted_in_a_shared_directory_is_refused(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """A unit naming an EnvironmentFile= in a directory others can write: whoever writes it decides
    what preflight believes the server's environment is."""
    env_text = b"SGLANG_ENABLE_FP8_LM_HEAD=1\n"
    _attack(attacker, "cat > sglang.env && chmod 644 sglang.env", shared, env_text)
    recipe = RECIPE_CMD.split(" ", 1)[1]
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nEnvironmentFile={shared / 'sglang.env'}\nExecStart=/usr/bin/python3 {recipe}\n"
    )
    rc, _, err = _preflight(tmp_path, "--unit", str(unit), env={"SGLANG_ENABLE_FP8_LM_HEAD": ""})
    assert rc == 65 and f"{shared / 'sglang.env'}" in err and "anyone could have written" in err, err
    assert "Traceback" not in err
    # control: the same file where only root and this user can write it
    mine = tmp_path / "sglang.env"
    mine.write_bytes(env_text)
    unit.write_text(f"[Service]\nEnvironmentFile={mine}\nExecStart=/usr/bin/python3 {recipe}\n")
    rc, report, err = _preflight(tmp_path, "--unit", str(unit))
    assert rc != 65 and str(mine) not in err and report["checks"], err


def test_probe_prompts_of_another_user_are_refused(attacker: User, shared: Path, tmp_path: Path) -> None:
    """A pack's prompt file decides what the acceptance probe measures: trusted as the pack is."""
    text = (REPO / "validator" / "data" / "rules" / "probe-prompts.yaml").read_bytes()
    _attack(attacker, "mkdir -m 755 p && cat > p/prompts.yaml && chmod 644 p/prompts.yaml", shared, text)
    with pytest.raises(InputError, match=f"owned by UID {attacker.uid}"):
        load_prompts(shared / "p" / "prompts.yaml")
    mine = tmp_path / "prompts.yaml"
    mine.write_bytes(text)
    assert load_prompts(mine)  # control


def _site_pack() -> bytes:
    """A site's own recipe: the built-in pack renamed, recognising and expecting the triton backend."""
    text = BUILTIN.read_text().replace(f"  name: {PACK}\n", "  name: site-triton\n", 1)
    text = text.replace("\n  moe_runner_backend: humming\n", "\n  moe_runner_backend: triton\n")
    assert "site-triton" in text and "moe_runner_backend: humming" not in text
    return text.encode()


def test_rules_auto_chooses_among_an_explicit_directory_only_when_it_is_trusted(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "packs"
    mine.mkdir()
    (mine / "site-triton.yaml").write_bytes(_site_pack())
    rc, report, err = _preflight(tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", "auto")
    assert report["rule_pack"] == PACK and _status(report, "moe.backend") == "fail", err
    rc, report, err = _preflight(
        tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", "auto", "--rules-dir", str(mine)
    )
    assert report["rule_pack"] == "site-triton" and _status(report, "moe.backend") == "pass", err
    # the same pack, put there by the other user: the directory is refused before it is listed
    _attack(attacker, "mkdir -m 755 packs && cat > packs/site-triton.yaml", shared, _site_pack())
    rc, _, err = _preflight(
        tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", "auto", "--rules-dir", str(shared / "packs")
    )
    assert rc == 65 and f"--rules-dir: directory {shared / 'packs'} is owned by UID {attacker.uid}" in err, (
        err
    )
    assert "anyone could put a pack there" in err and "site-triton" not in err, err
    # a directory is for auto only; a pack in it may not take a built-in's name
    rc, _, err = _preflight(tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules-dir", str(mine))
    assert rc == 2 and "needs --rules auto" in err, err
    (mine / "shadow.yaml").write_bytes(BUILTIN.read_bytes())
    rc, _, err = _preflight(
        tmp_path, "--launch-cmd", WRONG_BACKEND, "--rules", "auto", "--rules-dir", str(mine)
    )
    assert rc == 65 and f"pack name {PACK!r} is already the pack" in err, err


def test_a_log_another_user_wrote_is_no_evidence_of_any_check(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The server runs a BF16 head (``fp8-ignored``). The second user writes a healthy server's log, with
    this server's port in it, into a shared directory, and the operator names it: its FP8-head lines made
    ``lm_head.fp8`` pass (only progress was refused from such a log). A log that anyone but root, this user
    and the server's could have written is now no evidence at all."""
    from tests.support.sim_process import wait_healthy

    with sim_process(tmp_path, "--scenario", "healthy,no-plugin") as healthy:
        wait_healthy(healthy.url)
        _wait_file(healthy.log)
        text, port = healthy.log.read_text(), healthy.port
    with sim_process(tmp_path, "--scenario", "fp8-ignored,no-plugin") as broken:
        wait_healthy(broken.url)
        _attack(attacker, "cat > sglang.log", shared, text.replace(str(port), str(broken.port)).encode())
        own = run_check(broken.url, "--wait", "20", "--no-probe", "--log", str(broken.log))
        assert own.status("lm_head.fp8") == "fail", own.explain()  # control: the server's own log
        run = run_check(broken.url, "--wait", "20", "--no-probe", "--log", str(shared / "sglang.log"))
    assert run.status("lm_head.fp8") != "pass" and run.report is not None, run.explain()
    assert run.report["verdict"] != "pass" and run.status("server.log") == "error", run.explain()
    said = run.check("server.log")["message"]
    assert f"not read as evidence: it is owned by UID {attacker.uid}" in said, said


def test_a_log_another_user_put_at_the_name_for_a_while_leaves_no_fact_behind(
    attacker: User, tmp_path: Path
) -> None:
    """The server's log in a sticky shared directory: the owner rotates it away, the second user puts a
    healthy server's log at the name (refused: theirs), then removes it and the owner creates a new empty
    log (logrotate's ``create``). Read at the rotation, the second user's lines stayed in the reader's
    facts (an FP8 head line: lm_head.fp8 PASS in serve's /report for a BF16 head). None of them is read."""
    from tests.support.sim_process import wait_healthy
    from validator.errors import UnavailableError
    from validator.sources.server.log_file import FileLogReader

    texts = {}
    for scenario in ("healthy,no-plugin", "fp8-ignored,no-plugin"):
        with sim_process(tmp_path, "--scenario", scenario) as sim:
            wait_healthy(sim.url)
            _wait_file(sim.log)
            texts[scenario] = sim.log.read_text()
    sticky = Path(tempfile.mkdtemp(prefix="sv-sticky-", dir="/tmp"))
    os.chmod(sticky, 0o1777)
    try:
        log = sticky / "sglang.log"
        log.write_text(texts["fp8-ignored,no-plugin"])
        reader = FileLogReader(log)
        assert reader.poll().fp8_lm_head_lines == 0  # the server's own log: a BF16 head
        log.rename(sticky / "sglang.log.1")
        _attack(attacker, "cat > sglang.log", sticky, texts["healthy,no-plugin"].encode())
        with pytest.raises(UnavailableError, match=f"owned by UID {attacker.uid}"):
            reader.poll()
        _attack(attacker, "rm -f sglang.log", sticky)
        log.write_text("")
        assert reader.poll().fp8_lm_head_lines == 0
    finally:
        shutil.rmtree(sticky, ignore_errors=True)
