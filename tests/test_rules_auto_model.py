"""``--rules auto`` never judges a model that is not Ling as Ling, and unknown stays unknown (69).

The case (issue 29, item 7): 1iis/m01's Compose file runs ``sglang serve --model-path Qwen/Qwen3.5-4B``, a
dense Qwen model downloaded from the Hub at start. Its repository publishes no licence, so
``tests/corpus/compose/`` holds a stand-in written with the same services, profiles and commands. Nothing
here holds its ``config.json``; the repo id is what names it. Judged by the Ling pack it got Ling-specific
failures and ``PASS model.tool_call_parser``. Each test below goes through the real CLI, with its control
beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import REPO
from tests.support.document_server import document_server, sim_documents
from tests.support.in_process import check_in_process, preflight_json_in_process
from tests.support.launch_recipe import RECIPE_CMD, RECIPE_ENV
from tests.support.private_dir import trusted_copy

M01 = REPO / "tests" / "corpus" / "compose" / "1iis-m01-docker-compose.yml"
ENV = {"PATH": "/usr/bin:/bin"}


def _auto(report: dict[str, Any]) -> dict[str, Any]:
    (auto,) = [c for c in report["checks"] if c["id"] == "rules.auto"]
    return auto


def _nothing_judged(rc: int, report: dict[str, Any], err: str) -> dict[str, Any]:
    assert rc == 69 and report, (rc, err)
    assert report["rule_pack"] == "none" and [c["id"] for c in report["checks"]] == ["rules.auto"], report
    auto = _auto(report)
    assert auto["status"] == "error" and auto["severity"] == "critical", auto
    return auto


def test_the_qwen_compose_file_is_judged_by_no_pack(tmp_path: Path) -> None:
    # a copy in a private directory: the reader refuses a Compose project others could plant a .env in,
    # and the checkout may be under /tmp
    m01 = trusted_copy(M01, tmp_path / "project")
    for extra in ((), ("--allow-partial",)):
        rc, report, err = preflight_json_in_process(
            {**ENV, "HOME": str(tmp_path)}, "--compose", str(m01), "--rules", "auto", *extra
        )
        auto = _nothing_judged(rc, report, err)
        assert "Qwen/Qwen3.5-4B" in auto["message"] and "no shipped pack is written for" in auto["message"]
        assert "inclusionAI/Ling-3.0-flash-fp4" in auto["message"]  # what the packs are for, said
        assert not any(c["id"] == "model.tool_call_parser" for c in report["checks"])


def test_control_the_same_compose_file_naming_lings_repo_is_judged_by_a_ling_pack(tmp_path: Path) -> None:
    """The same file with the model Ling is published as: judged (by the pack its flags come closest to)."""
    ling = tmp_path / "project" / "docker-compose.yml"
    ling.parent.mkdir()
    ling.write_text(M01.read_text().replace("Qwen/Qwen3.5-4B", "inclusionAI/Ling-3.0-flash-fp4"))
    rc, report, err = preflight_json_in_process(
        {**ENV, "HOME": str(tmp_path)}, "--compose", str(ling), "--rules", "auto"
    )
    assert report and report["rule_pack"] != "none", (rc, err)
    assert "inclusionAI/Ling-3.0-flash-fp4" in _auto(report)["message"]
    assert rc == 78  # a Ling deployment without the recipe's flags fails the pack


def test_a_cached_qwen_config_names_the_model_by_its_architecture(tmp_path: Path) -> None:
    """Where the server's Hugging Face cache holds the repo, its config.json decides (and says what it is)."""
    snap = tmp_path / "hub" / "models--Qwen--Qwen3.5-4B" / "snapshots" / ("c" * 40)
    snap.mkdir(parents=True)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("c" * 40)
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5"}
    (snap / "config.json").write_text(json.dumps(config))
    env = {**ENV, "HOME": str(tmp_path), "HF_HUB_CACHE": str(tmp_path / "hub")}
    cmd = "python3 -m sglang.launch_server --model-path Qwen/Qwen3.5-4B --port 8000"
    rc, report, err = preflight_json_in_process(env, "--launch-cmd", cmd, "--rules", "auto")
    auto = _nothing_judged(rc, report, err)
    assert "Qwen3_5ForConditionalGeneration" in auto["message"], auto


def test_a_model_nothing_names_is_unknown_not_ling(tmp_path: Path) -> None:
    """The recipe's command with its --model-path not here and no --model-dir: the directory's name is no
    evidence of what it holds, so no pack is chosen (69), and the remedy names what would decide it."""
    env = {**ENV, **RECIPE_ENV}
    rc, report, err = preflight_json_in_process(env, "--launch-cmd", RECIPE_CMD, "--rules", "auto")
    auto = _nothing_judged(rc, report, err)
    assert "could not be read" in auto["message"] and "--model-dir" in str(auto["remedy"])
    assert report["coverage"]["missing"][0]["input"].startswith("--model-dir"), report["coverage"]
    # control: the same command with the checkpoint given is judged by the recipe's pack
    model = tmp_path / "Ling-3.0-flash-fp4"
    write_checkpoint(model, small=False)
    rc, report, err = preflight_json_in_process(
        env, "--launch-cmd", RECIPE_CMD, "--rules", "auto", "--model-dir", str(model)
    )
    assert report["rule_pack"] == "ling-3.0-flash-dgx-spark", (rc, err)
    assert _auto(report)["status"] == "pass"


def test_a_live_server_named_only_by_its_repo_id() -> None:
    """A build whose /model_info says no architecture: /server_info's model_path (a Qwen repo id) still
    says it is not Ling's; control: the same server serving Ling's repo is judged by the NEXTN pack."""
    info, _ = sim_documents("healthy")
    for repo, pack in (
        ("Qwen/Qwen3.5-4B", "none"),
        ("inclusionAI/Ling-3.0-flash-fp4", "ling-3.0-flash-dgx-spark"),
    ):
        served = {**info, "model_path": repo, "speculative_draft_model_path": repo}
        with document_server(served, {}) as url:  # the real check front door in this process
            run = check_in_process(url, "--rules", "auto", "--no-probe", "--wait", "5")
        assert run.report is not None and run.report["rule_pack"] == pack, run.explain()
        auto = run.check("rules.auto")
        assert repo in auto["message"], auto
        if pack == "none":
            run.inconclusive()
            assert auto["status"] == "error" and auto["severity"] == "critical"
