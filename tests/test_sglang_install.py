from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.sglang_builds import fake_interpreter, make_build
from validator.facts import SGLangInstallFacts
from validator.sources.sglang.install import install_from_probe, read_sglang_install
from validator.sources.sglang.interpreter import probe_interpreter


def locate_sglang(interpreter: str, **how: Any) -> SGLangInstallFacts:
    """Preflight's two steps: ask the interpreter (the server's flags, cwd, a timeout), read what it names."""
    return install_from_probe(probe_interpreter(interpreter, **how))


NEXTN = "BailingMoeForCausalLMNextN"
FP8 = "SGLANG_ENABLE_FP8_LM_HEAD"


def test_stock_wheel(stock_sglang_root: Path) -> None:
    f = read_sglang_install(stock_sglang_root, "--sglang-root")
    assert f.root == stock_sglang_root and f.located_by == "--sglang-root"
    assert f.version == "0.5.23"
    assert f.declares(FP8) is False  # stock ignores SGLANG_ENABLE_FP8_LM_HEAD silently
    assert f.draft_share_hook[NEXTN] is False  # only set_embed_and_head: tensor sharing
    assert f.moe_runner_backends is not None
    assert {"auto", "humming", "flashinfer_mxfp4"} <= set(f.moe_runner_backends)
    assert f.moe_runner_backends[0] == "auto" and len(f.moe_runner_backends) == 22
    # declared fields, deprecated_name aliases and the deprecation registry; never a non-SGLANG_ name
    assert {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "SGLANG_HUMMING_MOE_GEMM_TYPE"} <= f.declared_env
    assert "SGLANG_USE_TRITON_ROUTER_SUM" in f.declared_env and "SGLANG_ENABLE_CP_V2" in f.declared_env
    assert "SGLANG_ENABLE_FP8_LM_HEAD" not in f.declared_env
    assert all(n.startswith("SGLANG_") for n in f.declared_env) and "IS_H200" not in f.declared_env
    assert f.note is None


def test_patched_build(tmp_path: Path) -> None:
    root = make_build(tmp_path / "site")
    f = read_sglang_install(root, "--sglang-root")
    assert f.declares(FP8) is True and "SGLANG_ENABLE_FP8_LM_HEAD" in f.declared_env
    assert f.draft_share_hook[NEXTN] is True and f.version == "0.5.23" and f.note is None


def test_each_patch_half_alone(tmp_path: Path) -> None:
    f = read_sglang_install(make_build(tmp_path / "a", share_hook=False), "x")
    assert (f.declares(FP8), f.draft_share_hook[NEXTN]) == (True, False)
    f = read_sglang_install(make_build(tmp_path / "b", fp8_lm_head=False), "x")
    assert (f.declares(FP8), f.draft_share_hook[NEXTN]) == (False, True)


def test_every_draft_class_of_the_stock_wheel_is_reported(stock_sglang_root: Path) -> None:
    """0.5.23's own MTP drafts for Qwen3.5 and Nemotron-H define the hook; Ling's NEXTN class does not.
    The files say so first; then the reader reports each draft class, and no class of a target model."""
    models = stock_sglang_root / "srt/models"
    for name in ("qwen3_5_mtp.py", "nemotron_h_mtp.py"):
        assert "def set_lm_head_from_target(self" in (models / name).read_text()
    assert "set_lm_head_from_target" not in (models / "bailing_moe_nextn.py").read_text()
    hooks = read_sglang_install(stock_sglang_root, "--sglang-root").draft_share_hook
    sharing = {c for c, shares in hooks.items() if shares}
    assert sharing == {"Qwen3_5ForCausalLMMTP", "NemotronHForCausalLMMTP"}
    assert hooks[NEXTN] is False and hooks["DeepseekV3ForCausalLMNextN"] is False
    assert "LlamaForCausalLMEagle3" in hooks  # the EAGLE heads are draft classes too
    assert "BailingMoeV3ForCausalLM" not in hooks and "LingDSparkModel" not in hooks


def test_a_draft_file_that_holds_the_hook_but_does_not_parse_is_unknown(tmp_path: Path) -> None:
    root = make_build(tmp_path / "s")
    p = root / "srt/models/bailing_moe_nextn.py"
    p.write_text(p.read_text() + "\ndef broken(:\n")
    f = read_sglang_install(root, "x")
    assert f.draft_share_hook[NEXTN] is None
    assert f.note is not None and "srt/models/bailing_moe_nextn.py: does not parse" in f.note


def test_hook_in_another_class_does_not_count(tmp_path: Path) -> None:
    root = make_build(tmp_path / "s", share_hook=False)
    p = root / "srt/models/bailing_moe_nextn.py"
    p.write_text(
        p.read_text() + "\n\nclass Other:\n    def set_lm_head_from_target(self, h):\n        pass\n"
    )
    assert read_sglang_install(root, "x").draft_share_hook[NEXTN] is False


def test_unparsable_and_missing_files_give_none_and_note(tmp_path: Path) -> None:
    root = make_build(tmp_path / "s")
    (root / "srt/environ.py").write_text("class Envs:\n    X = EnvBool(\n")
    (root / "srt/arg_groups/choices.py").unlink()
    f = read_sglang_install(root, "x")
    assert f.declares(FP8) is None and f.declared_env == set()
    assert f.moe_runner_backends is None
    assert f.draft_share_hook[NEXTN] is True  # the other files still count
    assert f.note is not None and "srt/environ.py: does not parse" in f.note
    assert "MOE_RUNNER_BACKEND_CHOICES not found" in f.note


def test_not_an_sglang_dir(tmp_path: Path) -> None:
    f = read_sglang_install(tmp_path, "--sglang-root")
    assert f.version is None and f.note is not None and "no srt/" in f.note


def test_plugins_from_entry_points(tmp_path: Path) -> None:
    root = make_build(tmp_path / "site", plugins={"spark_validate": "spark_validate_plugin.plugin:register"})
    assert read_sglang_install(root, "x").plugins == {"spark_validate"}
    other = tmp_path / "other-site"
    make_build(other, plugins={"elsewhere": "p:q"})
    f = read_sglang_install(root, "x", site_dirs=[other])
    assert f.plugins == {"spark_validate", "elsewhere"}


def test_locate_through_interpreter_finds_patched_build_without_importing(tmp_path: Path) -> None:
    site = tmp_path / "venv-site"
    root = make_build(site, plugins={"spark_validate": "spark_validate_plugin.plugin:register"})
    py = fake_interpreter(tmp_path / "bin", site)
    probe = probe_interpreter(str(py))
    assert probe.error is None and probe.sglang_root == root
    assert probe.imported == []  # find_spec ran no package code: neither sglang nor torch imported
    f = locate_sglang(str(py))
    assert f.root == root and f.located_by == f"interpreter {py}"
    assert f.declares(FP8) is True and f.draft_share_hook[NEXTN] is True
    assert "spark_validate" in f.plugins


def test_locate_interpreter_without_sglang(tmp_path: Path) -> None:
    py = fake_interpreter(tmp_path / "bin", None)
    f = locate_sglang(str(py))
    assert f.root is None and f.note is not None and "not importable" in f.note


def test_locate_interpreter_missing_or_failing(tmp_path: Path) -> None:
    f = locate_sglang(str(tmp_path / "no-python"))
    assert f.root is None and f.note is not None and "cannot run" in f.note
    bad = tmp_path / "bad"
    bad.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    bad.chmod(0o755)
    f = locate_sglang(str(bad))
    assert f.root is None and f.note is not None and "exited 3: boom" in f.note


def test_locate_times_out_and_kills_the_wrapper_children(tmp_path: Path) -> None:
    site = tmp_path / "site"
    make_build(site)
    py = fake_interpreter(tmp_path / "bin", site, delay_s=30)
    t0 = time.monotonic()
    f = locate_sglang(str(py), timeout=0.5)
    assert time.monotonic() - t0 < 5  # the sleeping child holding the pipe was killed too
    assert f.root is None and f.note is not None and "did not answer within 0.5 s" in f.note


def test_probe_asks_in_the_servers_directory_never_this_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An `sglang/` checkout where preflight runs is not the server's; in the server's working directory
    it is what `python -m` imports first. There is no "current environment" fallback either."""
    checkout = tmp_path / "checkout"
    root = make_build(checkout)
    py = fake_interpreter(tmp_path / "bin", None)
    monkeypatch.chdir(checkout)
    assert locate_sglang(str(py)).root is None
    assert locate_sglang(str(py), cwd=checkout).root == root
    assert locate_sglang(str(py), cwd=checkout, options=["-P"]).root is None  # safe path: no cwd
