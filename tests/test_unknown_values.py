"""Unknown is a type: a value known only at run time reaches a check as unresolved, and the engine makes
the check that reads it ``error`` from the value itself, never from the words of a message.

The guarantee is tested by rewording: the real CLI runs with every builtin check's message and evidence
(and every declarative rule's) replaced by random text, and every check's status, the verdict and the
exit code stay what they were. A verdict that depended on a search of the message would move.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import REPO, json_report
from tests.test_deploy_script import POSITIONAL, RECIPE, Host, _write, host

__all__ = ["host"]  # the launcher host of test_deploy_script: a venv, a build, a checkpoint

# The CLI with every message reworded: runs ``python -m validator`` after wrapping each check's forms.
REWORDED = """
import random, runpy, string, sys
from dataclasses import replace
import validator.engine as engine
from validator.checks.base import REGISTRY
import validator.checks.registry  # every family registered

rng = random.Random(int(sys.argv.pop(1)))
def noise():
    return "".join(rng.choice(string.ascii_letters + " _-=:/.") for _ in range(40))
def reword(outcome):
    return replace(outcome, message=noise(), evidence={noise(): noise()}, message_from=None)
def wrap(fn):
    return lambda facts, ctx: reword(fn(facts, ctx))
for b in REGISTRY.values():
    for mode, fn in list(b.forms.items()):
        b.forms[mode] = wrap(fn)
expect = engine.evaluate_expect
engine.evaluate_expect = lambda *a: reword(expect(*a))
sys.argv[0] = "validator"
runpy.run_module("validator", run_name="__main__", alter_sys=True)
"""


def _preflight(env: dict[str, str], script: Path, seed: int | None) -> tuple[int, dict[str, Any], str]:
    args = ["preflight", "--format", "json", "--script", str(script)]
    reworded = [sys.executable, "-c", REWORDED, str(seed)]
    head = [sys.executable, "-m", "validator"] if seed is None else reworded
    proc = subprocess.run(
        [*head, *args],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        cwd="/",
        timeout=120,
    )
    return proc.returncode, json_report(proc.stdout), proc.stderr


# Launchers whose values are partly known only at run time, and a control with none.
SCRIPTS = {
    "backend-from-a-file": POSITIONAL.replace('"$1"', '"$(cat /etc/sglang-backend)"'),
    "fp8-switch-from-a-file": POSITIONAL.replace('"$1"', "humming").replace(
        "SGLANG_ENABLE_FP8_LM_HEAD=1", 'SGLANG_ENABLE_FP8_LM_HEAD="$(cat /etc/fp8)"'
    ),
    "missing-sourced-file": (
        f"#!/bin/bash\nsource ./missing/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec python3 -m sglang.launch_server --model-path ~/models/Ling-3.0-flash-fp4 {RECIPE} "
        "--speculative-draft-model-path ~/models/Ling-3.0-flash-fp4\n"
    ),
    "control": POSITIONAL.replace('"$1"', "humming"),
}


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_no_verdict_depends_on_a_message(host: Host, case: str) -> None:
    script = _write(host, f"reworded-{case}.sh", SCRIPTS[case])
    rc, report, err = _preflight(host.env, script, None)
    assert report, err
    statuses = _statuses(report)
    if case == "control":
        assert rc == 0 and report["verdict"] == "pass", (statuses, err)
    else:  # something the launch reads is unknown: never a pass
        assert rc == 69 and "error" in statuses.values(), (statuses, err)
    for seed in (1, 2):
        rc2, reworded, err2 = _preflight(host.env, script, seed)
        assert reworded, err2
        assert (rc2, reworded["verdict"], _statuses(reworded)) == (rc, report["verdict"], statuses)
        # the rewording really happened: no check's message is the one it gave before
        before = {c["id"]: c["message"] for c in report["checks"] if c["status"] not in ("error", "skip")}
        after = {c["id"]: c["message"] for c in reworded["checks"] if c["id"] in before}
        same = {i: (statuses[i], before[i]) for i in before if after[i] == before[i]}
        assert before and not same, same


def test_an_unresolved_read_names_what_was_read_and_where(host: Host) -> None:
    """The FP8 switch computed from a file: lm_head.fp8 reads it and is error with the reason and the
    script's line; a check that never reads it (moe.backend) still passes."""
    script = _write(host, "fp8-from-file.sh", SCRIPTS["fp8-switch-from-a-file"])
    rc, report, err = _preflight(host.env, script, None)
    checks = {c["id"]: c for c in report["checks"]}
    fp8 = checks["lm_head.fp8"]
    assert fp8["status"] == "error", fp8
    assert fp8["evidence"]["unresolved"].keys() == {"SGLANG_ENABLE_FP8_LM_HEAD"}
    assert str(script) in fp8["evidence"]["where"]
    assert checks["moe.backend"]["status"] == "pass" and rc == 69, err
