"""Symbolic links and special files on the way to a rule pack or its prompts, planted by a second local user.

A link planted in a directory anyone can write, pointing at a trusted file (a built-in pack, a lenient pack
the operator keeps in a private directory), must not make that directory trusted: whoever planted it would
choose the pack a verdict is judged by. The trusted reader walks the link itself, so the path is never
resolved before it is read. A FIFO in a ``--rules-dir`` must not block ``--rules auto`` for ever.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import REPO, run_cli
from tests.support.gb10_host import gb10_host, host_env
from tests.support.in_process import preflight_json_in_process
from tests.support.prerequisite import missing
from tests.support.second_user import User, run_as
from validator.errors import InputError
from validator.probe import load_prompts
from validator.rulepack import load_pack
from validator.trusted_files import creatable_by_others

RULES = REPO / "validator" / "data" / "rules"
BASELINE = RULES / "ling-3.0-flash-baseline.yaml"
PROMPTS = RULES / "probe-prompts.yaml"


def _plant_link(user: User, target: Path, link: Path) -> None:
    done = run_as(user, ["ln", "-s", str(target), str(link)])
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def _root_only(tmp_path: Path, name: str, text: str) -> Path:
    """A directory only root can list, holding ``name``: where the other user's links point."""
    secret = tmp_path / "rootonly"
    secret.mkdir(mode=0o700)
    (secret / name).write_text(text)
    return secret


def _refused(rules: str, where: Path) -> None:
    proc = run_cli("rules", "--rules", rules, "list", timeout=60)
    assert proc.returncode == 65, (proc.returncode, proc.stdout[:300], proc.stderr)
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(where) in err and "writable by its group or others" in err, err


@pytest.mark.parametrize("to", ["builtin", "private"])
def test_a_link_planted_in_a_shared_directory_does_not_choose_the_pack(
    attacker: User, shared: Path, tmp_path: Path, to: str
) -> None:
    """The operator names ``/shared/site.yaml``; the other user makes it a link to a pack of their choice
    (a built-in pack for another recipe, or the operator's own lenient pack): still refused, naming the
    shared directory, as a regular file there is."""
    if to == "builtin":
        target = BASELINE
    else:
        target = tmp_path / "lenient.yaml"
        shutil.copyfile(BASELINE, target)
        os.chmod(target, 0o644)
    ok = run_cli("rules", "--rules", str(target), "list", timeout=60)
    assert ok.returncode == 0 and "ling-3.0-flash-baseline" in ok.stdout, ok.stderr  # control: the target
    _plant_link(attacker, target, shared / "site.yaml")
    _refused(str(shared / "site.yaml"), shared)


def test_a_link_in_a_private_directory_to_a_builtin_pack_is_read(tmp_path: Path) -> None:
    """The link's target is judged like any file: read where only root and this user can write the
    installed package's directories; where they cannot (a checkout under /tmp), refused naming why."""
    link = tmp_path / "mine.yaml"
    link.symlink_to(BASELINE)
    proc = run_cli("rules", "--rules", str(link), "list", timeout=60)
    others = creatable_by_others(BASELINE, ())
    if not others:
        assert proc.returncode == 0 and "ling-3.0-flash-baseline" in proc.stdout, proc.stderr
    else:
        assert proc.returncode == 65, proc.stderr
        assert f"not trusted as a rule pack: {others[-1]}" in proc.stderr


def test_extends_through_a_planted_link_is_refused_naming_it(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    _plant_link(attacker, BASELINE, shared / "base.yaml")
    site = tmp_path / "site.yaml"
    site.write_text(
        "apiVersion: spark-validate/v1\nkind: RulePack\n"
        f"extends: {shared / 'base.yaml'}\nmetadata:\n  name: site\n  version: '1'\n"
    )
    _refused(str(site), shared)
    site.write_text(site.read_text().replace(str(shared / "base.yaml"), str(BASELINE)))  # control
    proc = run_cli("rules", "--rules", str(site), "list", timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("site "), proc.stderr


def test_prompts_through_a_planted_link_are_refused(attacker: User, shared: Path, tmp_path: Path) -> None:
    """The pack's ``probe.prompts`` names a file; a link planted there to the built-in prompts (or to any
    file the operator trusts) is judged in the directory holding the link."""
    _plant_link(attacker, PROMPTS, shared / "prompts.yaml")
    with pytest.raises(InputError, match="writable by its group or others"):
        load_prompts(shared / "prompts.yaml")
    mine = tmp_path / "pack.yaml"
    shutil.copyfile(BASELINE, mine)
    loaded = load_pack(str(mine))
    with pytest.raises(InputError, match="writable by its group or others"):
        load_prompts(loaded.data_file(str(shared / "prompts.yaml")))
    assert load_prompts(loaded.data_file(str(PROMPTS)))  # control: the built-in prompts by their own path


def test_a_fifo_in_rules_dir_is_refused_not_waited_on(tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    packs.mkdir()
    os.mkfifo(packs / "site.yaml")
    proc = run_cli(
        "preflight",
        "--rules",
        "auto",
        "--rules-dir",
        str(packs),
        "--launch-cmd",
        "python -m sglang.launch_server --model-path /m",
        timeout=60,
    )
    err = proc.stderr.strip()
    assert proc.returncode == 65 and str(packs / "site.yaml") in err and "FIFO" in err, (proc.returncode, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_a_file_that_fails_to_read_is_one_line_not_an_internal_error() -> None:
    """``/proc/self/mem`` opens as a regular, root-owned, 0600 file of size 0 and fails every read (EIO):
    named as a pack, an extended pack or an env file, it is exit 65 naming it."""
    for argv in (
        ["rules", "--rules", "/proc/self/mem", "list"],
        ["rules", "lint", "/proc/self/mem"],
        [
            "preflight",
            "--launch-cmd",
            "python -m sglang.launch_server --model-path /m",
            "--env-file",
            "/proc/self/mem",
        ],
    ):
        proc = run_cli(*argv, timeout=60)
        err = proc.stderr.strip()
        assert proc.returncode == 65 and "/proc/self/mem" in err and "cannot read" in err, (argv, err)
        assert len(err.splitlines()) == 1 and "internal error" not in err, err


def test_a_pack_reached_through_a_private_link_finds_its_base_and_prompts_beside_its_file(
    tmp_path: Path,
) -> None:
    """Relative ``extends:`` and ``probe.prompts`` are read beside the pack's real file (as before the
    path stopped being resolved up front), and still through the trusted reader."""
    real = tmp_path / "packs"
    real.mkdir()
    shutil.copyfile(PROMPTS, real / "my-prompts.yaml")
    shutil.copyfile(BASELINE, real / "base.yaml")
    (real / "site.yaml").write_text(
        "apiVersion: spark-validate/v1\nkind: RulePack\nextends: base.yaml\n"
        "metadata:\n  name: site\n  version: '1'\nprobe:\n  prompts: my-prompts.yaml\n"
    )
    links = tmp_path / "etc"
    links.mkdir()
    (links / "site.yaml").symlink_to(real / "site.yaml")
    loaded = load_pack(str(links / "site.yaml"))
    assert loaded.name == "site"
    assert loaded.pack.probe is not None and loaded.pack.probe.prompts == "my-prompts.yaml"
    assert loaded.probe_prompts == real / "my-prompts.yaml"  # the file the live probe is handed
    assert load_prompts(loaded.probe_prompts)


def _unit_preflight(unit: Path, cwd: Path) -> tuple[int, str]:
    from tests.support.launch_recipe import RECIPE_CMD, RECIPE_ENV

    recipe = RECIPE_CMD.split(" ", 1)[1]
    text = unit.read_text().replace("EXEC", f"/usr/bin/python3 {recipe}")
    unit.write_text(text)
    proc = run_cli("preflight", "--unit", str(unit), env={**os.environ, **RECIPE_ENV}, cwd=cwd, timeout=120)
    return proc.returncode, proc.stderr.strip()


@pytest.mark.parametrize("named", ["override.env", "*.env", "sub/override.env", "link"])
def test_an_optional_environment_file_others_could_create_is_refused(
    shared: Path, tmp_path: Path, named: str
) -> None:
    """``EnvironmentFile=-/shared/override.env`` that is not there yet: systemd (root) reads whatever is
    there when the server starts, so anyone who can write that directory decides the environment. The
    absence proves nothing: exit 65 naming the directory. A dangling link to such a place, the same."""
    path = shared / named
    if named == "link":
        (tmp_path / "link.env").symlink_to(shared / "override.env")
        path = tmp_path / "link.env"
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Service]\nEnvironmentFile=-{path}\nExecStart=EXEC\n")
    rc, err = _unit_preflight(unit, tmp_path)
    assert rc == 65 and "anyone could create it" in err and str(shared) in err, (rc, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_an_optional_environment_file_only_trusted_users_could_create_is_no_file(tmp_path: Path) -> None:
    private = tmp_path / "etc"
    private.mkdir(mode=0o755)
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nEnvironmentFile=-{private}/absent.env\nEnvironmentFile=-{private}/missing/*.env\n"
        "ExecStart=EXEC\n"
    )
    rc, err = _unit_preflight(unit, tmp_path)
    assert rc != 65 and "anyone could create" not in err, (rc, err)


def _compose(tmp_path: Path, env_file: str) -> Path:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  sglang:\n    image: lmsysorg/sglang:latest\n"
        "    command: python3 -m sglang.launch_server --model-path /m\n"
        f"    env_file:\n      - path: {env_file}\n        required: false\n"
    )
    return compose


def test_compose_env_files_others_could_plant_or_link_are_refused(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    from validator.sources.launch.compose import load_compose

    # absent, in a directory anyone can write: docker compose reads whatever is there at 'up'
    with pytest.raises(InputError, match="anyone could create it"):
        load_compose(_compose(tmp_path, str(shared / "absent.env")), None, {})
    # a link planted there to an env file the operator trusts is judged where the link is
    mine = tmp_path / "mine.env"
    mine.write_text("SGLANG_ENABLE_FP8_LM_HEAD=0\n")
    _plant_link(attacker, mine, shared / "linked.env")
    with pytest.raises(InputError, match="writable by its group or others"):
        load_compose(_compose(tmp_path, str(shared / "linked.env")), None, {})
    # control: the operator's own files, present and absent
    assert load_compose(_compose(tmp_path, str(mine)), None, {}).env["SGLANG_ENABLE_FP8_LM_HEAD"] == "0"
    assert "SGLANG_ENABLE_FP8_LM_HEAD" not in load_compose(_compose(tmp_path, "absent.env"), None, {}).env


def test_links_swapped_while_the_pack_is_read_are_never_accepted(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The other user swaps ``/shared/site.yaml`` (and the directory ``/shared/d`` it could be reached
    through) between a link to a trusted pack and a file of their own as fast as they can, while the pack
    is parsed over and over: every read is refused, whichever side of a swap it lands on."""
    from validator.rulepack import _load_pack_cached

    trusted = tmp_path / "ok"
    trusted.mkdir()
    shutil.copyfile(BASELINE, trusted / "site.yaml")
    script = (
        f"cp {BASELINE} own.yaml; mkdir own; cp {BASELINE} own/site.yaml; end=$(($(date +%s) + 3)); "
        f"while [ $(date +%s) -lt $end ]; do "
        f"ln -sfn {trusted / 'site.yaml'} site.yaml; ln -sfn {trusted} d; "
        "rm -f site.yaml d; cp own.yaml site.yaml; ln -sfn own d; rm -f site.yaml d; done"
    )
    swapper = subprocess.Popen(
        [
            "setpriv",
            f"--reuid={attacker.uid}",
            f"--regid={attacker.gid}",
            "--clear-groups",
            "--",
            "sh",
            "-c",
            script,
        ],
        cwd=shared,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    outcomes: set[str] = set()
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            for path in (shared / "site.yaml", shared / "d" / "site.yaml"):
                _load_pack_cached.cache_clear()
                try:
                    load_pack(str(path))
                except InputError as exc:
                    outcomes.add("refused" if str(shared) in str(exc) else f"other: {exc}")
                else:
                    outcomes.add("ACCEPTED")
    finally:
        swapper.kill()
        swapper.wait()
    assert "ACCEPTED" not in outcomes and "refused" in outcomes, outcomes
    assert not [o for o in outcomes if o.startswith("other") and "not found" not in o], outcomes


def test_the_table_writer_never_writes_through_a_planted_link(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """``$SPARK_VALIDATE_CACHE_DIR`` under a shared directory where the other user planted ``cache`` as a
    link: the writer would create ``sglang-tables/<key>.json`` wherever it points. Refused, nothing made."""
    from tests.test_sglang_table import DEV, dev_build, dev_table
    from validator.errors import UnavailableError
    from validator.sources.sglang.tables import store

    root = dev_build(tmp_path / "build")
    target = tmp_path / "chosen-by-them"
    target.mkdir()
    _plant_link(attacker, target, shared / "cache")
    with pytest.raises(UnavailableError, match="on the way is writable by its group or others"):
        store(dev_table(), root, DEV, {"SPARK_VALIDATE_CACHE_DIR": str(shared / "cache")})
    assert list(target.iterdir()) == []
    # control: this user's own link, in a private directory, to a private cache
    (tmp_path / "mine").symlink_to(target)
    path = store(dev_table(), root, DEV, {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "mine")})
    assert (target / "sglang-tables" / path.name).is_file()


def test_a_planted_link_is_not_followed_so_a_refusal_tells_nothing_beyond_it(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The other user plants links toward a directory only root can read, and the operator names them as
    rule packs: the reader stops at each link (planted in a directory others can write), so the one line
    is the same whether the file behind it exists, and says nothing of it."""
    secret = _root_only(tmp_path, "id_ed25519", "key\n")
    said = []
    for probe in ("id_ed25519", "absent"):
        _plant_link(attacker, secret / probe, shared / f"p_{probe}")
        proc = run_cli("rules", "--rules", str(shared / f"p_{probe}"), "list", timeout=60)
        assert proc.returncode == 65, (proc.returncode, proc.stderr)
        said.append(proc.stderr.replace(probe, "NAME"))
    assert said[0] == said[1], said
    assert (
        f"{shared}/p_NAME is a symbolic link in {shared}, which is writable by its group or others" in said[0]
    )
    assert "regular file" not in said[0] and "rootonly" not in said[0]


def test_what_a_planted_link_points_at_is_never_told(attacker: User, shared: Path, tmp_path: Path) -> None:
    """The other user plants links toward a directory only root can list, on paths the operator names:
    a unit's EnvironmentFile= (as written, optional, a glob), a Compose env_file that need not be there,
    an attestation. Each reader stops at the link, so what it says is the same whether the file behind
    it exists, and never names it: no stat(), glob or read goes through the link first."""
    from validator.errors import ValidatorError
    from validator.sources.launch.compose import load_compose
    from validator.sources.server.attestation import read_attestation

    secret = tmp_path / "rootonly"
    secret.mkdir(mode=0o700)
    (secret / "qzkey").write_text('{"schema": "tulip horse"}\n')  # qxkey: absent
    _plant_link(attacker, secret, shared / "ldir")
    said: dict[str, list[str]] = {}

    def note(case: str, text: str, probe: str) -> None:
        said.setdefault(case, []).append(text.replace(probe, "P").replace(probe[:2], "P"))

    for probe in ("qzkey", "qxkey"):
        _plant_link(attacker, secret / probe, shared / f"l_{probe}")
        for case, line in (
            ("literal", f"EnvironmentFile={shared}/l_{probe}"),
            ("optional", f"EnvironmentFile=-{shared}/ldir/{probe}/x.env"),
            ("glob", f"EnvironmentFile={shared}/ldir/{probe[:2]}*"),
        ):
            unit = tmp_path / "sglang.service"
            unit.write_text(f"[Service]\n{line}\nExecStart=EXEC\n")
            rc, err = _unit_preflight(unit, tmp_path)
            note(case, f"{rc} {err}", probe)
        script = tmp_path / "start.sh"  # a launcher that sources the file through the planted link
        script.write_text(
            f"#!/bin/bash\nsource {shared}/l_{probe}\nexec python3 -m sglang.launch_server --model-path /m\n"
        )
        ran = run_cli("preflight", "--script", str(script), timeout=120)
        note("script", "\n".join(x for x in (ran.stdout + ran.stderr).splitlines() if "sourced" in x), probe)
        compose = _compose(tmp_path, f"{shared}/l_{probe}")
        for case, path in (("compose", None), ("attestation", shared / "ldir" / probe)):
            try:
                if path is None:
                    load_compose(compose, None, {})
                else:
                    read_attestation(path)
                note(case, "accepted", probe)
            except ValidatorError as exc:
                note(case, str(exc), probe)
    # --rules-dir through the planted link: refused before it is listed (its pack is never named)
    (secret / "site.yaml").write_text("apiVersion: spark-validate/v1\nkind: RulePack\n")
    proc = run_cli(
        "preflight",
        "--rules",
        "auto",
        "--rules-dir",
        str(shared / "ldir"),
        "--launch-cmd",
        "python -m sglang.launch_server --model-path /m",
        timeout=60,
    )
    assert proc.returncode == 65 and "is a symbolic link in" in proc.stderr, proc.stderr
    assert "site.yaml" not in proc.stderr and "rootonly" not in proc.stderr, proc.stderr
    for case, (present, absent) in said.items():
        assert present == absent, (case, present, absent)
        assert "rootonly" not in present and "regular file" not in present and "tulip" not in present, present
        assert "symbolic link" in present or f"directory {shared} is writable" in present, (case, present)


def test_the_declared_server_users_own_link_to_its_attestation_is_followed(
    attacker: User, tmp_path: Path
) -> None:
    """A link in a directory of the server's user (here the second account) is that user's choice, as the
    document is: followed once ``--server-user`` names that user, refused (naming the owner) otherwise."""
    from validator.errors import UnavailableError
    from validator.sources.server.attestation import read_trusted

    home = tmp_path / "server-home"
    (home / "run").mkdir(parents=True, mode=0o755)
    (home / "run" / "attestation.json").write_text("{}\n")
    (home / "current").symlink_to(home / "run")
    os.chown(home, attacker.uid, attacker.gid)
    os.chown(home / "current", attacker.uid, attacker.gid, follow_symlinks=False)
    path = home / "current" / "attestation.json"
    with pytest.raises(UnavailableError, match=f"symbolic link in {home}, which UID {attacker.uid} owns"):
        read_trusted(path)
    with pytest.raises(InputError, match="schema"):  # read: the document itself is judged next
        read_trusted(path, server_uid=attacker.uid)


def test_an_api_key_file_through_a_planted_link_is_never_read_or_sent(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The other user plants ``/shared/api-key`` as a link to a file only root may read, and the operator
    names it: its first line would be sent to the URL as the Bearer key (the attacker's listener saw a
    root-only secret). Refused before any connection, naming the link; a key an HTTP header cannot carry
    (a NUL) is refused without being shown."""
    secret = _root_only(tmp_path, "key", "sk-ROOTONLYSECRET0123456789\n")
    _plant_link(attacker, secret / "key", shared / "api-key")
    proc = run_cli(
        "check", "--url", "http://127.0.0.1:9", "--api-key-file", str(shared / "api-key"), timeout=60
    )
    assert proc.returncode == 65, (proc.returncode, proc.stderr)
    assert "is a symbolic link in" in proc.stderr and "ROOTONLY" not in proc.stdout + proc.stderr, proc.stderr
    mine = tmp_path / "nul-key"
    mine.write_bytes(b"abc\x00SECRETKEY123\n")
    proc = run_cli("check", "--url", "http://127.0.0.1:9", "--api-key-file", str(mine), timeout=60)
    assert proc.returncode == 65 and "control or a non-ASCII character" in proc.stderr, proc.stderr
    assert "SECRETKEY" not in proc.stdout + proc.stderr, proc.stderr


def test_a_launcher_read_through_a_planted_link_quotes_nothing_of_its_target(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The other user plants ``/shared/args`` as a link to a file only root may read (a shadow-like line),
    and the operator names it as ``--launch-args-file``: its first word was quoted in the input error
    ('unrecognised program 'root:$y$...''). Not a file the verdict trusts, yet no link in a directory
    others can write is followed for it either; the same one line whether the target exists."""
    secret = _root_only(tmp_path, "shadow", "root:$y$j9T$TULIPSALT$HORSEHASH:19000:0:99999:7:::\n")
    said = []
    for probe in ("shadow", "absent"):
        _plant_link(attacker, secret / probe, shared / f"a_{probe}")
        proc = run_cli("preflight", "--launch-args-file", str(shared / f"a_{probe}"), timeout=60)
        said.append((proc.returncode, proc.stderr.replace(probe, "P")))
    assert said[0] == said[1] and said[0][0] == 65, said
    assert "is a symbolic link in" in said[0][1], said
    assert "TULIP" not in said[0][1] and "root:$y$" not in said[0][1], said
    # a link of the directory owner's own, where only it can write, is followed (a release's 'current')
    (tmp_path / "releases").mkdir()
    (tmp_path / "releases" / "args").write_text("python3 -m sglang.launch_server --model-path /m\n")
    (tmp_path / "current").symlink_to(tmp_path / "releases")
    proc = run_cli("preflight", "--launch-args-file", str(tmp_path / "current" / "args"), timeout=60)
    assert "symbolic link" not in proc.stderr and proc.returncode != 65, (proc.returncode, proc.stderr)


def test_a_link_in_another_users_own_directory_reads_only_what_that_user_could(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The other user's *own* directory (0755, only they can write it) holds a link they chose, and the
    operator names a file through it: the link is followed (a server user's ``current`` release link is
    such a link), but only to what its owner could read. A link into a directory only root can enter is
    refused there, the same words whether the target exists; a root-only file is refused unread."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    deep = _root_only(tmp_path, "shadow", "root:$y$j9T$TULIPSALT$HORSEHASH:19000:0:99999:7:::\n")
    said = []
    for probe in ("shadow", "absent"):
        _plant_link(attacker, deep / probe, mine / f"a_{probe}")
        proc = run_cli("preflight", "--launch-args-file", str(mine / f"a_{probe}"), timeout=60)
        said.append((proc.returncode, proc.stderr.replace(probe, "P")))
    assert said[0] == said[1] and said[0][0] == 65, said
    assert f"directory of UID {attacker.uid}, who could not enter" in said[0][1], said
    assert "TULIP" not in said[0][1] and "root:$y$" not in said[0][1], said
    # a root-only file where the other user can look (0755 directory, 0600 file): refused unread
    seen = Path(tempfile.mkdtemp(prefix="sv-rootfile-", dir="/tmp"))
    try:
        seen.chmod(0o755)
        (seen / "shadow").write_text("root:$y$j9T$TULIPSALT$HORSEHASH:19000:0:99999:7:::\n")
        (seen / "shadow").chmod(0o600)
        _plant_link(attacker, seen / "shadow", mine / "b")
        proc = run_cli("preflight", "--launch-args-file", str(mine / "b"), timeout=60)
        assert proc.returncode == 65 and "who could not read the file" in proc.stderr, proc.stderr
        assert "TULIP" not in proc.stderr and "root:$y$" not in proc.stderr, proc.stderr
        # the same file readable by others: the link's owner could read it, so it is read through the link
        (seen / "shadow").write_text("python3 -m sglang.launch_server --model-path /m\n")
        (seen / "shadow").chmod(0o644)
        proc = run_cli("preflight", "--launch-args-file", str(mine / "b"), timeout=60)
        assert "symbolic link" not in proc.stderr and proc.returncode != 65, (proc.returncode, proc.stderr)
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def test_source_judges_the_file_where_the_walk_arrived_not_by_its_name_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``source`` finds its file where the walk arrived. A second look by name (``os.path.isfile``) went
    through whatever stood there by then: another user who swapped a link in after the walk (into a
    directory only root can enter) learnt from the words whether a file exists there."""
    from validator.sources.launch.shell import builtins_flow
    from validator.sources.launch.shell.reader import read_script

    deep = _root_only(tmp_path, "present", "export A=1\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    script = tmp_path / "start.sh"
    script.write_text(f"#!/bin/bash\nsource {mine}/s\nexec python3 -m sglang.launch_server --model-path /m\n")
    real = builtins_flow.walk_unplanted
    said = []
    for probe in ("present", "absent"):

        def swapped(path: str, probe: str = probe) -> tuple[int, str, object]:
            (mine / "s").unlink(missing_ok=True)
            (mine / "s").write_text("export A=1\n")  # what the walk finds
            got = real(path)
            (mine / "s").unlink()
            (mine / "s").symlink_to(deep / probe)  # swapped in just after it
            return got

        monkeypatch.setattr(builtins_flow, "walk_unplanted", swapped)
        reading = read_script(script, env={"PATH": "/usr/bin:/bin"})
        words = [*(e.reason or "" for e in reading.endings), *reading.notes]
        said.append(" | ".join(words).replace(probe, "P"))
    assert said[0] == said[1], said


def test_a_device_or_fifo_behind_another_users_link_is_refused_before_it_is_opened(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a device or a FIFO acts on it (a watchdog starts, a tape rewinds, a writer blocked on the
    FIFO is let through): one the link's owner could not open is refused without being opened, not
    opened first and refused on its descriptor."""
    from validator import trusted_files
    from validator.bounded_files import open_regular

    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    seen = Path(tempfile.mkdtemp(prefix="sv-rootfifo-", dir="/tmp"))
    try:
        seen.chmod(0o755)
        os.mkfifo(seen / "fifo", 0o600)  # root's (the test's), only its owner may open it
        _plant_link(attacker, seen / "fifo", mine / "f")
        opened: list[str] = []
        real_open = os.open

        def recording(name: str, flags: int, *args: object, **kwargs: object) -> int:
            opened.append(str(name))
            return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(trusted_files.os, "open", recording)
        with pytest.raises(InputError, match="who could not read the file"):
            open_regular(mine / "f", "launch args file")
        assert "fifo" not in opened, opened
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def _set_acl(path: Path, uid: int, perm: int) -> None:
    """An access ACL on ``path``: its mode bits plus ``user:UID:perm`` (no setfacl needed); skips where the
    filesystem keeps none."""
    import struct

    m = path.stat().st_mode & 0o777
    entries = [
        (0x01, m >> 6 & 7, -1),
        (0x02, perm, uid),
        (0x04, m >> 3 & 7, -1),
        (0x10, perm | m >> 3 & 7, -1),
    ]
    entries.append((0x20, m & 7, -1))
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i & 0xFFFFFFFF) for t, p, i in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", raw)
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc.strerror}")


def test_another_users_link_is_judged_by_the_acl_the_kernel_applies(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Mode bits alone are not what the kernel decides by: an ACL that denies the link's owner (its mode
    bits let others read) is refused, the same words whether the target exists; one that grants the
    owner what its mode bits do not is read."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    seen = Path(tempfile.mkdtemp(prefix="sv-acl-", dir="/tmp"))
    try:
        seen.chmod(0o755)
        (seen / "denied").write_text("TULIPSECRET horse battery\n")
        (seen / "denied").chmod(0o644)
        _set_acl(seen / "denied", attacker.uid, 0)
        assert run_as(attacker, ["cat", str(seen / "denied")]).returncode != 0  # the kernel says no
        _plant_link(attacker, seen / "denied", mine / "d")
        proc = run_cli("preflight", "--launch-args-file", str(mine / "d"), timeout=60)
        assert proc.returncode == 65 and "who could not read the file" in proc.stderr, proc.stderr
        assert "TULIP" not in proc.stderr, proc.stderr
        closed = seen / "closed"  # 0755 by its mode bits, the link's owner denied by its ACL
        closed.mkdir(mode=0o755)
        (closed / "present").write_text("TULIPSECRET\n")
        _set_acl(closed, attacker.uid, 0)
        said = []
        for probe in ("present", "absent"):
            _plant_link(attacker, closed / probe, mine / f"c_{probe}")
            proc = run_cli("preflight", "--launch-args-file", str(mine / f"c_{probe}"), timeout=60)
            said.append((proc.returncode, proc.stderr.replace(probe, "P")))
        assert said[0] == said[1] and "who could not enter" in said[0][1], said
        granted = seen / "granted"  # 0750 root's by its mode bits, the link's owner let in by its ACL
        granted.mkdir(mode=0o750)
        (granted / "args").write_text("python3 -m sglang.launch_server --model-path /m\n")
        (granted / "args").chmod(0o640)
        _set_acl(granted, attacker.uid, 5)
        _set_acl(granted / "args", attacker.uid, 4)
        assert run_as(attacker, ["cat", str(granted / "args")]).returncode == 0
        _plant_link(attacker, granted / "args", mine / "g")
        proc = run_cli("preflight", "--launch-args-file", str(mine / "g"), timeout=60)
        assert "symbolic link" not in proc.stderr and proc.returncode != 65, (proc.returncode, proc.stderr)
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def test_the_checkpoint_reader_tells_nothing_of_where_another_users_link_points(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """The checkpoint reader's looks before its reads (the model directory, its index, a shard the index
    names, ``--model-path``'s config.json) went by name, following the other user's link as root: what
    came next told whether a file exists in a directory only root can enter. Walked now, as the reads are:
    the same words for a present and an absent target."""
    deep = _root_only(tmp_path, "present", "{}\n")
    (deep / "presentdir").mkdir()
    (deep / "presentdir" / "config.json").write_text("{}\n")
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    ckpt = mine / "ckpt"
    config = '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2}'
    index = '{"weight_map": {"lm_head.weight": "s.safetensors"}}'
    made = run_as(
        attacker,
        [
            "sh",
            "-c",
            f"mkdir -m 0755 {ckpt} && echo '{config}' > {ckpt}/config.json && echo '{index}' > {ckpt}/ix",
        ],
    )
    assert made.returncode == 0, made.stderr
    args = tmp_path / "args"
    args.write_text("python3 -m sglang.launch_server --model-path /m\n")

    def said(link: Path, target: Path, *argv: str) -> tuple[int, str]:
        assert run_as(attacker, ["ln", "-sfn", str(target), str(link)]).returncode == 0
        proc = run_cli("preflight", *argv, timeout=60)
        words = re.sub(r"\d+\.\d+ s\b", "T s", proc.stdout + proc.stderr)  # the run's duration
        return proc.returncode, words.replace(target.name, "P")

    for link, name, argv in (
        (mine / "dlink", "dir", ("--launch-args-file", str(args), "--model-dir", str(mine / "dlink"))),
        (
            ckpt / "model.safetensors.index.json",
            "",
            ("--launch-args-file", str(args), "--model-dir", str(ckpt)),
        ),
    ):
        both = [said(link, deep / f"{probe}{name}", *argv) for probe in ("present", "absent")]
        assert both[0] == both[1], (link, both)
        assert "who could not enter" in both[0][1], both
    assert run_as(attacker, ["ln", "-sfn", "ix", str(ckpt / "model.safetensors.index.json")]).returncode == 0
    both = [
        said(ckpt / "s.safetensors", deep / p, "--launch-args-file", str(args), "--model-dir", str(ckpt))
        for p in ("present", "absent")
    ]
    assert both[0] == both[1] and "who could not enter" in both[0][1], both
    args.write_text(f"python3 -m sglang.launch_server --model-path {mine / 'mlink'}\n")
    both = [
        said(mine / "mlink", deep / f"{p}dir", "--launch-args-file", str(args)) for p in ("present", "absent")
    ]
    assert both[0] == both[1] and "who could not enter" in both[0][1], both


def test_dot_dot_after_another_users_link_goes_nowhere_that_user_could_not(
    attacker: User, tmp_path: Path
) -> None:
    """A tree of the other user's moved (``cp -a``, ``tar -xp`` as root) into a directory only root can
    enter still holds their links: ``..`` in one climbs back to a directory opened before the link was
    met, and a file there readable by all (0644, in a 0700 directory) is one they could not read."""
    deep = _root_only(tmp_path, "notes", "TULIPSECRET horse battery\n")
    (deep / "notes").chmod(0o644)
    theirs = deep / "moved"
    theirs.mkdir(mode=0o755)
    (theirs / "l").symlink_to("../notes")
    os.chown(theirs, attacker.uid, attacker.uid)
    os.lchown(theirs / "l", attacker.uid, attacker.uid)
    proc = run_cli("preflight", "--launch-args-file", str(theirs / "l"), timeout=60)
    assert proc.returncode == 65 and f"UID {attacker.uid}, who could not enter {deep}" in proc.stderr, (
        proc.stderr
    )
    assert "TULIP" not in proc.stderr, proc.stderr


def test_a_path_longer_than_the_kernel_takes_is_no_internal_error_and_no_long_walk(tmp_path: Path) -> None:
    """``--model-path /../../…/model`` of more than PATH_MAX bytes (a launcher's words are the other user's
    to choose): the kernel refuses such a path (ENAMETOOLONG), so the walk does too, before a lookup per
    component (a 1.2 MB path of '..' took 59 s); it was an internal error once the walk had let it by."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}\n')
    args = tmp_path / "args"
    args.write_text(f"python3 -m sglang.launch_server --model-path /{'../' * 2000}{str(model)[1:]}\n")
    proc = run_cli("preflight", "--launch-args-file", str(args), timeout=60)
    assert proc.returncode in (0, 78) and "internal error" not in proc.stderr, (
        proc.returncode,
        proc.stderr[-300:],
    )


def test_read_head_never_reads_through_another_users_link_what_they_could_not(
    attacker: User, shared: Path
) -> None:
    """``read_head`` reads an SGLang install's files (its ``__init__``, ``environ.py``, model sources): in
    an install of the other user's (``--sglang-root``, the server user's venv), their link to a file only
    root may read was opened and read by root. Walked now as every input is: an OSError, as for any file
    it cannot read."""
    from validator.bounded_files import read_head

    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    seen = Path(tempfile.mkdtemp(prefix="sv-rootfile-", dir="/tmp"))
    try:
        seen.chmod(0o755)
        (seen / "secret.py").write_text("class TULIPSECRET:\n    pass\n")
        (seen / "secret.py").chmod(0o600)
        (seen / "open.py").write_text("class Shared:\n    pass\n")
        (seen / "open.py").chmod(0o644)
        _plant_link(attacker, seen / "secret.py", mine / "environ.py")
        _plant_link(attacker, seen / "open.py", mine / "models.py")
        with pytest.raises(OSError, match="who could not read the file"):
            read_head(mine / "environ.py", 1000)
        assert read_head(mine / "models.py", 1000).startswith(b"class Shared")
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def test_what_another_users_launcher_names_is_read_only_as_far_as_they_could(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """No link at all: the other user's own launch input (an args file, a script, a unit) *names* a file
    only root may read, and root runs preflight on it. Its words (a --config key, an environment file's
    value) were quoted, and a script's ``[ -e ]`` on a root-only path chose the branch the report showed.
    What an input names is read only as far as its owner could read it; a test on a path they could not
    look at is unknown (both branches), so the report is the same whether the file exists."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    deep = _root_only(tmp_path, "cfg.yaml", "tp-size: 3\nTULIPSECRET-horse: battery\n")
    seen = Path(tempfile.mkdtemp(prefix="sv-rootfile-", dir="/tmp"))
    try:
        seen.chmod(0o755)
        (seen / "app.env").write_text("MODEL=/TULIPSECRET-model\n")
        (seen / "app.env").chmod(0o600)
        (seen / "ok.yaml").write_text("tp-size: 1\n")
        (seen / "ok.yaml").chmod(0o644)

        def write(name: str, text: str) -> Path:
            done = run_as(attacker, ["sh", "-c", f"cat > {mine / name}"], input=text.encode())
            assert done.returncode == 0, done.stderr
            return mine / name

        args = write("args", f"python3 -m sglang.launch_server --model-path /m --config {deep}/cfg.yaml\n")
        proc = run_cli("preflight", "--launch-args-file", str(args), timeout=60)
        assert proc.returncode == 65 and "who could not enter" in proc.stderr, (proc.returncode, proc.stderr)
        assert "TULIP" not in proc.stdout + proc.stderr
        unit = write(
            "svc.service",
            f"[Service]\nEnvironmentFile={seen}/app.env\n"
            "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path ${MODEL}\n",
        )
        proc = run_cli("preflight", "--unit", str(unit), timeout=60)
        assert "who could not read the file" in proc.stderr and "TULIP" not in proc.stdout + proc.stderr, (
            proc.returncode,
            proc.stderr,
        )
        said = []
        for probe in ("cfg.yaml", "absent"):
            script = write(
                f"probe_{probe}.sh",
                f"#!/bin/bash\nif [ -e {deep}/{probe} ]; then P=/yes; else P=/no; fi\n"
                "exec python3 -m sglang.launch_server --model-path $P\n",
            )
            proc = run_cli("preflight", "--script", str(script), timeout=60)
            told = (proc.stdout + proc.stderr).replace(probe, "P")
            said.append((proc.returncode, re.sub(r" · [0-9.]+ s$", "", told, flags=re.M)))  # not its duration
        assert said[0] == said[1], said
        # what the other user could read themselves is read as before
        args = write("args_ok", f"python3 -m sglang.launch_server --model-path /m --config {seen}/ok.yaml\n")
        proc = run_cli("preflight", "--launch-args-file", str(args), timeout=60)
        assert "could not" not in proc.stderr and proc.returncode != 65, (proc.returncode, proc.stderr)
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def _as_written_by(user: User, path: Path, text: str) -> Path:
    done = run_as(user, ["sh", "-c", f"cat > '{path}'"], input=text.encode())
    assert done.returncode == 0, done.stderr
    return path


def _told_the_same(runs: list[tuple[str, subprocess.CompletedProcess[str]]]) -> None:
    """The report for a target that exists and for one that does not, the names substituted, the run's
    duration left out: the same bytes."""
    said = [
        (p.returncode, re.sub(r" · [0-9.]+ s$", "", (p.stdout + p.stderr).replace(name, "T"), flags=re.M))
        for name, p in runs
    ]
    assert "Traceback" not in said[0][1] + said[1][1]
    assert said[0] == said[1], said


def _told_the_same_of(
    names: tuple[str, str], preflight_args: Callable[[str], list[str]]
) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """``preflight`` run as root on each input ``preflight_args`` writes for a name (one target present,
    one absent), held to :func:`_told_the_same`; the runs, for further asserts."""
    runs = [(name, run_cli("preflight", *preflight_args(name), timeout=60)) for name in names]
    _told_the_same(runs)
    return runs


SYSTEM_PYTHON = Path("/usr/bin/python3")


def test_the_interpreter_another_users_launcher_names_never_runs_as_root(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Red team 12. The other user's own script runs root's python from ``/`` (every file root's): the
    interpreter probe ran as root with the script's environment. ``PYTHONPLATLIBDIR`` (no file of its own
    to judge) moved the standard library into the other user's directory: their ``encodings`` ran as root.
    ``PYTHONPATH`` into a root-only directory told them whether sglang is there, and a world-writable
    directory there was named in the report. The launch's namers own the probe as its files' owners do."""
    if not SYSTEM_PYTHON.exists():
        missing("the system python (/usr/bin/python3, root's and reachable by all): apt-get install python3")
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    found = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.base_prefix, '%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    prefix, version = found.stdout.split()
    done = run_as(attacker, ["mkdir", "-p", str(mine / "x" / f"python{version}" / "encodings")])
    assert done.returncode == 0, done.stderr
    marker = mine / "ran"
    _as_written_by(
        attacker,
        mine / "x" / f"python{version}" / "encodings" / "__init__.py",
        f"import os\nfd = os.open({str(marker)!r}, os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "os.write(fd, str(os.getuid()).encode())\n",
    )
    script = _as_written_by(
        attacker,
        mine / "plat.sh",
        f"#!/bin/bash\ncd /\nexport PYTHONPLATLIBDIR={os.path.relpath(mine / 'x', prefix)}\n"
        f"exec {SYSTEM_PYTHON} -m sglang.launch_server --model-path /m\n",
    )
    proc = run_cli("preflight", "--script", str(script), timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not marker.exists() or marker.read_text() != "0", "the other user's code ran as root"
    deep = tmp_path / "rootonly"
    deep.mkdir(mode=0o700)
    (deep / "libs" / "sglang").mkdir(parents=True)
    (deep / "libs" / "sglang" / "__init__.py").write_text("")
    (deep / "open").mkdir(mode=0o777)
    (deep / "open").chmod(0o777)

    def pythonpath(name: str) -> list[str]:
        script = _as_written_by(
            attacker,
            mine / f"pp_{name}.sh",
            f"#!/bin/bash\ncd /\nexport PYTHONPATH={deep / name}\n"
            f"exec {SYSTEM_PYTHON} -m sglang.launch_server --model-path /m\n",
        )
        return ["--script", str(script)]

    for pair in (("libs", "none"), ("open", "shut")):
        _told_the_same_of(pair, pythonpath)


def test_a_launchers_config_drop_ins_and_working_directory_tell_nothing_of_where_its_owner_cannot_look(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Red team 12, the other user's own input naming a root-only path, present and absent: the --config
    was looked up as root before its read was judged ('Config file not found' only when absent); a
    unit's drop-in directory, a link to a root-only one, was listed as root (its ``*.conf`` names quoted);
    a unit's WorkingDirectory= was entered as root by the interpreter probe before it dropped privileges."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    deep = tmp_path / "rootonly"
    deep.mkdir(mode=0o700)
    (deep / "tyess.yaml").write_text("tp-size: 3\n")
    (deep / "tyess.d").mkdir()
    (deep / "tyess.d" / "secretname.conf").write_text("[Service]\nEnvironment=A=1\n")
    (deep / "tyess").mkdir()
    start = "python3 -m sglang.launch_server --model-path /m"

    def config(name: str) -> list[str]:
        args = _as_written_by(attacker, mine / f"args_{name}", f"{start} --config {deep}/{name}.yaml\n")
        return ["--launch-args-file", str(args)]

    def drop_ins(name: str) -> list[str]:
        unit = _as_written_by(attacker, mine / f"{name}.service", f"[Service]\nExecStart=/usr/bin/{start}\n")
        _plant_link(attacker, deep / f"{name}.d", mine / f"{name}.service.d")
        return ["--unit", str(unit)]

    def working_directory(name: str) -> list[str]:
        text = f"[Service]\nWorkingDirectory={deep}/{name}\nExecStart=/usr/bin/{start}\n"
        return ["--unit", str(_as_written_by(attacker, mine / f"wd_{name}.service", text))]

    _told_the_same_of(("tyess", "tnooo"), config)
    runs = _told_the_same_of(("tyess", "tnooo"), drop_ins)
    assert "secretname" not in runs[0][1].stdout + runs[0][1].stderr
    _told_the_same_of(("tyess", "tnooo"), working_directory)


def test_the_operators_model_dir_and_sglang_root_are_read_whoever_wrote_the_launch(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Red team 12 (a regression of the namers' rule): the other user's args file made root's own
    ``--model-dir`` and ``--sglang-root`` (in a directory only root may enter) unreadable, as if the launch
    had named them. They are the operator's words: read as root reads them."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    args = _as_written_by(attacker, mine / "args", "python3 -m sglang.launch_server --model-path /m\n")
    deep = tmp_path / "rootonly"
    (deep / "model").mkdir(parents=True)
    deep.chmod(0o700)
    (deep / "model" / "config.json").write_text('{"architectures": ["OperatorsOwnArch"], "model_type": "x"}')
    (deep / "model" / "config.json").chmod(0o600)
    (deep / "sglang" / "srt").mkdir(parents=True)
    (deep / "sglang" / "version.py").write_text('__version__ = "0.5.77"\n')
    proc = run_cli(
        "preflight",
        "--launch-args-file",
        str(args),
        "--model-dir",
        str(deep / "model"),
        "--sglang-root",
        str(deep / "sglang"),
        timeout=60,
    )
    said = proc.stdout + proc.stderr
    assert "could not enter" not in said and "Traceback" not in said, said
    assert "OperatorsOwnArch" in said and "0.5.77" in said, said


def test_the_root_directory_is_a_place_every_launch_owner_can_look(attacker: User, shared: Path) -> None:
    """Red team 12: '/' is no path a walk names, so hidden_from_namers took it for hidden: the other user's
    ``cd /`` left the script's directory unknown, and their unit's working directory (``/`` by default)
    kept the interpreter from being asked at all."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    start = "python3 -m sglang.launch_server --model-path /m"
    script = _as_written_by(attacker, mine / "root.sh", f"#!/bin/bash\ncd /\nexec /usr/bin/{start}\n")
    unit = _as_written_by(attacker, mine / "root.service", f"[Service]\nExecStart=/usr/bin/{start}\n")
    for given in (["--script", str(script)], ["--unit", str(unit)]):
        proc = run_cli("preflight", *given, timeout=60)
        said = proc.stdout + proc.stderr
        assert "started in / " in said and "could look" not in said and "Traceback" not in said, said


def test_a_directory_the_launch_owner_may_enter_but_not_list_is_not_listed_for_them(
    attacker: User, shared: Path
) -> None:
    """Red team 12: the model directory the other user's script names is root's, 0711: they may open a
    file there they know the name of, never learn what else it holds. Root globbed it for ``*.safetensors``
    and the report showed the LM head of a shard they could not have found."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    header = b'{"lm_head.weight": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}'
    header += b" " * (-len(header) % 8)
    said = []
    for name in ("qshardyes", "qshardnoo"):
        model = shared / name
        model.mkdir(mode=0o711)
        model.chmod(0o711)
        (model / "config.json").write_text('{"architectures": ["BailingMoeV3ForCausalLM"]}')
        if name == "qshardyes":
            (model / "unguessable.safetensors").write_bytes(
                len(header).to_bytes(8, "little") + header + bytes(8)
            )
        script = _as_written_by(
            attacker,
            mine / f"{name}.sh",
            f"#!/bin/bash\nexec python3 -m sglang.launch_server --model-path {model}\n",
        )
        proc = run_cli("preflight", "--script", str(script), timeout=60)
        said.append((name, proc))
    _told_the_same(said)


def test_an_environment_file_glob_lists_no_directory_the_units_owner_could_not_list(
    attacker: User, shared: Path
) -> None:
    """Red team 12: the other user's unit reads ``EnvironmentFile=-DIR/*.env`` where DIR is root's, 0711:
    root's glob found a 0644 file there they could not have found (its name and values in the report)."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    # root's, 0755, under no sticky /tmp (where anyone could create a matching file): only root writes it
    roots = Path(tempfile.mkdtemp(prefix="sv-rootdir-", dir="/"))
    said = []
    try:
        roots.chmod(0o755)
        for name in ("qenvsyes", "qenvsnoo"):
            where = roots / name
            where.mkdir(mode=0o711)
            where.chmod(0o711)
            if name == "qenvsyes":
                (where / "unguessable.env").write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\n")
            unit = _as_written_by(
                attacker,
                mine / f"{name}.service",
                f"[Service]\nEnvironmentFile=-{where}/*.env\n"
                "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n",
            )
            said.append((name, run_cli("preflight", "--unit", str(unit), timeout=60)))
    finally:
        shutil.rmtree(roots, ignore_errors=True)
    _told_the_same(said)
    assert "unguessable" not in said[0][1].stdout + said[0][1].stderr


def test_what_another_users_config_names_from_roots_own_launcher_is_read_only_as_far_as_they_could(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Red team 13: root's own script names a ``--config`` the other user owns, and their config names a
    model directory only root may enter. The config's owner was added to a copy of the namers that
    ``Launcher.parsed`` dropped: the checkpoint was read as root, its architecture quoted, and the report
    told whether the directory was there."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    deep = tmp_path / "rootonly"
    (deep / "tyess").mkdir(parents=True)
    deep.chmod(0o700)
    (deep / "tyess" / "config.json").write_text('{"architectures": ["TULIPArch"], "model_type": "llama"}')
    runs = []
    for name in ("tyess", "tnooo"):
        config = _as_written_by(attacker, mine / f"{name}.yaml", f"model-path: {deep}/{name}\n")
        script = tmp_path / f"start_{name}.sh"
        script.write_text(f"#!/bin/bash\nexec /usr/bin/python3 -m sglang.launch_server --config {config}\n")
        runs.append((name, run_cli("preflight", "--script", str(script), timeout=60)))
    assert "TULIPArch" not in runs[0][1].stdout + runs[0][1].stderr
    assert "who could not enter" in runs[0][1].stdout, runs[0][1].stdout
    _told_the_same(runs)


def test_humming_s_cache_another_users_launcher_names_is_looked_at_only_as_far_as_they_could(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 13: the other user's script sets ``HUMMING_CACHE_DIR`` into a directory only root may enter.
    humming's reader walked up from it with ``exists()`` as root (``cache_writable`` False only when a file
    stood on the way) and globbed ``*/kernel.cubin`` there (``cached_kernels`` counted root's files)."""
    mine = Path(tempfile.mkdtemp(prefix="sv-theirs-", dir="/tmp"))  # theirs, nobody else's to write
    try:
        os.chown(mine, attacker.uid, attacker.gid)
        mine.chmod(0o755)
        _humming_cache_told_the_same(attacker, mine, tmp_path)
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def _their_python(attacker: User, mine: Path) -> Path:
    """Their own python (a script that answers the probe) importing their own sglang 0.5.23, beside their
    flashinfer-python 0.7.4: every file theirs, all of it readable."""
    site = mine / "site"
    done = run_as(attacker, ["mkdir", "-p", str(site / "sglang" / "srt"), str(mine / "bin")])
    assert done.returncode == 0, done.stderr
    _as_written_by(attacker, site / "sglang" / "version.py", '__version__ = "0.5.23"\n')
    assert run_as(attacker, ["mkdir", str(site / "flashinfer_python-0.7.4.dist-info")]).returncode == 0
    meta = "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.7.4\n\n"
    _as_written_by(attacker, site / "flashinfer_python-0.7.4.dist-info" / "METADATA", meta)
    answer = f'{{"locations": ["{site}/sglang"], "origin": null, "site_dirs": ["{site}"], "imported": []}}'
    python = _as_written_by(attacker, mine / "bin" / "python3", f"#!/bin/sh\necho '{answer}'\n")
    assert run_as(attacker, ["chmod", "0755", str(python)]).returncode == 0
    return python


def _humming_cache_told_the_same(attacker: User, mine: Path, tmp_path: Path) -> None:
    python = _their_python(attacker, mine)
    deep = tmp_path / "rootonly"
    deep.mkdir(mode=0o700)
    (deep / "tyess").write_text("a file, where the cache directory's parent would be\n")
    for kernel in ("k1", "k2"):
        (deep / "kyess" / kernel).mkdir(parents=True)
        (deep / "kyess" / kernel / "kernel.cubin").write_bytes(b"")
    start = f"exec {python} -m sglang.launch_server --model-path /m --moe-runner-backend humming"
    for names in (("tyess", "tnooo"), ("kyess", "knooo")):
        runs = []
        for name in names:
            cache = f"{deep}/{name}/x" if name.startswith("t") else f"{deep}/{name}"
            script = _as_written_by(
                attacker, mine / f"hc_{name}.sh", f"#!/bin/bash\nexport HUMMING_CACHE_DIR={cache}\n{start}\n"
            )
            runs.append((name, run_cli("preflight", "--script", str(script), timeout=60)))
        assert "cached_kernels=" in runs[0][1].stdout, runs[0][1].stdout
        _told_the_same(runs)


def test_flashinfer_s_cache_another_users_launcher_names_is_listed_only_as_far_as_they_could(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 13: the other user's script sets ``FLASHINFER_WORKSPACE_BASE`` into a directory only root may
    enter. On a DGX Spark the FlashInfer reader listed its cache as root: whether kernels were built there,
    and the names of the version directories it found (quoted as kernels "built elsewhere")."""
    mine = Path(tempfile.mkdtemp(prefix="sv-theirs-", dir="/tmp"))  # theirs, nobody else's to write
    spark = Path(tempfile.mkdtemp(prefix="sv-spark-", dir="/tmp"))  # a DGX Spark's trees, theirs to read too
    try:
        os.chown(mine, attacker.uid, attacker.gid)
        mine.chmod(0o755)
        spark.chmod(0o755)
        python = _their_python(attacker, mine)
        deep = tmp_path / "rootonly"
        deep.mkdir(mode=0o700)
        for version in ("TULIPNAME",):  # built for another version: quoted as "built elsewhere"
            built = (
                deep / "byess" / ".cache" / "flashinfer" / version / "121a" / "cached_ops" / "fused_moe_120"
            )
            built.mkdir(parents=True)
            (built / "fused_moe_120.so").write_bytes(b"")
        env = {**os.environ, **host_env(gb10_host(spark))}
        runs = []
        for name in ("byess", "bnooo"):
            script = _as_written_by(
                attacker,
                mine / f"fi_{name}.sh",
                f"#!/bin/bash\nexport FLASHINFER_WORKSPACE_BASE={deep}/{name}\n"
                f"exec {python} -m sglang.launch_server --model-path /m\n",
            )
            given = ("--rules", str(BASELINE), "--script", str(script))  # it has moe.flashinfer_kernels
            runs.append((name, run_cli("preflight", *given, env=env, timeout=60)))
        assert "moe.flashinfer_kernels" in runs[0][1].stdout, runs[0][1].stdout
        assert "TULIPNAME" not in runs[0][1].stdout + runs[0][1].stderr
        _told_the_same(runs)
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(spark, ignore_errors=True)


def test_the_probe_another_users_launcher_names_gets_nothing_of_the_readers_environment(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 13: the interpreter probe of the other user's script runs as them (red team 12), and was
    handed the environment the launch was read with: all of root's own (a token in the operator's shell),
    the operator's --env-file, and what the script copied from them into its variables and its
    interpreter's options. Their own python wrote it all down. The probe's launch is read without them
    (``PATH`` kept, which finds the program). The variable is a plain setting's (``SGLANG_*``): any other
    is unknown to their script altogether (red team 22, ``test_hostile_secrets.py``), and the probe is not
    asked."""
    mine = Path(tempfile.mkdtemp(prefix="sv-theirs-", dir="/tmp"))  # theirs, nobody else's to write
    try:
        os.chown(mine, attacker.uid, attacker.gid)
        mine.chmod(0o755)
        python = _their_python(attacker, mine)
        seen = mine / "seen"
        text = python.read_text().replace("#!/bin/sh\n", f'#!/bin/sh\nenv > {seen}\necho "$@" >> {seen}\n', 1)
        _as_written_by(attacker, python, text)
        secrets = tmp_path / "operator.env"
        secrets.write_text("SV_FILE_SECRET=TULIPFILE\n")
        secrets.chmod(0o600)
        script = _as_written_by(
            attacker,
            mine / "copy.sh",
            '#!/bin/bash\nexport COPY="$SGLANG_SV_SHELL_WORD"\n'
            f'exec {python} -X "t=$SGLANG_SV_SHELL_WORD" -m sglang.launch_server --model-path /m\n',
        )
        env = {**os.environ, "SGLANG_SV_SHELL_WORD": "TULIPSHELL"}
        proc = run_cli("preflight", "--script", str(script), "--env-file", str(secrets), env=env, timeout=60)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "imports sglang" in proc.stdout, proc.stdout  # it was asked, as them
        told = seen.read_text()
        assert "TULIP" not in told, told
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def test_the_install_another_users_interpreter_reports_is_listed_only_as_far_as_they_could(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 13 (red team 12's open item): the other user's own python answers the probe with an sglang
    in a directory of root's. The install reader looked there by name and listed it as root: ``srt/`` and
    ``version.py`` in a directory only root may enter were told apart from their absence (the notes), and a
    ``sglang-*.dist-info`` beside a package in a 0711 directory (they may enter it, never list it) gave
    its version."""
    mine = Path(tempfile.mkdtemp(prefix="sv-theirs-", dir="/tmp"))  # theirs, nobody else's to write
    seen = Path(tempfile.mkdtemp(prefix="sv-root711-", dir="/tmp"))
    try:
        os.chown(mine, attacker.uid, attacker.gid)
        mine.chmod(0o755)
        seen.chmod(0o711)
        deep = tmp_path / "rootonly"
        deep.mkdir(mode=0o700)
        (deep / "iyess" / "sglang" / "srt").mkdir(parents=True)
        (deep / "iyess" / "sglang" / "version.py").write_text('__version__ = "0.5.1"\n')
        (deep / "inooo" / "sglang").mkdir(parents=True)
        for name in ("dyess", "dnooo"):
            (seen / name / "sglang" / "srt").mkdir(parents=True)
            (seen / name).chmod(0o711)
        (seen / "dyess" / "sglang-0.5.77.dist-info").mkdir()
        (seen / "dyess" / "sglang-0.5.77.dist-info" / "METADATA").write_text(
            "Name: sglang\nVersion: 0.5.77\n\n"
        )
        for where, names in ((deep, ("iyess", "inooo")), (seen, ("dyess", "dnooo"))):
            runs = []
            for name in names:
                answer = f'{{"locations": ["{where}/{name}/sglang"], "site_dirs": [], "imported": []}}'
                assert run_as(attacker, ["mkdir", "-p", str(mine / name)]).returncode == 0
                python = _as_written_by(attacker, mine / name / "python3", f"#!/bin/sh\necho '{answer}'\n")
                assert run_as(attacker, ["chmod", "0755", str(python)]).returncode == 0
                script = _as_written_by(
                    attacker,
                    mine / f"{name}.sh",
                    f"#!/bin/bash\nexec {python} -m sglang.launch_server --model-path /m"
                    " --tool-call-parser qwen25\n",  # its notes name what could not be read
                )
                runs.append((name, run_cli("preflight", "--script", str(script), timeout=60)))
            assert "imports sglang" in runs[0][1].stdout, runs[0][1].stdout
            assert "0.5.77" not in runs[0][1].stdout
            _told_the_same(runs)
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(seen, ignore_errors=True)


def test_an_environment_file_glob_looks_below_its_wildcard_only_where_the_units_owner_could(
    attacker: User, shared: Path
) -> None:
    """Red team 13: ``EnvironmentFile=-DIR/NAME*/x.env`` in the other user's unit, where ``DIR`` is root's and
    theirs to list and ``NAME_d`` root's 0700 directory: the glob looked for ``x.env`` inside it as root.
    Present, the read was refused naming it; absent, the unit read as if there were no match."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    # root's, 0755, under no sticky /tmp (where anyone could create a matching file): only root writes it
    seen = Path(tempfile.mkdtemp(prefix="sv-rootdir-", dir="/"))
    try:
        seen.chmod(0o755)
        runs = []
        for name in ("yess", "nooo"):
            (seen / f"{name}_d").mkdir(mode=0o700)
            if name == "yess":
                (seen / f"{name}_d" / "x.env").write_text("A=1\n")
            unit = _as_written_by(
                attacker,
                mine / f"{name}.service",
                f"[Service]\nEnvironmentFile=-{seen}/{name}*/x.env\n"
                "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n",
            )
            runs.append((name, run_cli("preflight", "--unit", str(unit), timeout=60)))
        _told_the_same(runs)
    finally:
        shutil.rmtree(seen, ignore_errors=True)


def test_roots_own_unit_naming_another_users_config_is_read_as_root(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """Red team 14 (regressions of the namers' rule): root's own unit, with a 0600 EnvironmentFile= of
    root's, names the other user's ``--config``. The config's owner names what the config names (its model
    path), not root's unit: the start budget re-read the unit as them and the run stopped at exit 65, and
    the program, named by root's unit, was looked up as them."""
    mine = shared / "mine"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    config = _as_written_by(attacker, mine / "c.yaml", "tp-size: 1\n")
    secret = tmp_path / "root.env"
    secret.write_text("HF_TOKEN=hf_rootENVFILESECRET\n")
    secret.chmod(0o600)
    unit = tmp_path / "root.service"
    unit.write_text(
        f"[Service]\nEnvironmentFile={secret}\nTimeoutStartSec=900\n"
        f"ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --config {config}\n"
    )
    proc = run_cli("preflight", "--unit", str(unit), "--format", "json", timeout=60)
    assert proc.returncode != 65, (proc.returncode, proc.stderr)
    assert "who could not" not in proc.stdout + proc.stderr and "SECRET" not in proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert "TimeoutStartSec=900" in json.dumps(report), proc.stdout[:500]


def _count_walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``trusted_files._walk`` walks from ``/`` from here on (a walk per name is what a tree the
    attacker makes deep and wide turns into minutes)."""
    from validator import trusted_files

    walks: list[str] = []
    real_walk = trusted_files._walk

    def counted(path: str, **kw: Any) -> Any:
        walks.append(path)
        return real_walk(path, **kw)

    monkeypatch.setattr(trusted_files, "_walk", counted)
    return walks


def _spy_by_name(monkeypatch: pytest.MonkeyPatch, under: Path) -> list[tuple[str, str]]:
    """Every ``os.stat``, ``lstat``, ``access``, ``listdir``, ``scandir`` and ``statvfs`` made by name (no
    ``dir_fd``, not a descriptor) on a path under ``under``, recorded from here on: a look that a link swapped
    in since the walk would send somewhere else."""
    by_name: list[tuple[str, str]] = []
    for name in ("stat", "lstat", "access", "listdir", "scandir", "statvfs"):
        real = getattr(os, name)

        def spy(
            path: object = ".", *args: object, _real: object = real, _n: str = name, **kw: object
        ) -> object:
            if not isinstance(path, int) and kw.get("dir_fd") is None and str(path).startswith(str(under)):
                by_name.append((_n, str(path)))
            return _real(path, *args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(os, name, spy)
    return by_name


def test_looks_for_another_users_launcher_are_walked_never_made_by_name(
    attacker: User, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script's file test, ``cd`` and ``PATH`` lookup, the program it runs and its ``--config``, for a
    launch another user named, were judged on a walk and then looked at again by name as root: a link that
    user swapped in between sent the second look into a directory only root may enter, and the answer
    told whether a file is there (the race red team 11 measured in ``source``: 40 of 1,600 runs). Now
    each answer is the walk's own; no path is looked up by name at all, so there is no second look to
    race."""
    from validator.sources.host.program import resolve_program
    from validator.sources.launch.shell.reader import read_script
    from validator.sources.sglang.config import merge_config
    from validator.trusted_files import read_as

    mine = shared / "race"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    assert run_as(attacker, ["sh", "-c", f"mkdir {mine}/d {mine}/bin && : > {mine}/d/x"]).returncode == 0
    script = _as_written_by(
        attacker,
        mine / "run.sh",
        f"#!/bin/bash\n[ -e {mine}/d/x ] && A=1\n[ -x {mine}/d/x ] && B=1\n[ -L {mine}/d ] && C=1\n"
        f"cd {mine}/d\nPATH={mine}/bin:/usr/bin command -v nothere-xyz\n"
        "exec python3 -m sglang.launch_server --model-path /m\n",
    )
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        read_script(script, env={"PATH": "/usr/bin:/bin"})
        resolve_program(f"{mine}/d/x", {"PATH": "/usr/bin"})
        resolve_program("x", {"PATH": f"{mine}/d"})
        with pytest.raises(InputError):
            merge_config(["--config", f"{mine}/d/c.yaml"], origin="test")
    assert not by_name, by_name


def test_a_sourced_file_of_another_users_launcher_is_judged_on_the_walk_never_looked_at_by_name(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``source`` of a file in another user's directory: who else could write it was judged on a walk,
    and then what stands at its name was ``lstat``-ed by name as root. The owner who swaps a directory on
    the way for a link between the two sent that look into a directory only root may enter, and the
    report said 'is there already, owned by UID U, mode M' only where something was there (red team 15:
    a file of another user's in a root-only directory; never for a missing one)."""
    from validator.sources.launch.shell.reader import read_script
    from validator.trusted_files import read_as

    mine = shared / "race-source"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    assert run_as(attacker, ["sh", "-c", f"mkdir {mine}/d && echo A=1 > {mine}/d/x"]).returncode == 0
    script = _as_written_by(
        attacker, mine / "run.sh", f". {mine}/d/x\nexec python3 -m sglang.launch_server --model-path /m\n"
    )
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        read_script(script, env={"PATH": "/usr/bin:/bin"})
    assert not by_name, by_name


def test_a_probe_that_fails_to_start_names_its_directory_from_the_walk_never_by_name(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter probe enters its working directory through a descriptor walked as the launch's
    owner; but when the program then failed to start, whether to say 'in DIR' was decided by
    ``Path.is_dir`` by name as root: a link swapped in since the walk told whether a directory is there
    where the owner could not look."""
    from validator.sources.run_as import RunAs
    from validator.sources.sglang.interpreter import probe_interpreter
    from validator.trusted_files import read_as

    mine = shared / "race-probe"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    assert run_as(attacker, ["mkdir", f"{mine}/d"]).returncode == 0
    program = _as_written_by(attacker, mine / "python3", "#!/nonexistent-interpreter-xyz\n")
    assert run_as(attacker, ["chmod", "0755", str(program)]).returncode == 0
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        probe = probe_interpreter(
            str(program), cwd=mine / "d", run_as=RunAs(attacker.uid, attacker.gid, (attacker.gid,))
        )
    assert probe.error is not None and probe.error.startswith(f"cannot run {program} as "), probe.error
    assert not by_name, by_name


def test_who_runs_another_users_program_is_judged_on_the_walk_never_resolved_by_name(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_as.of_files`` asked :func:`hidden_from_namers` of the program, then resolved it with
    ``os.path.realpath``, ``lstat``-ed each directory above and globbed its prefix for site directories,
    all by name as root: the launch's owner who swaps a directory on the way for a link in between had
    the owners of files in a directory only root may enter decide who runs the probe (and the report say
    'the files it runs belong to several other users: PATH (UID U)'). Each look is now a walk's."""
    from validator.sources.run_as import of_files
    from validator.trusted_files import read_as

    mine = shared / "race-runas"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    made = f"mkdir -p {mine}/v/bin {mine}/v/lib/python3.99/site-packages && : > {mine}/v/bin/python3"
    assert run_as(attacker, ["sh", "-c", made]).returncode == 0
    assert run_as(attacker, ["ln", "-s", "v", f"{mine}/link"]).returncode == 0
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        of_files([mine / "link" / "bin" / "python3"], {}, named_by=[attacker.uid])
    assert not by_name, by_name


def test_a_program_swapped_between_its_two_looks_is_unreadable_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``resolve_program`` looked at a program path twice (is it there, may it run): the first inside a
    ``try``, the second not. The launch's owner who swaps a directory on the way for a link between the
    two made the second walk refuse, and root's preflight ended in 'internal error: UnsafeLocation' (or
    'OSError: [Errno 22]', a link swapped back before its ``readlink``): red team 15, 7 to 25 of 150
    runs. Both looks now answer as the first does."""
    from validator.sources.host import program as program_module
    from validator.sources.host.program import ProgramUnreadable, resolve_program
    from validator.trusted_files import UnsafeLocation

    exe = tmp_path / "python3"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    real = program_module.look_unplanted
    calls: list[int] = []

    def swapped(path: str, access: int = os.F_OK, **kw: bool) -> os.stat_result | None:
        calls.append(access)
        if len(calls) > 1:
            raise UnsafeLocation(f"{path}: a link swapped in on the way")
        return real(path, access, **kw)

    monkeypatch.setattr(program_module, "look_unplanted", swapped)
    found, why = resolve_program(str(exe), {"PATH": "/usr/bin"})
    assert found is None and isinstance(why, ProgramUnreadable), why


def test_what_another_users_interpreter_reports_is_listed_only_through_walks(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The install, site and FlashInfer directories the attacker's interpreter reports were globbed and
    looked at by name as root (``rglob`` for the build's key and the variables SGLang reads, ``glob`` for
    FlashInfer's AOT builds and the interpreter's site directories, ``Path.is_file``): below a directory
    the attacker may enter but not list, or through a link they swap in, that listed for them what only root
    may. In their scope every directory is listed through a walked descriptor, every name looked at from
    one; the answers are the same as a plain glob's where they could look."""
    from validator.sources.host.flashinfer import _SO, _aot_kernels, _env_tree
    from validator.sources.host.humming import installed_version, writable_by
    from validator.sources.run_as import _site_dirs
    from validator.sources.sglang.install import referenced_env
    from validator.sources.sglang.tables import build_key
    from validator.trusted_files import read_as

    mine = shared / "install"
    site = mine / "lib" / "python3.11" / "site-packages"
    made = [
        f"mkdir -p {site}/sglang/srt/arg_groups/x {mine}/bin",
        f"mkdir -p {site}/flashinfer_jit_cache/a/{Path(_SO).parent}",
        f"echo 'SGLANG_SEEN = 1' > {site}/sglang/srt/arg_groups/x/m.py",
        f": > {site}/sglang/srt/server_args.py; : > {site}/flashinfer_jit_cache/a/{_SO}",
        f"ln -s /usr/bin/python3 {mine}/bin/python3",
        f"mkdir -p {site}/humming {site}/flashinfer/jit && : > {site}/humming/__init__.py",
        f"echo 'X = 1' > {site}/flashinfer/jit/env.py && mkdir {mine}/cache",
    ]
    assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
    root = site / "sglang"
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        assert referenced_env(root, {"SGLANG_SEEN", "SGLANG_NOT"}) == {"SGLANG_SEEN"}
        key = build_key(root, "0.5.23")
        kernels = _aot_kernels([site], "0.6.0", "0.6.0")
        sites = _site_dirs(mine / "bin" / "python3")
        humming = installed_version([site], [], (site / "humming_kernels-1.dist-info", "1.0"))
        env_py = _env_tree([site])
        writable = writable_by(mine / "cache" / "humming", pwd.getpwuid(0))
    assert not by_name, by_name
    assert humming == "1.0" and env_py is not None and writable
    assert kernels == [site / "flashinfer_jit_cache" / "a" / _SO], kernels
    assert site in sites, sites
    monkeypatch.undo()
    assert key == build_key(root, "0.5.23")  # as root's own plain rglob keys it


def test_what_another_users_launch_names_beside_its_files_is_looked_at_only_through_walks(
    attacker: User, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looks the walks of 97eb110 and 8385722 left by name as root: the python beside ``sglang`` and a
    Compose file's ``.env`` and overrides (``os.path.lexists``), humming's modules (``os.walk``), the mount
    of its cache (``os.statvfs``), the console script's directory and the reported SGLang (``Path.resolve``).
    Through a directory only root may enter (or a link the attacker swaps in after the walk) each told them
    what stands there: a root-only ``python3`` beside a root-only ``sglang`` became the launch's interpreter
    in the report. In their scope each is answered from a walk; where they could look, the answers agree."""
    from validator.sources.host.humming import gb10_bandwidth_safe, writable_by
    from validator.sources.launch.command import _sglang_interpreter
    from validator.sources.launch.compose import _no_override, _project_dotenv
    from validator.trusted_files import read_as, realpath

    mine = shared / "launch"
    made = [
        f"mkdir -p {mine}/bin {mine}/humming/sub {mine}/proj {mine}/cache",
        f"echo 'not a shebang' > {mine}/bin/sglang && ln -s /usr/bin/python3 {mine}/bin/python3",
        f"echo 'X = 1' > {mine}/humming/__init__.py && echo 'Y = 2' > {mine}/humming/sub/m.py",
        f": > {mine}/proj/compose.yaml",
    ]
    assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
    by_name = _spy_by_name(monkeypatch, mine)
    with read_as({attacker.uid: ("the test's launcher", ())}):
        sibling = _sglang_interpreter(str(mine / "bin" / "sglang"), {})
        gb10 = gb10_bandwidth_safe(mine / "humming")
        writable = writable_by(mine / "cache", pwd.getpwuid(attacker.uid))
        with pytest.raises(InputError, match="anyone could create it"):  # theirs to create: as before
            _project_dotenv(mine / "proj" / ".env")
        _no_override(mine / "proj" / "compose.yaml", "the test's compose file")
        script = realpath(mine / "bin" / "sglang")  # a console script's directory, a reported SGLang
        imported = realpath(mine / "bin")
    assert not by_name, by_name
    assert sibling == (str(mine / "bin" / "python3"), []), sibling
    assert gb10 == (True, "no module of humming queries NVML's memory clock (2 Python files read)"), gb10
    assert writable
    assert script == mine / "bin" / "sglang" and imported == mine / "bin"


def _branches_of_a_read_test(attacker: User, mine: Path, target: Path) -> set[str]:
    """The model paths the attacker's script launches with, read by root: ``/yes`` where ``[ -r target ]``
    holds, ``/no`` where not, both where the reader cannot tell."""
    from validator.sources.launch.shell.reader import read_script
    from validator.sources.launch.shell.values import join
    from validator.trusted_files import read_as

    script = _as_written_by(
        attacker,
        mine / f"{target.name}.sh",
        f"#!/bin/bash\nif [ -r {target} ]; then P=/yes; else P=/no; fi\n"
        "exec python3 -m sglang.launch_server --model-path $P\n",
    )
    with read_as({}):
        reading = read_script(script, env={"PATH": "/usr/bin:/bin"})
    return {str(join(e.launch.words[-1])) for e in reading.endings if e.launch is not None}


def test_a_read_write_or_run_test_in_another_users_script_is_answered_for_them_not_for_root(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """``[ -r FILE ]`` in another user's script was answered with root's access: root may read a 0600 file
    of root's, so the branch their script takes (as them, it may not) was read as certain. Where root's
    answer is not theirs, the test is unknown and both branches are read; where it is, it is answered."""

    mine = shared / "rw"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    files = Path(tempfile.mkdtemp(prefix="sv-rw-", dir="/tmp"))
    try:
        files.chmod(0o755)
        for name, mode in (("root600", 0o600), ("root644", 0o644)):
            (files / name).write_text("x\n")
            (files / name).chmod(mode)
        paths = {n: _branches_of_a_read_test(attacker, mine, files / n) for n in ("root600", "root644")}
        assert paths == {"root600": {"/yes", "/no"}, "root644": {"/yes"}}, paths
    finally:
        shutil.rmtree(files, ignore_errors=True)


def test_the_sglang_another_users_interpreter_reports_is_never_resolved_by_name_by_the_check(
    attacker: User,
) -> None:
    """``launch.program`` compared the SGLang another user's interpreter reported with ``--sglang-root``
    by resolving both by name as root: a reported path through a link in a directory only root may enter
    passed where the link pointed at the inspected tree and failed where it did not, the same launch and
    the same words otherwise (red team 17, as the real attacker: no race, every run). Whether the two
    agree is the locating code's judgement, made as the launch's owners could resolve it: the check keeps
    it."""
    base = Path(tempfile.mkdtemp(prefix="sv-rt17-"))
    try:
        _check_keeps_the_locating_judgement(attacker, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _check_keeps_the_locating_judgement(attacker: User, base: Path) -> None:
    os.chmod(base, 0o755)  # root's, not writable by others: the attacker's interpreter may be run as them
    hidden = base / "rootonly"
    (hidden / "real" / "sglang").mkdir(parents=True)
    os.symlink(hidden / "real", hidden / "lnk")
    os.chmod(hidden, 0o700)
    mine = base / "launch"
    mine.mkdir()
    os.chown(mine, attacker.uid, attacker.gid)
    answer = {"locations": [f"{hidden}/lnk/sglang"], "origin": None, "site_dirs": [], "imported": []}
    made = [
        f"mkdir -p {mine}/bin",
        f"printf '#!/bin/sh\\necho %s\\n' '{json.dumps(json.dumps(answer))}' > {mine}/bin/python3",
        f"chmod 755 {mine}/bin/python3",
        f"echo 'exec {mine}/bin/python3 -m sglang.launch_server --model-path /m' > {mine}/start.sh",
    ]
    assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "HOME": str(base)}
    _, report, err = preflight_json_in_process(
        env, "--script", str(mine / "start.sh"), "--sglang-root", str(hidden / "real" / "sglang")
    )
    assert report, err
    program = {c["id"]: c for c in report["checks"]}["launch.program"]
    assert program["evidence"]["sglang_root"] == f"{hidden}/lnk/sglang", program
    assert program["status"] == "fail" and "not from the inspected" in program["message"], program


def test_files_below_another_users_tree_opens_each_directory_from_its_parent_never_walks_per_name(
    attacker: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``files_below`` in a namers' scope looked at every name with a walk from ``/``: a tree the attacker
    made a thousand levels deep (20 files a level) held root's preflight 79 s per call (red team 17), and
    its depth is theirs to choose up to PATH_MAX. Each directory is now opened from its parent's descriptor
    (``O_NOFOLLOW``) and judged as them: one walk for the top, the same files as ``rglob`` finds in a tree
    they may list, nothing from a directory they may not list, no link to a directory entered."""
    from validator.bounded_files import files_below
    from validator.trusted_files import read_as

    base = Path(tempfile.mkdtemp(prefix="sv-rt17-"))
    try:
        os.chmod(base, 0o755)
        tree = base / "tree"
        tree.mkdir()
        os.chown(tree, attacker.uid, attacker.gid)
        made = [
            f"mkdir -p {tree}/a/b/c/d/e {tree}/z",
            f"for d in {tree} {tree}/a {tree}/a/b {tree}/a/b/c {tree}/a/b/c/d {tree}/a/b/c/d/e {tree}/z;"
            " do for i in 1 2 3 4 5 6 7 8; do echo x > $d/m$i.py; echo x > $d/n$i.txt; done; done",
            f"ln -s {base}/hidden {tree}/linked",
        ]
        (base / "hidden").mkdir()
        (base / "hidden" / "secret.py").write_text("x\n")
        os.chmod(base / "hidden", 0o700)
        assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
        (tree / "rootonly").mkdir()
        (tree / "rootonly" / "h.py").write_text("x\n")
        os.chmod(tree / "rootonly", 0o700)
        expected = sorted(p for p in tree.rglob("*.py") if "rootonly" not in p.parts)
        walks = _count_walks(monkeypatch)
        with read_as({attacker.uid: ("the test's launcher", ())}):
            found = files_below(tree, ".py")
        assert found == expected and len(found) == 56, found
        assert len(walks) <= 1, len(walks)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_humming_in_another_users_tree_is_read_from_each_directory_and_judged_whole_or_not_at_all(
    attacker: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Humming's modules in a namers' scope were listed by the descriptor walk, then each read with a walk
    from ``/`` (3.6 s at the old 4,000-file cap, 120 levels deep), and a module past the walk's depth bound
    (or the file cap) was left unread while the verdict said "safe": an unguarded NVML query at level 130
    passed GB10's check for a start that dies. Each module is now read from its directory's descriptor, and
    a package not read whole is no verdict."""
    from validator.sources.host.humming import gb10_bandwidth_safe
    from validator.trusted_files import read_as

    unguarded = (
        "import pynvml\ndef f(h):\n    return pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)\n"
    )
    base = Path(tempfile.mkdtemp(prefix="sv-hum-"))
    try:
        os.chmod(base, 0o755)
        os.chown(base, attacker.uid, attacker.gid)
        wide, deep = base / "wide" / "humming", base / "deep" / "humming"
        made = [
            f"mkdir -p {wide} {deep}",
            f"cd {wide} && for i in $(seq 200); do echo 'X = 1' > m$i.py; done",
        ]
        assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
        bottom = "import os\nfor i in range(130):\n    os.mkdir('d'); os.chdir('d')\n"
        bottom += f"open('device.py', 'w').write({unguarded!r})\n"
        assert run_as(attacker, ["python3", "-c", bottom], cwd=str(deep)).returncode == 0
        walks = _count_walks(monkeypatch)
        with read_as({attacker.uid: ("the test's launcher", ())}):
            assert gb10_bandwidth_safe(wide) == (
                True,
                "no module of humming queries NVML's memory clock (200 Python files read)",
            )
            assert len(walks) <= 1, len(walks)  # the top only, not one per module
            verdict, why = gb10_bandwidth_safe(deep)
        assert verdict is None and "not read whole" in why, why
        assert (
            gb10_bandwidth_safe(deep)[0] is False
        )  # root's own tree (no scope): read whole, the query found
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_whether_another_users_model_path_is_a_directory_is_looked_at_from_a_walk(attacker: User) -> None:
    """``--rules auto`` tells a Hugging Face repo id from a local directory by looking for
    ``WorkingDirectory/--model-path`` (and for it beside this process): by name as root, so another user's
    unit whose working directory is one only root may enter learned whether ``orgx/modely`` is a directory
    there from ``rules.auto``'s words (red team 17, as the real attacker: every run). In their scope the
    look is a walk judged as them: the same words whatever is there."""
    base = Path(tempfile.mkdtemp(prefix="sv-rt17-"))
    try:
        os.chmod(base, 0o755)
        hidden = base / "rootonly"
        (hidden / "present" / "orgx" / "modely").mkdir(parents=True)
        (hidden / "absent").mkdir()
        os.chmod(hidden, 0o700)
        mine = base / "launch"
        mine.mkdir()
        os.chown(mine, attacker.uid, attacker.gid)
        made = [
            f"printf '[Service]\\nWorkingDirectory={hidden}/{d}\\nExecStart=/usr/bin/python3 -m "
            f"sglang.launch_server --model-path orgx/modely\\n' > {mine}/{d}.service"
            for d in ("present", "absent")
        ]
        assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
        said = {}
        for d in ("present", "absent"):
            _, report, err = preflight_json_in_process(
                {"PATH": "/usr/bin:/bin", "HOME": str(base)},
                "--rules",
                "auto",
                "--unit",
                str(mine / f"{d}.service"),
            )
            assert report, err
            said[d] = {c["id"]: c for c in report["checks"]}["rules.auto"]["message"]
        assert said["present"] == said["absent"], said
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_read_test_in_another_users_script_is_answered_by_the_acl_the_kernel_applies_to_them(
    attacker: User, shared: Path, tmp_path: Path
) -> None:
    """``[ -r FILE ]`` in another user's script was judged for them by FILE's mode bits alone: a 0644 file
    whose ACL denies them (``user:them:---``) was read as certain (root's yes, one branch) while their own
    run takes the other branch; a 0600 file whose ACL grants them is theirs to read (one branch)."""

    mine = shared / "acl-r"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(mine)]).returncode == 0
    files = Path(tempfile.mkdtemp(prefix="sv-aclr-", dir="/tmp"))
    try:
        files.chmod(0o755)
        for name, mode, perm in (("denied644", 0o644, 0), ("granted600", 0o600, 4)):
            (files / name).write_text("x\n")
            (files / name).chmod(mode)
            _set_acl(files / name, attacker.uid, perm)
        paths: dict[str, set[str]] = {}
        for name in ("denied644", "granted600"):
            theirs = run_as(attacker, ["test", "-r", str(files / name)]).returncode == 0
            assert theirs == (name == "granted600"), name  # the kernel's answer, as them
            paths[name] = _branches_of_a_read_test(attacker, mine, files / name)
        assert paths == {"denied644": {"/yes", "/no"}, "granted600": {"/yes"}}, paths
    finally:
        shutil.rmtree(files, ignore_errors=True)


def test_the_sources_of_the_sglang_another_users_interpreter_reports_are_read_as_them_from_each_directory(
    attacker: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a ``SGLANG_*`` variable environ.py lacks appears in the reported install's sources was read
    outside the launch's namers' scope: ``rglob`` as root (a tree the attacker made 1,100 levels deep ended
    root's preflight in ``internal error: RecursionError``, exit 1) and a walk from ``/`` per file (100,000
    files 120 levels deep: 81 s; red team 18, as sv-attacker2). It is read as them, each file from its
    directory's descriptor: a report, and no walk per file."""

    base = Path(tempfile.mkdtemp(prefix="sv-rt18-"))
    try:
        os.chmod(base, 0o755)
        mine = base / "launch"
        mine.mkdir()
        os.chown(mine, attacker.uid, attacker.gid)
        sg = mine / "sg" / "sglang"
        answer = {"locations": [str(sg)], "origin": None, "site_dirs": [], "imported": []}
        made = [
            f"mkdir -p {mine}/bin {sg}/srt/layers",
            f"printf '#!/bin/sh\\necho %s\\n' '{json.dumps(json.dumps(answer))}' > {mine}/bin/python3",
            f"chmod 755 {mine}/bin/python3",
            f"printf 'class Envs:\\n    SGLANG_DECLARED = EnvBool(False)\\n' > {sg}/srt/environ.py",
            f"printf 'export SGLANG_UNDECLARED_X=1\\nexec {mine}/bin/python3 -m sglang.launch_server "
            f"--model-path /m\\n' > {mine}/start.sh",
        ]
        assert run_as(attacker, ["sh", "-c", " && ".join(made)]).returncode == 0
        deep = ["python3", "-c", "import os\nfor i in range(1100):\n    os.mkdir('d'); os.chdir('d')\n"]
        assert run_as(attacker, deep, cwd=str(sg / "srt")).returncode == 0
        files = ["sh", "-c", "for i in $(seq 200); do : > $i.py; done"]
        assert run_as(attacker, files, cwd=str(sg / "srt" / "layers")).returncode == 0
        walks = _count_walks(monkeypatch)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(base)}
        code, report, err = preflight_json_in_process(env, "--script", str(mine / "start.sh"))
        assert report and "internal error" not in err, (code, err[-400:])
        assert len(walks) < 200, len(walks)  # not one per source file
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)  # shutil.rmtree recurses per level


def test_a_link_to_proc_self_in_another_users_tree_is_not_followed_into_the_readers_own_process(
    attacker: User,
) -> None:
    """Red team 21: the attacker's ``pc -> /proc/self/cwd`` and ``[ -e pc/flag ]`` in their script: the
    walk followed /proc/self into root's own process, so the test was answered from the directory root ran
    preflight from (here: a ``flag`` there read --enable-fp32-lm-head as given; none there, as not given,
    while the script's shell, whose /proc/self it is, finds its own). A link under /proc is a process's,
    never followed for another user: the test is known only at run time."""
    base = Path(tempfile.mkdtemp(prefix="sv-proc-"))  # a directory the attacker can reach
    here = Path(tempfile.mkdtemp(prefix="sv-here-"))  # where root runs preflight: one they can enter too
    (here / "flag").write_text("")
    try:
        os.chmod(here, 0o755)
        os.chmod(base, 0o755)
        os.chown(base, attacker.uid, attacker.gid)
        _plant_link(attacker, Path("/proc/self/cwd"), base / "pc")
        line = (
            f"#!/bin/bash\nX=()\nif [ -e {base}/pc/flag ]; then X=(--enable-fp32-lm-head); fi\n"
            'SGLANG_ENABLE_FP8_LM_HEAD=1 exec python3 -m sglang.launch_server --model-path /m "${X[@]}"\n'
        )
        made = run_as(attacker, ["sh", "-c", f"cat > {base}/start.sh"], input=line.encode())
        assert made.returncode == 0, made.stderr
        res = run_cli(
            "preflight",
            "--check",
            "lm_head.exclusive",
            "--format",
            "json",
            "--script",
            f"{base}/start.sh",
            cwd=here,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(here, ignore_errors=True)
    check = next(c for c in json.loads(res.stdout)["checks"] if c["id"] == "lm_head.exclusive")
    assert check["status"] == "error" and "run-time condition" in check["message"], check
