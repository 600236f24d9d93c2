"""Every path a command reads, unreadable to the user who runs it, is an answer naming the path, never
an internal error (issue 30 item 3).

The server's user keeps its interpreter, model, unit, script, pack, log, key and attestation in a
directory of mode 0700; a third, unprivileged user runs each command against those paths, through the
real command line (``tests.support.cli_as``). The server itself runs (``PRIV/bin/python3 -m
sglang.launch_server``, holding its port) so that the running-process commands find it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_as import ensure_reader, run_cli_as
from tests.support.fake_server import process_as, server_argv, sglang_tree
from tests.support.loopback import free_port
from tests.support.second_user import User, ensure_user


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[Path, int, int, User]]:
    """(PRIV, server PID, its port, the server's user): PRIV is the server user's, mode 0700."""
    owner = ensure_user()
    priv = Path(tempfile.mkdtemp(prefix="sv-priv-"))
    try:
        (priv / "bin").mkdir()
        (priv / "bin" / "python3").symlink_to("/usr/bin/python3")
        (priv / "model").mkdir()
        (priv / "model" / "config.json").write_text('{"architectures": ["BailingMoeV3ForCausalLM"]}')
        (priv / "pack.yaml").write_text("extends: ling-3.0-flash-dgx-spark\n")
        (priv / "log.txt").write_text("")
        (priv / "key").write_text("secret\n")
        (priv / "attestation.json").write_text("{}")
        cmd = f"{priv}/bin/python3 -m sglang.launch_server --model-path {priv}/model"
        (priv / "launch.sh").write_text(f"#!/bin/sh\nexec {cmd}\n")
        (priv / "sglang.service").write_text(f"[Service]\nExecStart={cmd}\n")
        for path in [priv, *priv.rglob("*")]:
            os.lchown(path, owner.uid, owner.gid)
        priv.chmod(0o700)
        port = free_port()
        argv = [str(priv / "bin" / "python3"), *server_argv(port)[1:]]
        prefix = str(priv / "bin" / "python3").encode() + b"\0-m\0sglang"
        with sglang_tree() as top, process_as(owner, argv, cwd=top, listen=port, prefix=prefix) as proc:
            yield priv, proc.pid, port, owner
    finally:
        shutil.rmtree(priv, ignore_errors=True)


def commands(priv: Path, pid: int, port: int, owner: User) -> dict[str, list[str]]:
    cmd = f"{priv}/bin/python3 -m sglang.launch_server --model-path {priv}/model"
    url = f"http://127.0.0.1:{port}"
    return {
        "check-process": ["check", "--no-probe", "--server-user", owner.name, "--pid", str(pid)],
        "preflight-cmd": ["preflight", "--launch-cmd", cmd],
        "preflight-unit": ["preflight", "--unit", str(priv / "sglang.service")],
        "preflight-script": ["preflight", "--script", str(priv / "launch.sh")],
        "preflight-model": ["preflight", "--launch-cmd", cmd, "--model-dir", str(priv / "model")],
        "rules-lint": ["rules", "lint", str(priv / "pack.yaml")],
        "check-url-files": [
            "check",
            "--url",
            url,
            "--no-probe",
            "--log",
            str(priv / "log.txt"),
            "--attestation",
            str(priv / "attestation.json"),
        ],
        "check-key": ["check", "--url", url, "--no-probe", "--api-key-file", str(priv / "key")],
        "sglang-table": ["sglang-table", "--python", str(priv / "bin" / "python3"), "--timeout", "30"],
        "launch": ["launch", "--", *cmd.split()],
        "output": [
            "preflight",
            "--launch-cmd",
            "python3 -m sglang.launch_server",
            "--output",
            str(priv / "r.json"),
        ],
        "rules-path": [
            "preflight",
            "--launch-cmd",
            "python3 -m sglang.launch_server",
            "--rules",
            str(priv / "pack.yaml"),
        ],
        "env-file": [
            "preflight",
            "--launch-cmd",
            "python3 -m sglang.launch_server",
            "--env-file",
            str(priv / "key"),
        ],
    }


@pytest.mark.parametrize(
    "name",
    [
        "check-process", "preflight-cmd", "preflight-unit", "preflight-script", "preflight-model",
        "rules-lint", "check-url-files", "check-key", "sglang-table", "launch", "output", "rules-path",
        "env-file",
    ],
)  # fmt: skip
def test_an_unreadable_path_is_an_answer_naming_it(private: tuple[Path, int, int, User], name: str) -> None:
    priv, pid, port, owner = private
    args = commands(priv, pid, port, owner)[name]
    result = run_cli_as(ensure_reader(), *args)
    said = result.stdout + result.stderr
    assert result.returncode != 1, said[-3000:]
    assert "internal error" not in said and "Traceback" not in said, said[-3000:]
    assert str(priv) in said, said[-3000:]


def test_npd_of_a_server_whose_program_it_cannot_see_fails_only_on_what_it_proved(
    private: tuple[Path, int, int, User],
) -> None:
    """NPD's one line has no room for the path: the program this reader cannot look at is not a failure of
    the node (launch.program is unknown, not FAIL); what the argv proves wrong still is (it names no
    humming backend)."""
    _, pid, _, owner = private
    result = run_cli_as(
        ensure_reader(), "npd", "--server-user", owner.name, "--pid", str(pid), "--timeout", "60"
    )
    assert result.returncode == 1 and result.stdout.startswith("FAIL "), result.stdout + result.stderr
    assert f"moe.backend@{pid}" in result.stdout and "launch.program" not in result.stdout
    assert "internal error" not in result.stdout + result.stderr
