"""A DSpark draft is any class the installed build registers as one, judged by its shape (issue 29, 11).

SGLang 0.5.23's ``models/dspark.py`` registers ``EntryClass = [Qwen3DSparkModel, LingDSparkModel,
DSparkDraftModel]``: one implementation, whose tag names only the target family, and SpecForge-trained
drafts carry ``DSparkDraftModel``. A Ling-shaped draft (vocabulary 157184, hidden 2560, markov_rank,
mask_token_id, block size 8) under any of those tags is the recipe's draft; one of another shape is not.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.sglang_wheel import sglang_root
from tests.test_recipe_packs import DRAFT_CONFIG, DSPARK, Server, check, preflight, server

__all__ = ["server"]  # the recipe venv of test_recipe_packs: a DSpark build, a checkpoint, a GB10 host

LING_SHAPE = {"vocab_size": 157184, "hidden_size": 2560}
QWEN_SHAPE = {"vocab_size": 151936, "hidden_size": 4096}


def _draft(base: Path, name: str, arch: str, shape: dict[str, int]) -> Path:
    draft = base / name
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({**DRAFT_CONFIG, "architectures": [arch], **shape}))
    return draft


def _run(server: Server, draft: Path) -> tuple[int, dict[str, Any], str]:
    s = replace(server, draft=draft)
    return preflight(s.recipe_env(DSPARK), DSPARK, "--launch-cmd", s.cmd(DSPARK))


def test_the_real_build_registers_three_dspark_classes() -> None:
    text = (sglang_root() / "srt" / "models" / "dspark.py").read_text()
    assert "EntryClass = [Qwen3DSparkModel, LingDSparkModel, DSparkDraftModel]" in text


@pytest.mark.parametrize("arch", ["DSparkDraftModel", "Qwen3DSparkModel", "LingDSparkModel"])
def test_every_registered_class_with_the_ling_shape_is_the_recipes_draft(
    server: Server, tmp_path: Path, arch: str
) -> None:
    rc, report, err = _run(server, _draft(tmp_path, "ling-shaped", arch, LING_SHAPE))
    config, dspark = check(report, "spec.config"), check(report, "spec.dspark")
    assert config["status"] == "pass", (config, err)
    assert dspark["status"] == "pass", dspark  # judged, not skipped as "not a DSpark checkpoint"
    assert rc == 0, [c for c in report["checks"] if c["status"] not in ("pass", "skip")]


def test_a_registered_class_of_another_shape_fails_naming_the_size(server: Server, tmp_path: Path) -> None:
    rc, report, err = _run(server, _draft(tmp_path, "qwen-shaped", "DSparkDraftModel", QWEN_SHAPE))
    config = check(report, "spec.config")
    assert rc == 78 and config["status"] == "fail", (config, err)
    assert "vocab_size is 151936" in config["message"] and "157184" in config["message"]


def test_a_class_the_build_does_not_register_still_fails(server: Server, tmp_path: Path) -> None:
    rc, report, err = _run(server, _draft(tmp_path, "eagle", "LlamaForCausalLMEagle3", LING_SHAPE))
    config = check(report, "spec.config")
    assert rc == 78 and config["status"] == "fail" and "not a DSpark draft" in config["message"], err
