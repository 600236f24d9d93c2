"""Where the attestation goes and how it is written (README and SECURITY.md: its location and trust), and
attacks replayed against the writer: a directory pre-created by another local user, the
temporary file swapped for a symlink during fsync, a FIFO planted at the path. Run as root (here and in
CI), the second user is real: a subprocess that drops to an unused UID with ``os.setuid``."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.second_user import User, call_as
from validator import trusted_files
from validator.attestation import location, schema, writer
from validator.plugin.state import PluginState

ATTACKER_UID = 54321  # no passwd entry needed: setuid() takes any UID


def _doc() -> schema.Attestation:
    return PluginState(host="127.0.0.1", port=30000).document(env={})


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ---- location ----


def test_location_order(tmp_path: Path) -> None:
    run_dir = tmp_path / "run" / "spark-validate"
    (tmp_path / "run").mkdir()
    env = {
        location.ENV_PATH: "/srv/att/attestation.json",
        "RUNTIME_DIRECTORY": "/run/sglang:/run/other",
        "XDG_RUNTIME_DIR": "/run/user/1000",
    }
    assert location.default_path(env, run_dir=run_dir) == Path("/srv/att/attestation.json")
    del env[location.ENV_PATH]
    assert location.default_path(env, run_dir=run_dir) == Path("/run/sglang/attestation.json")
    del env["RUNTIME_DIRECTORY"]
    assert location.default_path(env, run_dir=run_dir) == run_dir / "attestation.json"  # creatable here
    os.chmod(tmp_path / "run", 0o555)
    try:
        if os.geteuid() != 0:  # root may create anywhere; an unprivileged writer falls back to XDG
            assert location.default_path(env, run_dir=run_dir) == Path(
                "/run/user/1000/spark-validate/attestation.json"
            )
    finally:
        os.chmod(tmp_path / "run", 0o755)
    run_dir.mkdir()
    if os.geteuid() == 0:
        os.chown(run_dir, ATTACKER_UID, -1)  # someone else's /run/spark-validate is not ours to use
        assert location.default_path(env, run_dir=run_dir) == Path(
            "/run/user/1000/spark-validate/attestation.json"
        )
    assert location.default_path({}, run_dir=Path("/proc/no/such/dir")) is None  # never a fallback to /tmp


def test_paths_per_rank() -> None:
    env = {location.ENV_PATH: "/srv/att/attestation.json"}
    assert location.attestation_path(0, env) == Path("/srv/att/attestation.json")
    assert location.attestation_path(3, env) == Path("/srv/att/attestation.tp3.json")


# ---- the writer on directories it owns ----


def test_creates_a_private_directory_and_leaves_no_temporaries(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "deeper" / "attestation.json"
    old = os.umask(0)  # a careless umask must not open anything up
    try:
        writer.write_document(path, _doc())
        writer.write_document(path, _doc())
    finally:
        os.umask(old)
    assert _mode(path.parent) == 0o700 and _mode(path.parent.parent) == 0o700
    assert _mode(path) == 0o644
    assert json.loads(path.read_text())["schema"] == schema.SCHEMA
    assert [p.name for p in path.parent.iterdir()] == ["attestation.json"]


def test_a_restrictive_umask_still_gives_the_contracts_modes(tmp_path: Path) -> None:
    """Under umask 0777 every directory made on the way is 0700 all the same: a user other than root could
    not enter one made 0000 (root can, so this fails only when run as another user)."""
    path = tmp_path / "strict" / "attestation.json"
    deeper = tmp_path / "made" / "on the way" / "attestation.json"
    old = os.umask(0o777)
    try:
        writer.write_document(path, _doc())
        writer.write_document(deeper, _doc())
    finally:
        os.umask(old)
    assert _mode(path.parent) == 0o700 and _mode(path) == 0o644
    assert (_mode(deeper.parent.parent), _mode(deeper.parent), _mode(deeper)) == (0o700, 0o700, 0o644)


@pytest.mark.parametrize("rel", ["d/attestation.json", "d/e/attestation.json"])
@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775])
def test_a_directory_others_can_write_on_the_way_is_refused_before_anything_is_made(
    attacker: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str, mode: int
) -> None:
    """A directory on the way that others can write (a shared scratch area, sticky or not, or a group's):
    whoever can write it could rename what the writer makes there and put theirs in its place, and the
    readers refuse every file below it. The writer refuses before making anything, naming it; a link in it
    is never followed (what it points at is not even looked at)."""
    shared = tmp_path / "pub"
    shared.mkdir()
    os.chmod(shared, mode)
    made: list[str] = []
    real_mkdir = os.mkdir

    def mkdir(name: Any, m: int = 0o777, *, dir_fd: int | None = None) -> None:
        made.append(str(name))
        real_mkdir(name, m, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir)
    (shared / "link").symlink_to(tmp_path / "elsewhere")  # a link the second user could have planted
    for target in (shared / rel, shared / "link" / rel):
        with pytest.raises(trusted_files.UnsafeLocation) as info:
            writer.write_document(target, _doc())
        assert str(info.value) == (
            f"{target.parent}: directory {shared} on the way is writable by its group or others "
            f"(mode {mode:04o}); refusing to write the attestation there"
        )
    monkeypatch.undo()
    assert made == [] and [p.name for p in shared.iterdir()] == ["link"]
    assert not (tmp_path / "elsewhere").exists()
    # the second user's own directory on the way, which others cannot write: refused by its owner
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, attacker.uid, attacker.gid)
    with pytest.raises(
        trusted_files.UnsafeLocation, match=f"{theirs} on the way is owned by UID {attacker.uid}"
    ):
        writer.write_document(theirs / rel, _doc())
    assert list(theirs.iterdir()) == []


def test_a_directory_that_cannot_be_made_is_unsafe_location_naming_it(attacker: User) -> None:
    """A parent this user cannot write (root's ``/``, at the last level or one on the way): one
    UnsafeLocation naming the directory, not a bare PermissionError from mkdir."""
    absent = Path("/") / f"sv-absent-{os.getpid()}-{os.urandom(3).hex()}"

    def attempt(rel: str) -> str:
        try:
            writer.write_document(absent / rel, b"{}")
        except trusted_files.UnsafeLocation as exc:
            return f"UnsafeLocation: {exc}"
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return "written"

    victim = User("victim", ATTACKER_UID, ATTACKER_UID)  # a UID that is not root
    assert call_as(victim, lambda: attempt("attestation.json")) == (
        f"UnsafeLocation: {absent}: cannot make the directory: Permission denied"
    )
    assert call_as(victim, lambda: attempt("e/attestation.json")) == (
        f"UnsafeLocation: {absent}/e: cannot make {absent} on the way: Permission denied"
    )
    assert not absent.exists()


def test_group_directory_is_0750(tmp_path: Path) -> None:
    gid = os.getgid()
    path = tmp_path / "grp" / "attestation.json"
    writer.write_document(path, _doc(), gid=location.configured_gid({location.ENV_GROUP: str(gid)}))
    assert _mode(path.parent) == 0o750 and os.stat(path.parent).st_gid == gid
    assert _mode(path) == 0o640 and os.stat(path).st_gid == gid
    with pytest.raises(trusted_files.UnsafeLocation, match="no such group"):
        location.configured_gid({location.ENV_GROUP: "no-such-group-spark"})


def test_a_group_named_later_is_given_to_the_existing_directory(tmp_path: Path) -> None:
    """``SPARK_VALIDATE_ATTESTATION_GROUP`` set after a run without it: the directory that run made (0700)
    is given the group and 0750, or the group's readers (the sidecar) could never enter it."""
    path = tmp_path / "grp" / "attestation.json"
    writer.write_document(path, _doc())
    assert _mode(path.parent) == 0o700
    gid = os.getgid()
    writer.write_document(path, _doc(), gid=gid)
    assert _mode(path.parent) == 0o750 and os.stat(path.parent).st_gid == gid and _mode(path) == 0o640


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o720])
def test_refuses_a_directory_others_can_write(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    with pytest.raises(trusted_files.UnsafeLocation, match="writable by its group or others"):
        writer.write_document(shared / "attestation.json", _doc())
    assert list(shared.iterdir()) == []
    with pytest.raises(trusted_files.UnsafeLocation):  # /tmp itself: SPARK_VALIDATE_ATTESTATION=/tmp/x.json
        writer.write_document(Path("/tmp/attestation-spark-validate-test.json"), _doc())


def test_refuses_a_symlinked_directory(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(trusted_files.UnsafeLocation, match="cannot open the directory"):
        writer.write_document(tmp_path / "link" / "attestation.json", _doc())
    assert list(real.iterdir()) == []


def test_symlink_swap_during_fsync_never_changes_another_files_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As found once: the temporary file is swapped for a symlink to a private file while the
    writer fsyncs; the old writer then ``chmod``-ed by name and made the victim 0644. ``fchmod`` acts on
    the descriptor, so the victim keeps its mode whatever the name points to."""
    victim = tmp_path / "api-key"
    victim.write_text("sk-secret\n")
    os.chmod(victim, 0o600)
    directory = tmp_path / "att"
    directory.mkdir(mode=0o700)
    real_fsync = os.fsync
    swapped: list[str] = []

    def racing_fsync(fd: int) -> None:
        for entry in os.listdir(directory):
            if entry.endswith(".tmp"):
                os.unlink(directory / entry)
                os.symlink(victim, directory / entry)
                swapped.append(entry)
        real_fsync(fd)

    monkeypatch.setattr(trusted_files.os, "fsync", racing_fsync)
    writer.write_document(directory / "attestation.json", _doc())
    assert swapped, "the race was not exercised"
    assert _mode(victim) == 0o600 and victim.read_text() == "sk-secret\n"


def test_fifo_at_the_path_never_blocks_the_writer(tmp_path: Path) -> None:
    """The writer runs inside SGLang's start-up; a FIFO planted at the attestation path (or at its
    directory) must not block it."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from pathlib import Path
        from validator.attestation import location, schema, writer
        from validator import trusted_files
        from validator.plugin.state import PluginState
        target, as_dir = Path(sys.argv[1]), sys.argv[2] == "dir"
        t0 = time.monotonic()
        try:
            writer.write_document(target, PluginState().document(env={}))
            print("written", round(time.monotonic() - t0, 3))
        except trusted_files.UnsafeLocation as exc:
            print("refused", round(time.monotonic() - t0, 3), exc)
        """
    )
    at_path = tmp_path / "a" / "attestation.json"
    at_path.parent.mkdir(mode=0o700)
    os.mkfifo(at_path)
    as_dir = tmp_path / "b"
    os.mkfifo(as_dir)
    for target, kind, expect in (
        (at_path, "path", "written"),
        (as_dir / "attestation.json", "dir", "refused"),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", script, str(target), kind], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith(expect), proc.stdout
        assert float(proc.stdout.split()[1]) < 5
    assert stat.S_ISREG(os.lstat(at_path).st_mode)  # the FIFO was replaced by the document, atomically


# ---- a second, real user (root drops privileges in a subprocess) ----

_ATTACKER = """
import os, sys, time
os.setgid({uid}); os.setuid({uid})
shared = sys.argv[1]
os.mkdir(shared)
os.chmod(shared, 0o777)
victim = sys.argv[2]
print("ready", flush=True)
deadline = time.monotonic() + float(sys.argv[3])
swaps = 0
while time.monotonic() < deadline:          # the symlink-swap race, bounded
    for entry in os.listdir(shared):
        if entry.endswith(".tmp"):
            try:
                os.unlink(os.path.join(shared, entry))
                os.symlink(victim, os.path.join(shared, entry))
                swaps += 1
            except OSError:
                pass
print("swaps", swaps, flush=True)
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh world-writable, sticky directory like /tmp, reachable by the second user."""
    base = Path(tempfile.mkdtemp(prefix="sv-shared-", dir="/tmp"))
    os.chmod(base, 0o1777)
    try:
        yield base
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False, timeout=60)


def test_directory_precreated_by_another_user_is_refused(shared_tmp: Path, tmp_path: Path) -> None:
    victim = tmp_path / "server-user-secret"
    victim.write_text("hf_token\n")
    os.chmod(victim, 0o600)
    if os.geteuid() != 0:
        # Without a second user to be: a directory owned by someone else (root's /) is refused the same way.
        with pytest.raises(trusted_files.UnsafeLocation, match="owned by UID 0"):
            trusted_files.open_private_dir(Path("/"))
        return
    shared = shared_tmp / "spark-validate"
    attacker = subprocess.Popen(
        [sys.executable, "-c", _ATTACKER.format(uid=ATTACKER_UID), str(shared), str(victim), "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert attacker.stdout is not None
        assert attacker.stdout.readline().strip() == "ready"
        assert os.stat(shared).st_uid == ATTACKER_UID
        refusals = 0
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:  # keep trying while the attacker races, as the plugin would
            with pytest.raises(trusted_files.UnsafeLocation) as info:
                writer.write_document(shared / "attestation.json", _doc())
            refusals += 1
        assert "directory /tmp on the way is writable by its group or others" in str(info.value)
        attacker.wait(timeout=30)
    finally:
        attacker.kill()
        attacker.wait(10)
    assert refusals > 0
    assert _mode(victim) == 0o600 and os.stat(victim).st_uid == 0
    assert list(shared.iterdir()) == []  # nothing of ours was ever created there


def test_plugin_writes_nothing_without_a_private_location(
    tmp_path: Path, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """No $SPARK_VALIDATE_ATTESTATION, no RuntimeDirectory, no usable /run, no XDG_RUNTIME_DIR: the plugin
    logs once and writes nothing; it never falls back to a shared directory."""
    from validator.plugin import hooks

    for var in (location.ENV_PATH, "RUNTIME_DIRECTORY", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(location, "RUN_DIR", Path("/proc/no-such-dir/spark-validate"))
    assert location.attestation_path(0) is None
    state = PluginState(spec_enabled=False)
    state.hooks["model_loaded"] = "ran"  # complete: the summary line is still logged, as evidence
    with caplog.at_level(logging.INFO, logger="spark_validate.plugin"):
        hooks.flush(state)
        hooks.flush(state)
    assert state.location_warned and state.logged and state.errors == []
    warnings = [r for r in caplog.records if "no private runtime directory" in r.getMessage()]
    summaries = [r for r in caplog.records if r.getMessage().startswith("spark-validate attestation:")]
    assert len(warnings) == 1 and len(summaries) == 1
    assert summaries[0].getMessage().endswith("-> not written")


def test_the_plugins_log_lines_stay_one_line_whatever_the_path_holds(
    tmp_path: Path, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin writes into the server's log, which the validator reads as SGLang's own. A path (or an
    error) holding newlines must not put a line of someone else's making there: the forged 'ready' and
    'Decode batch' lines below stay inside the plugin's one warning, escaped."""
    from validator.plugin import hooks
    from validator.sources.server.log_grammar import Decode, Ready, read_line

    stamp = "[2026-12-07 15:42:00]"
    forged = (
        f"\n{stamp} The server is fired up and ready to roll!\n{stamp} Decode batch. #running-req: 1, "
        "#token: 100, token usage: 0.00, accept len: 3.90, cuda graph: True, gen throughput (token/s): "
        "250.00, #queue-req: 0\n"
    )
    shared = tmp_path / "pub"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv(location.ENV_PATH, str(shared / f"x{forged}y" / "attestation.json"))
    state = PluginState(spec_enabled=False)
    state.hooks["model_loaded"] = "ran"  # complete: the summary line, naming nothing written, is logged too
    with caplog.at_level(logging.INFO, logger="spark_validate.plugin"):
        hooks.flush(state)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "refusing to write the attestation there" in said[0], said
    text = "\n".join(f"{stamp} {line}" for line in said)  # as SGLang's handler writes them
    assert len(text.split("\n")) == 2 and "\\x0a" in said[0]
    assert not any(isinstance(read_line(line), (Ready, Decode)) for line in text.split("\n"))
    assert not any(shared.iterdir())
