"""`spark-validate sglang-table` and the table preflight parses with, for builds other than stock 0.5.23.

The generator runs for real inside the SGLang 0.5.23 venv (.venv-sglang, scripts/setup_sglang_env.sh); a
"dev build" is an sglang package directory whose version and flag sources differ, given with
--sglang-root, and its generated table is the shipped one plus the flags that build adds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.prerequisite import missing, needs_root
from validator.sources.sglang.tables import build_key, store

REPO = Path(__file__).resolve().parents[1]
SGLANG_PYTHON = REPO / ".venv-sglang" / "bin" / "python"
SHIPPED = REPO / "validator" / "data" / "sglang-0.5.23-cli.json"
DEV = "0.0.0.dev1+g1a2b3c4"


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, **env}, timeout=timeout)


def dev_build(tmp_path: Path, version: str = DEV) -> Path:
    root = tmp_path / "site" / "sglang"
    (root / "srt" / "arg_groups").mkdir(parents=True)
    (root / "_version.py").write_text(f'__version__ = "{version}"\n')
    (root / "srt" / "server_args.py").write_text("# the Ling branch's server_args\n")
    (root / "srt" / "arg_groups" / "ling.py").write_text("LING_FLAGS = ['--enable-ling-magic']\n")
    return root


def dev_table(version: str = DEV) -> str:
    table: dict[str, Any] = json.loads(SHIPPED.read_text())
    table["sglang_version"] = version
    template = next(a for a in table["actions"] if a["dest"] == "enable_linear_replayssm")
    table["actions"].append(
        {**template, "dest": "enable_ling_magic", "option_strings": ["--enable-ling-magic"], "help": None}
    )
    table["n_actions"] = len(table["actions"])
    return json.dumps(table)


CMD = "python -m sglang.launch_server --model-path /models/ling --enable-ling-magic"


def warnings_of(proc: subprocess.CompletedProcess[str]) -> str:
    report = json.loads(proc.stdout)
    check = next(c for c in report["checks"] if c["id"] == "launch.warnings")
    return json.dumps(check)


def test_generates_and_caches_the_installed_builds_table(tmp_path: Path) -> None:
    if not SGLANG_PYTHON.exists():
        missing(f"{SGLANG_PYTHON} missing (bash scripts/setup_sglang_env.sh .venv-sglang)")
    env = {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}
    proc = cli(env, "sglang-table", "--python", str(SGLANG_PYTHON), timeout=300)
    assert proc.returncode == 0, proc.stderr
    cached = list((tmp_path / "cache" / "sglang-tables").glob("0.5.23-*.json"))
    assert len(cached) == 1 and str(cached[0]) in proc.stdout
    assert cached[0].read_bytes() == SHIPPED.read_bytes()  # the same build gives the shipped table


def test_interpreter_without_sglang_is_unavailable(tmp_path: Path) -> None:
    proc = cli({"SPARK_VALIDATE_CACHE_DIR": str(tmp_path)}, "sglang-table", "--python", sys.executable)
    assert proc.returncode == 69 and "sglang" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _planted_python(base: Path) -> tuple[Path, Path]:
    """A "python" that, were it ever run, would leave ``ran`` behind: what a planted interpreter does."""
    ran = base / "ran"
    python = base / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ntouch {ran}\n")
    python.chmod(0o755)
    return python, ran


def test_interpreter_in_a_directory_others_can_write_is_never_run(tmp_path: Path) -> None:
    """An interpreter under a non-sticky 0777 directory could be anyone's: refused, naming the directory."""
    shared = tmp_path / "shared"
    python, ran = _planted_python(shared)
    shared.chmod(0o777)
    proc = cli({"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}, "sglang-table", "--python", str(python))
    assert proc.returncode == 69, proc.stderr
    assert f"{shared} is writable by others (mode 0777" in proc.stderr, proc.stderr
    assert not ran.exists()


def test_interpreter_whose_files_several_users_own_is_never_run(tmp_path: Path) -> None:
    """Its directory one user's, the program another's: neither may be trusted to run it as the other."""
    needs_root("giving files to other users (chown)")
    python, ran = _planted_python(tmp_path / "venv")
    os.chown(python.parent, 54321, 54321)
    os.chown(python, 54322, 54322)
    proc = cli({"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}, "sglang-table", "--python", str(python))
    assert proc.returncode == 69, proc.stderr
    assert "belong to several other users" in proc.stderr, proc.stderr
    assert "(UID 54321)" in proc.stderr and "(UID 54322)" in proc.stderr
    assert not ran.exists()


def test_dev_build_without_table_reports_unknown_flags(tmp_path: Path) -> None:
    root = dev_build(tmp_path)
    env = {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}
    proc = cli(env, "preflight", "--format", "json", "--sglang-root", str(root), "--launch-cmd", CMD)
    assert proc.returncode != 65, proc.stderr
    shown = warnings_of(proc)
    assert "shipped SGLang 0.5.23 table" in shown and DEV in shown and "sglang-table --python" in shown
    assert "not checked: --enable-ling-magic" in shown


def test_dev_build_with_generated_table(tmp_path: Path) -> None:
    root = dev_build(tmp_path)
    env = {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}
    path = store(dev_table(), root, DEV, env)
    assert path.name == f"{build_key(root, DEV)}.json"
    proc = cli(env, "preflight", "--format", "json", "--sglang-root", str(root), "--launch-cmd", CMD)
    assert proc.returncode != 65, proc.stderr
    shown = warnings_of(proc)
    assert f"table generated from SGLang {DEV}" in shown and "not checked" not in shown
    typo = cli(env, "preflight", "--sglang-root", str(root), "--launch-cmd", CMD + "x")
    assert typo.returncode == 65 and "unrecognized arguments: --enable-ling-magicx" in typo.stderr
    # A rebuilt image with the same version string but other flag sources does not reuse the table.
    (root / "srt" / "arg_groups" / "ling.py").write_text("LING_FLAGS = []\n")
    proc = cli(env, "preflight", "--format", "json", "--sglang-root", str(root), "--launch-cmd", CMD)
    assert "not checked: --enable-ling-magic" in warnings_of(proc)


@pytest.mark.parametrize("cmd_extra", ["--enable-ling-magic", "--mem-fraction-statik 0.6"])
def test_stock_build_still_refuses_unknown_flags(
    tmp_path: Path, stock_sglang_root: Path, cmd_extra: str
) -> None:
    env = {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}
    cmd = f"python -m sglang.launch_server --model-path /models/ling {cmd_extra}"
    proc = cli(env, "preflight", "--sglang-root", str(stock_sglang_root), "--launch-cmd", cmd)
    assert proc.returncode == 65 and "unrecognized arguments" in proc.stderr


def _count_opens(paths: list[Path], run: Any) -> tuple[Any, list[int]]:
    """What ``run()`` returns, and how many times each of ``paths`` was opened meanwhile (by any process),
    as the kernel's inotify reports it."""
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0, ctypes.get_errno()
    try:
        watches = [libc.inotify_add_watch(fd, os.fsencode(p), 0x20) for p in paths]  # IN_OPEN
        assert min(watches) >= 0, ctypes.get_errno()
        result = run()
        data = b""
        while True:
            try:
                data += os.read(fd, 65536)
            except BlockingIOError:
                break
    finally:
        os.close(fd)
    counts = [0] * len(paths)
    at = 0
    while at < len(data):
        wd, mask, _, size = struct.unpack_from("iIII", data, at)
        if mask & 0x20:
            counts[watches.index(wd)] += 1
        at += 16 + size
    return result, counts


def test_script_and_env_file_read_once_across_tables(tmp_path: Path) -> None:
    """Preflight parses a launcher script's command with two tables (the shipped one refuses a flag the
    build adds; then the build's generated table): the script and its --env-file are each opened once."""
    root = dev_build(tmp_path)
    env = {"SPARK_VALIDATE_CACHE_DIR": str(tmp_path / "cache")}
    store(dev_table(), root, DEV, env)
    script = tmp_path / "start.sh"
    script.write_text(f"#!/bin/bash\nexec {CMD}\n")
    env_file = tmp_path / "server.env"
    env_file.write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\n")
    args = ["preflight", "--format", "json", "--sglang-root", str(root), "--script", str(script)]
    proc, opens = _count_opens([script, env_file], lambda: cli(env, *args, "--env-file", str(env_file)))
    assert proc.returncode != 65, proc.stderr
    assert f"table generated from SGLang {DEV}" in warnings_of(proc)
    assert opens == [1, 1]


def test_the_build_key_hashes_a_source_name_that_is_not_utf8_instead_of_raising(tmp_path: Path) -> None:
    """The key hashed each flag source's relative name with ``str.encode()``: a file the reported install
    holds under ``srt/arg_groups`` with a name that is not UTF-8 (``bad\\xff.py``, any user may make one)
    raised ``UnicodeEncodeError`` and ended root's preflight in ``internal error`` (exit 1) whenever a table
    was cached (red team 18, as sv-attacker2). The name is hashed as the kernel's bytes; a UTF-8 name's key
    is as before."""
    import hashlib

    root = tmp_path / "sglang"
    (root / "srt" / "arg_groups").mkdir(parents=True)
    (root / "srt" / "server_args.py").write_text("x = 1\n")
    (root / "srt" / "arg_groups" / "ok.py").write_text("y = 2\n")
    h = hashlib.sha256()
    for rel, data in (("srt/server_args.py", b"x = 1\n"), ("srt/arg_groups/ok.py", b"y = 2\n")):
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    assert build_key(root, "0.5.5") == f"0.5.5-{h.hexdigest()[:16]}"
    (root / "srt" / "arg_groups" / os.fsdecode(b"bad\xff.py")).write_text("z = 3\n")
    assert build_key(root, "0.5.5") != f"0.5.5-{h.hexdigest()[:16]}"
