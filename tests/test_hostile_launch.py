"""``launch`` validates one program and must run that one.

Reproduced the way it was found: files named ``SGLANG_ENABLE_FP8_LM_HEAD=1`` and ``exec`` on ``PATH``, ahead
of the server's venv. ``launch -- SGLANG_ENABLE_FP8_LM_HEAD=1 python -m sglang.launch_server ...`` passed
preflight (which read the assignment as the environment) and then exec'd the file named after it;
``launch -- exec python ...`` ran whatever ``exec`` was on ``PATH``. Both must run the server preflight
approved, with the assignment in its environment, and never the planted files.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_preflight import REPO, _server


@pytest.mark.parametrize("prefix", [["SGLANG_ENABLE_FP8_LM_HEAD=1"], ["exec", "SGLANG_ENABLE_FP8_LM_HEAD=1"]])
def test_launch_runs_the_program_preflight_approved(tmp_path: Path, prefix: list[str]) -> None:
    server = _server(tmp_path, "launch")
    marker, evil = tmp_path / "ran", tmp_path / "evil-ran"
    server.plant_launch_server(marker)
    planted = tmp_path / "planted"
    planted.mkdir()
    for name in ("SGLANG_ENABLE_FP8_LM_HEAD=1", "exec"):
        f = planted / name
        f.write_text(f"#!/bin/sh\necho evil > {evil}\n")
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in server.env.items() if k != "SGLANG_ENABLE_FP8_LM_HEAD"}
    env["PATH"] = f"{planted}:{server.python.parent}:{env['PATH']}"
    env["PYTHONPATH"] = str(REPO)
    argv = ["python", *server.cmd().split()[1:]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "validator", "launch", "--report-to", "stderr", "--", *prefix, *argv],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, err = proc.communicate(timeout=90)
    assert not evil.exists(), "launch exec'd a planted file preflight never approved"
    if proc.returncode == 0:
        pid, fp8, _ = marker.read_text().split(" ", 2)
        assert int(pid) == proc.pid and fp8 == "1"  # exec'd the approved server, the assignment in its env
    else:  # refusing is the other defined outcome, never a third program
        assert proc.returncode in (2, 65) and not marker.exists(), err.decode()[-1500:]
    assert b"Traceback" not in err
    assert os.access(planted / "exec", os.X_OK)
