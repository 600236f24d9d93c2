"""``--sglang-root`` naming a tree the launch command's interpreter does not import.

The operator points ``--sglang-root`` at a patched checkout while the server's interpreter imports stock
SGLang 0.5.23 (the trap build): the patched tree must not vouch for the server. The interpreter, asked,
says which SGLang runs; a named tree that disagrees makes ``launch.program`` fail and leaves the checks
that read an install (``lm_head.fp8``'s support, ``spec.lm_head_shared``) unproven, so that even
``--allow-partial`` cannot turn the trap into a pass. The same tree, when it is what the interpreter
imports, is read as before."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.in_process import preflight_json_in_process
from tests.support.launch_recipe import RECIPE_SERVER_ARGS
from tests.support.sglang_builds import fake_interpreter, make_build


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("trees")
    stock_site, patched_site = base / "stock-site", base / "patched-site"
    make_build(stock_site, fp8_lm_head=False, share_hook=False)
    patched = make_build(patched_site)
    model = base / "model"
    write_checkpoint(model, small=False)
    return {
        "stock_python": fake_interpreter(base / "stock-venv" / "bin", stock_site),
        "patched_python": fake_interpreter(base / "patched-venv" / "bin", patched_site),
        "patched": patched,
        "model": model,
    }


def _preflight(python: Path, trees: dict[str, Path], *extra: str) -> tuple[int, dict[str, Any]]:
    args = RECIPE_SERVER_ARGS.replace("/models/Ling-3.0-flash-fp4", str(trees["model"]))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(trees["model"].parent),
           "SGLANG_ENABLE_FP8_LM_HEAD": "1"}  # fmt: skip
    rc, report, err = preflight_json_in_process(
        env,
        "--launch-cmd",
        f"{python} -m sglang.launch_server {args}",
        "--sglang-root",
        str(trees["patched"]),
        *extra,
    )
    assert report, err
    return rc, {c["id"]: c for c in report["checks"]}


def test_a_named_tree_the_interpreter_does_not_import_is_not_evidence(trees: dict[str, Path]) -> None:
    rc, checks = _preflight(trees["stock_python"], trees, "--allow-partial")
    program = checks["launch.program"]
    assert program["status"] == "fail", program
    assert str(trees["patched"]) in program["message"] and "not from the inspected" in program["message"]
    for check in ("lm_head.fp8", "spec.lm_head_shared"):
        assert checks[check]["status"] == "error", checks[check]  # not proven from the other tree
        assert "is not the SGLang the launch command imports" in checks[check]["message"]
    assert rc == 78  # a disagreement between sources is a finding; --allow-partial does not accept it


def test_the_same_tree_when_the_interpreter_imports_it_is_read(trees: dict[str, Path]) -> None:
    _, checks = _preflight(trees["patched_python"], trees)
    assert checks["launch.program"]["status"] == "pass", checks["launch.program"]
    assert checks["spec.lm_head_shared"]["status"] == "pass", checks["spec.lm_head_shared"]
