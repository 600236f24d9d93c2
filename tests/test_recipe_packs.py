"""The four shipped recipes end to end, as real processes: for each pack, preflight on its recipe passes,
each single mistake of that recipe fails exactly its check IDs, another recipe's command fails the pack
where it should, and ``--rules auto`` picks the pack the command follows; ``check`` against the
simulator's scenario of each recipe reaches the scenario table's verdict.

The server host is a fake DGX Spark (``tests/support/gb10_host.py``): a GB10 with 113 GiB available.
The server's venv holds SGLang 0.5.23's real files (Ling-3.0 patch applied, DSpark worker and draft models
included), the real humming-kernels 0.1.19 release unpacked from PyPI's wheel, and the dist-infos of the real
flashinfer-python and flashinfer-cubin 0.6.3; its home holds FlashInfer's precompiled
fused_moe_120 where SGLang 0.5.23 makes FlashInfer look; the checkpoints are real safetensors files and
the DSpark draft a real config.json.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.gb10_host import fake_host, gb10_host, host_env
from tests.support.in_process import preflight_json_in_process
from tests.support.launch_recipe import Mistake
from tests.support.pypi_wheels import (
    HUMMING_SAFE,
    HUMMING_UNSAFE,
    SGLANG_OLD,
    flashinfer_cubin_site,
    flashinfer_python_site,
    humming_site,
    install_dist_info,
    install_into,
    sglang_old_site,
)
from tests.support.sglang_builds import fake_interpreter, make_build
from tests.support.sglang_wheel import sglang_root

REPO = Path(__file__).resolve().parents[1]
DEFAULT = "ling-3.0-flash-dgx-spark"
DSPARK = "ling-3.0-flash-dgx-spark-dspark"
COOKBOOK = "sglang-cookbook-dgx-spark"
BASELINE = "ling-3.0-flash-baseline"
FLASHINFER = "0.6.3"
HUMMING = "0.1.19"  # the release the venv holds between tests
DRAFT_CONFIG = {
    "architectures": ["LingDSparkModel"],
    "num_hidden_layers": 5,
    "dflash_config": {
        "block_size": 8,
        "markov_rank": 256,
        "markov_head_type": "vanilla",
        "mask_token_id": 156895,
    },
}


def install_flashinfer(site: Path, version: str) -> None:
    """Replace the venv's flashinfer-python with the real ``version``'s dist-info and its
    ``flashinfer/jit/env.py`` (what the reader reads; the 48 MB package itself is not copied)."""
    for old in site.glob("flashinfer_python-*.dist-info"):
        shutil.rmtree(old)
    real = flashinfer_python_site(version)
    install_dist_info(site, real)
    (site / "flashinfer" / "jit").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(real / "flashinfer" / "jit" / "env.py", site / "flashinfer" / "jit" / "env.py")


def install_cubin(site: Path, version: str) -> None:
    """Replace the venv's flashinfer-cubin record with the real ``version``'s dist-info."""
    for old in site.glob("flashinfer_cubin-*.dist-info"):
        shutil.rmtree(old)
    install_dist_info(site, flashinfer_cubin_site(version))


def install_humming(site: Path, version: str) -> None:
    """Replace the venv's humming-kernels with the real ``version`` from PyPI."""
    for old in [site / "humming", *site.glob("humming_kernels-*.dist-info")]:
        if old.exists():
            shutil.rmtree(old)
    install_into(site, [humming_site(version)])


@dataclass
class Server:
    base: Path
    python: Path
    site: Path
    model: Path
    draft: Path
    env: dict[str, str]

    def cmd(self, recipe: str, *extra: str, drop: tuple[str, ...] = ()) -> str:
        args: dict[str, str | None] = {"--model-path": str(self.model), "--mem-fraction-static": "0.68"}
        if recipe == DEFAULT:
            args.update({
                "--moe-runner-backend": "humming", "--speculative-algorithm": "NEXTN",
                "--speculative-num-steps": "3", "--speculative-eagle-topk": "1",
                "--speculative-num-draft-tokens": "4", "--speculative-draft-model-path": str(self.model),
            })  # fmt: skip
        elif recipe in (DSPARK, COOKBOOK):
            args.update({
                "--moe-runner-backend": "humming" if recipe == DSPARK else "flashinfer_mxfp4",
                "--speculative-algorithm": "DSPARK", "--speculative-draft-model-path": str(self.draft),
                "--enable-linear-replayssm-spec": None, "--linear-replayssm-cache-len": "32",
            })  # fmt: skip
        else:
            args.update({"--moe-runner-backend": "flashinfer_mxfp4", "--enable-fp32-lm-head": None})
        parts = [str(self.python), "-m", "sglang.launch_server", "--trust-remote-code"]
        for k, v in args.items():
            if k not in drop:
                parts += [k] if v is None else [k, v]
        return " ".join([*parts, *extra])

    def recipe_env(self, recipe: str) -> dict[str, str]:
        env = dict(self.env)
        if recipe in (DEFAULT, DSPARK):
            env["SGLANG_ENABLE_FP8_LM_HEAD"] = "1"
        return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    base = tmp_path_factory.mktemp("recipes")
    site = base / "venv" / "lib" / "site-packages"
    make_build(site, dspark=True)
    install_humming(site, HUMMING)
    install_flashinfer(site, FLASHINFER)
    install_cubin(site, FLASHINFER)
    python = fake_interpreter(base / "venv" / "bin", site)
    model, draft = base / "model", base / "draft"
    write_checkpoint(model, small=False)
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(DRAFT_CONFIG))
    home = base / "home"
    kernel = (
        home / f".cache/sglang/.cache/flashinfer/{FLASHINFER}/121a/cached_ops/fused_moe_120/fused_moe_120.so"
    )
    kernel.parent.mkdir(parents=True)
    kernel.write_bytes(b"\x7fELF")
    cache = home / "humming-cache" / "0123abcd"
    cache.mkdir(parents=True)
    (cache / "kernel.cubin").write_bytes(b"\x7fELF")
    (home / "humming-tmp").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HUMMING_CACHE_DIR": str(home / "humming-cache"),
        "HUMMING_TMP_DIR": str(home / "humming-tmp"),
        **host_env(gb10_host(base / "host")),
        "SPARK_VALIDATE_CACHE_DIR": str(base / "sv-cache"),
    }
    return Server(base, python, site, model, draft, env)


def preflight(env: dict[str, str], rules: str, *args: str) -> tuple[int, dict[str, Any], str]:
    return preflight_json_in_process(env, "--rules", rules, *args)


def by_status(report: dict[str, Any], *statuses: str) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] in statuses}


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


# Warnings each recipe gets as published: the cookbook cell ships --mem-fraction-static 0.85.
RECIPE_WARNINGS = {DEFAULT: set(), DSPARK: set(), COOKBOOK: {"host.mem_fraction"}, BASELINE: set()}
RECIPE_EXTRA = {COOKBOOK: ("--mem-fraction-static", "0.85")}


@pytest.mark.parametrize("pack", [DEFAULT, DSPARK, COOKBOOK, BASELINE])
def test_each_recipe_passes_its_pack(server: Server, pack: str) -> None:
    extra = RECIPE_EXTRA.get(pack, ())
    drop = ("--mem-fraction-static",) if extra else ()
    rc, report, err = preflight(
        server.recipe_env(pack), pack, "--launch-cmd", server.cmd(pack, *extra, drop=drop)
    )
    bad = [c for c in report.get("checks", []) if c["status"] in ("fail", "error")]
    assert rc == 0 and report["verdict"] == "pass", (err, bad)
    assert report["rule_pack"] == pack
    assert by_status(report, "warn") == RECIPE_WARNINGS[pack]
    for hazard in ("host.memory_available",):
        assert check(report, hazard)["status"] == "pass"
    if pack in (COOKBOOK, BASELINE):
        assert check(report, "moe.flashinfer_kernels")["status"] == "pass"
    if pack in (DSPARK, COOKBOOK):
        for cid in ("spec.config", "spec.dspark", "spec.lm_head_shared"):
            assert check(report, cid)["status"] == "pass", cid
        shared = check(report, "spec.lm_head_shared")["evidence"]
        assert shared["attach_shared_modules"] is True and shared["uses_own_vocab_modules"] is False


def test_a_dspark_step_count_sglang_overrides_is_a_warning_not_a_failure(server: Server) -> None:
    """world10 F9: NEXTN's ``--speculative-num-steps 3`` left beside DSPARK (MiaAI-Lab's start-dspark.sh):
    SGLang's ``_handle_dspark`` logs "overriding speculative_num_steps=3 to 1" and runs the recipe, so
    ``spec.config`` warns; a draft-token count SGLang refuses still fails."""
    rc, report, err = preflight(
        server.recipe_env(DSPARK), DSPARK, "--launch-cmd", server.cmd(DSPARK, "--speculative-num-steps", "3")
    )
    assert rc == 0 and check(report, "spec.config")["status"] == "warn", (err, check(report, "spec.config"))
    assert "--speculative-num-steps 3 is overridden to 1" in check(report, "spec.config")["message"]
    rc, report, err = preflight(
        server.recipe_env(DSPARK),
        DSPARK,
        "--launch-cmd",
        server.cmd(DSPARK, "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"),
    )
    assert rc == 78 and check(report, "spec.config")["status"] == "fail", err


# (pack, the mistake in its launch)
MISTAKES: list[tuple[str, Mistake]] = [
    (
        DSPARK,
        Mistake(
            ("--linear-replayssm-cache-len", "16"), ("--linear-replayssm-cache-len",), {}, {"spec.dspark"}
        ),
    ),
    (
        DSPARK,
        Mistake(
            ("--linear-replayssm-cache-len", "24"), ("--linear-replayssm-cache-len",), {}, {"spec.dspark"}
        ),
    ),
    (DSPARK, Mistake((), ("--enable-linear-replayssm-spec",), {}, {"spec.dspark"})),
    (DSPARK, Mistake(("--speculative-num-draft-tokens", "4"), (), {}, {"spec.config"})),
    (DSPARK, Mistake(("--moe-runner-backend", "auto"), ("--moe-runner-backend",), {}, {"moe.backend"})),
    (DSPARK, Mistake((), (), {"SGLANG_ENABLE_FP8_LM_HEAD": None}, {"lm_head.fp8"})),
    (
        COOKBOOK,
        Mistake(
            ("--linear-replayssm-cache-len", "16"), ("--linear-replayssm-cache-len",), {}, {"spec.dspark"}
        ),
    ),
    (COOKBOOK, Mistake(("--moe-runner-backend", "humming"), ("--moe-runner-backend",), {}, {"moe.backend"})),
    (COOKBOOK, Mistake((), (), {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}, {"lm_head.dtype"})),
    (COOKBOOK, Mistake((), (), {"FLASHINFER_WORKSPACE_BASE": "/nonexistent"}, {"moe.flashinfer_kernels"})),
    (BASELINE, Mistake(("--moe-runner-backend", "humming"), ("--moe-runner-backend",), {}, {"moe.backend"})),
    (BASELINE, Mistake((), ("--enable-fp32-lm-head",), {}, {"lm_head.dtype"})),
    (BASELINE, Mistake((), (), {"SGLANG_ENABLE_FP8_LM_HEAD": "1"}, {"lm_head.dtype", "lm_head.exclusive"})),
    (
        BASELINE,
        Mistake(("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"), (), {}, {"spec.off"}),
    ),
]


@pytest.mark.parametrize(("pack", "mistake"), MISTAKES)
def test_each_single_mistake_fails_exactly_its_checks(server: Server, pack: str, mistake: Mistake) -> None:
    cmd = server.cmd(pack, *mistake.extra, drop=mistake.drop)
    rc, report, err = preflight(mistake.environ(server.recipe_env(pack)), pack, "--launch-cmd", cmd)
    assert rc == 78, (err, report.get("checks"))
    assert by_status(report, "fail") == mistake.fails


def test_ring_length_rule_before_start(server: Server) -> None:
    for ring, ok in (("16", False), ("24", False), ("32", True), ("64", True)):
        cmd = server.cmd(DSPARK, "--linear-replayssm-cache-len", ring, drop=("--linear-replayssm-cache-len",))
        _, report, _ = preflight(server.recipe_env(DSPARK), DSPARK, "--launch-cmd", cmd)
        result = check(report, "spec.dspark")
        assert (result["status"] == "pass") is ok, result
        if not ok:
            assert "--linear-replayssm-cache-len 32" in (result["remedy"] or "")


def test_host_hazards(server: Server, tmp_path: Path) -> None:
    env = {**server.recipe_env(DSPARK), **host_env(gb10_host(tmp_path / "h", available_gib=40.0))}
    rc, report, _ = preflight(env, DSPARK, "--launch-cmd", server.cmd(DSPARK))
    assert rc == 78 and by_status(report, "fail") == {"host.memory_available"}
    assert "40.0 GiB" in check(report, "host.memory_available")["message"]
    # the real flashinfer-python 0.6.2 beside the real flashinfer-cubin 0.6.3: FlashInfer refuses to start
    install_flashinfer(server.site, "0.6.2")
    try:
        rc, report, _ = preflight(server.recipe_env(COOKBOOK), COOKBOOK, "--launch-cmd", server.cmd(COOKBOOK))
    finally:
        install_flashinfer(server.site, FLASHINFER)
    assert rc == 78 and by_status(report, "fail") == {"moe.flashinfer_kernels"}
    message = check(report, "moe.flashinfer_kernels")["message"]
    assert "flashinfer-cubin 0.6.3 does not match flashinfer-python 0.6.2: start-up aborts" in message


def test_flashinfer_as_sglang_0523_installs_it(server: Server) -> None:
    """SGLang 0.5.23 pins flashinfer_python[cu13]==0.7.2, and the newest flashinfer-cubin on the index is
    0.6.13. FlashInfer 0.7.2's jit/env.py ignores a cubin of another version and downloads the cubins at
    first use (0.6.x aborted at import): so the cookbook cell is judged by the kernel it JIT-compiles
    while loading (fail), and with that precompiled the mismatch is a warning naming the download, not
    "start-up aborts"."""
    kernel = server.base / "home" / ".cache/sglang/.cache/flashinfer/0.7.2/121a/cached_ops/fused_moe_120"
    install_flashinfer(server.site, "0.7.2")
    install_cubin(server.site, "0.6.13")
    try:
        rc, report, _ = preflight(server.recipe_env(COOKBOOK), COOKBOOK, "--launch-cmd", server.cmd(COOKBOOK))
        assert rc == 78 and by_status(report, "fail") == {"moe.flashinfer_kernels"}
        message = check(report, "moe.flashinfer_kernels")["message"]
        assert "fused_moe_120 is not precompiled for FlashInfer 0.7.2" in message, message
        assert "start-up aborts" not in message and "downloads the cubins it needs" in message
        kernel.mkdir(parents=True)
        (kernel / "fused_moe_120.so").write_bytes(b"\x7fELF")
        rc, report, err = preflight(
            server.recipe_env(COOKBOOK), COOKBOOK, "--launch-cmd", server.cmd(COOKBOOK)
        )
        result = check(report, "moe.flashinfer_kernels")
        assert rc == 0 and result["status"] == "warn", (err, result)
        assert (
            "flashinfer-cubin 0.6.13 does not match flashinfer-python 0.7.2, which ignores it"
            in result["message"]
        )
        assert "at first use" in result["message"] and "flashinfer download-kernels" in (
            result["remedy"] or ""
        )
        assert result["evidence"]["cubin_mismatch"] == "ignored"
    finally:
        shutil.rmtree(kernel, ignore_errors=True)
        install_flashinfer(server.site, FLASHINFER)
        install_cubin(server.site, FLASHINFER)


@pytest.mark.parametrize("version", HUMMING_UNSAFE + HUMMING_SAFE)
def test_nvidia_recipe_with_real_humming_releases_on_gb10(server: Server, version: str) -> None:
    """The NVIDIA recipe on a DGX Spark with each real humming-kernels release installed: the releases
    whose code makes NVML's memory-clock query unguarded (0.1.11) fail moe.humming_gb10 and nothing else;
    the ones that return early on (12, 1) (0.1.12, 0.1.13) or make no NVML call at all (0.1.19, 0.1.20)
    pass every humming check, and so does the recipe (tests/support/pypi_wheels.py says which is which)."""
    install_humming(server.site, version)
    try:
        rc, report, err = preflight(server.recipe_env(DEFAULT), DEFAULT, "--launch-cmd", server.cmd(DEFAULT))
    finally:
        install_humming(server.site, HUMMING)
    gb10 = check(report, "moe.humming_gb10")
    assert check(report, "moe.humming_runtime")["status"] == "pass", err
    assert gb10["evidence"]["version"] == version
    if version in HUMMING_UNSAFE:
        assert rc == 78 and by_status(report, "fail") == {"moe.humming_gb10"}, gb10
        assert "humming/utils/device.py:33 in calculate_gpu_bandwidth" in gb10["message"]
    else:
        assert rc == 0 and report["verdict"] == "pass" and gb10["status"] == "pass", (err, gb10)


def test_humming_gb10_does_not_apply_off_a_spark(server: Server, tmp_path: Path) -> None:
    """The same unguarded release on a host with another GPU: NVML has a memory clock there."""
    h200 = fake_host(tmp_path / "h200", gpu="NVIDIA H200", board=None)
    env = {**server.recipe_env(DEFAULT), **host_env(h200)}
    install_humming(server.site, HUMMING_UNSAFE[0])
    try:
        _, report, err = preflight(env, DEFAULT, "--launch-cmd", server.cmd(DEFAULT))
    finally:
        install_humming(server.site, HUMMING)
    assert check(report, "moe.humming_gb10")["status"] == "skip", err


def test_recipes_on_a_venv_with_the_real_sglang_0_5_9(server: Server, tmp_path: Path) -> None:
    """The DSpark recipe launched with an interpreter whose SGLang is the real 0.5.9 release: that build
    has no DSPARK, no humming backend and no FP8-head variable, and each check that reads the build says
    so (fail, not error): the server could not run this recipe."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    install_into(site, [sglang_old_site()])
    install_dist_info(site, humming_site(HUMMING))
    shutil.copytree(server.site / "humming", site / "humming")
    for dist in (flashinfer_python_site(FLASHINFER), flashinfer_cubin_site(FLASHINFER)):
        install_dist_info(site, dist)
    python = fake_interpreter(tmp_path / "venv" / "bin", site)
    cmd = server.cmd(DSPARK).replace(str(server.python), str(python), 1)
    rc, report, err = preflight(server.recipe_env(DSPARK), DSPARK, "--launch-cmd", cmd)
    assert rc == 78, err
    failed = by_status(report, "fail")
    assert failed == {"lm_head.fp8", "spec.lm_head_shared", "moe.backend"}, failed
    assert "no DSPARK speculative algorithm" in check(report, "spec.lm_head_shared")["message"]
    assert "(0.5.9) has no 'humming' MoE runner backend" in check(report, "moe.backend")["message"]
    version = check(report, "sglang.version")
    assert version["status"] == "warn" and f"SGLang {SGLANG_OLD};" in version["message"]


def test_start_budget_shorter_than_cold_start_warns(server: Server, tmp_path: Path) -> None:
    env_file = tmp_path / "sglang.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in server.recipe_env(DSPARK).items() if k != "PATH"))
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nType=notify\nTimeoutStartSec=90\nEnvironmentFile={env_file}\n"
        f"ExecStart={server.cmd(DSPARK)}\n"
    )
    rc, report, err = preflight(server.env, DSPARK, "--unit", str(unit))
    budget = check(report, "host.start_budget")
    assert budget["status"] == "warn" and "90 s is shorter than a cold start (480 s)" in budget["message"], (
        err
    )
    assert rc == 0


# (command's recipe, pack, checks that must be among the failures)
CROSS = [
    (DSPARK, DEFAULT, {"spec.config"}),
    (DEFAULT, DSPARK, {"spec.config"}),
    (COOKBOOK, DSPARK, {"moe.backend", "lm_head.fp8"}),
    (DSPARK, COOKBOOK, {"moe.backend", "lm_head.dtype"}),
    (DEFAULT, BASELINE, {"moe.backend", "lm_head.dtype", "spec.off"}),
    (BASELINE, DEFAULT, {"moe.backend", "lm_head.fp8", "spec.config"}),
    (COOKBOOK, BASELINE, {"lm_head.dtype", "spec.off"}),
]


@pytest.mark.parametrize(("recipe", "pack", "expected"), CROSS)
def test_another_recipes_command_fails_the_pack(
    server: Server, recipe: str, pack: str, expected: set[str]
) -> None:
    rc, report, err = preflight(server.recipe_env(recipe), pack, "--launch-cmd", server.cmd(recipe))
    assert rc == 78 and expected <= by_status(report, "fail"), (err, by_status(report, "fail"))


@pytest.mark.parametrize("recipe", [DEFAULT, DSPARK, COOKBOOK, BASELINE])
def test_rules_auto_picks_the_recipes_pack(server: Server, recipe: str) -> None:
    _, report, err = preflight(server.recipe_env(recipe), "auto", "--launch-cmd", server.cmd(recipe))
    assert report["rule_pack"] == recipe, err
    auto = check(report, "rules.auto")
    assert auto["status"] == "pass" and recipe in auto["message"]


def test_rules_auto_never_takes_a_stripped_nextn_recipe_for_the_baseline(server: Server) -> None:
    spec = ("--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk")
    spec += ("--speculative-num-draft-tokens", "--speculative-draft-model-path")
    cmd = server.cmd(DEFAULT, drop=spec)
    rc, report, _ = preflight(server.recipe_env(DEFAULT), "auto", "--launch-cmd", cmd)
    assert report["rule_pack"] == DEFAULT and rc == 78 and "spec.config" in by_status(report, "fail")
    auto = check(report, "rules.auto")
    assert auto["status"] == "warn" and "follows no shipped recipe" in auto["message"]


# What ly01325/Ling3-Flash-DGX-Spark's scripts/dgx-spark/launch-optimized.sh and launch-baseline.sh
# (commit 8cbd8ed) carry beside their recipe flags: another model's tool-call parser, a YaRN override of
# the checkpoint's RoPE at 262144, and the variable that lets --context-length exceed the checkpoint.
YARN = (
    '{"max_position_embeddings":262144,"rope_scaling":{"rope_type":"yarn","factor":2.0,'
    '"rope_theta":6000000,"partial_rotary_factor":0.5,"original_max_position_embeddings":131072}}'
)
TRAPS = {"model.tool_call_parser", "model.rope_scaling", "model.context_override"}


@pytest.mark.parametrize("pack", [DEFAULT, BASELINE])
def test_the_traps_real_launch_scripts_carry_warn(server: Server, pack: str, tmp_path: Path) -> None:
    """The recipe as the published script writes it (exports, exec, line continuations, the JSON override
    in single quotes): the recipe passes and the three traps warn; under --strict they fail the run (78)."""
    env = {k: v for k, v in server.recipe_env(pack).items() if k in ("SGLANG_ENABLE_FP8_LM_HEAD",)}
    script = tmp_path / "launch.sh"
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    script.write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\nexport SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n"
        f"{exports}exec {server.cmd(pack)} \\\n  --context-length 262144 \\\n"
        "  --reasoning-parser deepseek-r1 --tool-call-parser qwen25 \\\n"
        f"  --json-model-override-args '{YARN}'\n"
    )
    base_env = {k: v for k, v in server.recipe_env(pack).items() if k not in env}
    rc, report, err = preflight(base_env, pack, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, by_status(report, "fail", "error"))
    assert by_status(report, "warn") == TRAPS | RECIPE_WARNINGS[pack], by_status(report, "warn")
    parser = check(report, "model.tool_call_parser")["message"]
    assert "qwen25 parses with Qwen25Detector" in parser and "not SGLang 0.5.23's ling3 detector" in parser
    assert '"rope_type":"yarn"' in check(report, "model.rope_scaling")["message"]
    assert "--tool-call-parser ling3" in (check(report, "model.tool_call_parser")["remedy"] or "")
    rc, report, _ = preflight(base_env, pack, "--script", str(script), "--strict")
    assert rc == 78 and report["verdict"] == "fail" and by_status(report, "warn") >= TRAPS


@pytest.mark.parametrize(
    ("extra", "env", "status"),
    [
        (("--tool-call-parser", "ling3"), {}, "pass"),
        (("--tool-call-parser", "auto"), {}, "pass"),
        (("--tool-call-parser", "glm45"), {}, "warn"),
        (("--json-model-override-args", '{"max_position_embeddings":262144}'), {}, "pass"),
        ((), {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "0"}, "pass"),
        ((), {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "true"}, "warn"),
    ],
)
def test_each_trap_alone(server: Server, extra: tuple[str, ...], env: dict[str, str], status: str) -> None:
    import shlex

    cmd = server.cmd(DEFAULT, *(shlex.quote(e) for e in extra))
    rc, report, err = preflight({**server.recipe_env(DEFAULT), **env}, DEFAULT, "--launch-cmd", cmd)
    assert rc == 0, err
    judged = {c: check(report, c)["status"] for c in TRAPS}
    touched = (
        "model.context_override"
        if env
        else ("model.tool_call_parser" if "--tool-call-parser" in extra else "model.rope_scaling")
    )
    assert judged[touched] == status, judged
    assert all(v == "pass" for k, v in judged.items() if k != touched), judged


def test_rules_auto_keeps_the_dspark_recipe_on_a_build_that_ignores_the_fp8_head(server: Server) -> None:
    """The DSpark recipe (FP8 head asked for) on a stock build, whose Envs does not declare the variable:
    auto used to take the head for BF16, find no recipe and send the operator to NEXTN. It is the DSpark
    recipe that was asked for: its pack fails lm_head.fp8 with the patch remedy."""
    environ = server.site / "sglang" / "srt" / "environ.py"
    patched = environ.read_text()
    shutil.copyfile(sglang_root() / "srt" / "environ.py", environ)
    try:
        rc, report, err = preflight(server.recipe_env(DSPARK), "auto", "--launch-cmd", server.cmd(DSPARK))
    finally:
        environ.write_text(patched)
    assert report["rule_pack"] == DSPARK, err
    assert check(report, "rules.auto")["status"] == "pass"
    assert rc == 78 and by_status(report, "fail") == {"lm_head.fp8"}, by_status(report, "fail")
    fp8 = check(report, "lm_head.fp8")
    assert "Ling-3.0 patch" in (fp8["remedy"] or "") and "NEXTN" not in (fp8["remedy"] or ""), fp8


def _foreign_model(base: Path, arch: str, model_type: str) -> Path:
    model = write_checkpoint(base, small=True, architectures=(arch,))
    config = json.loads((model / "config.json").read_text())
    config["model_type"] = model_type
    (model / "config.json").write_text(json.dumps(config))
    return model


@pytest.mark.parametrize(
    ("recipe", "arch", "model_type"),
    [(BASELINE, "Qwen2ForCausalLM", "qwen2"), (COOKBOOK, "DeepseekV3ForCausalLM", "deepseek_v3")],
)
def test_rules_auto_matches_no_pack_for_another_model(
    server: Server, tmp_path: Path, recipe: str, arch: str, model_type: str
) -> None:
    """The baseline's and the cookbook's flags on another model's checkpoint: the checkpoint's
    config.json names the architecture, no shipped pack is written for it, nothing is checked, and the
    verdict is inconclusive (69), never a pass (--allow-partial does not accept it)."""
    model = _foreign_model(tmp_path / "model", arch, model_type)
    cmd = server.cmd(recipe).replace(f"--model-path {server.model}", f"--model-path {model}")
    for extra in ((), ("--allow-partial",)):
        rc, report, err = preflight(server.recipe_env(recipe), "auto", "--launch-cmd", cmd, *extra)
        assert rc == 69 and report["verdict"] == "inconclusive", err
        assert report["rule_pack"] == "none" and [c["id"] for c in report["checks"]] == ["rules.auto"]
        auto = check(report, "rules.auto")
        assert auto["status"] == "error" and f"{arch} (model_type {model_type})" in auto["message"]
        assert "config.json" in auto["message"] and "BailingMoeV3ForCausalLM" in auto["message"]


# ---- live (tests/test_sim_table.py holds every scenario row to its verdict with these packs); the real
# check front door in this process against the sim command's own server (tests/support/in_process.py) ----


@pytest.mark.parametrize(("scenario", "healthy"), [("dspark", True), ("dspark-broken-drafter", False)])
def test_live_dspark_probe_drafts_eight_per_round(scenario: str, healthy: bool, tmp_path: Path) -> None:
    """The probe reads K = 8 (the server's 9 draft tokens - 1): a healthy DSpark clears the pack's 2.0 far
    above NEXTN's range, a broken drafter is exactly 1.00 and decided within 32 tokens."""
    from tests.support.check_helpers import evidence_files
    from tests.support.in_process import check_in_process, sim_in_process

    with sim_in_process(tmp_path, "--scenario", scenario) as sim:
        run = check_in_process(sim, "--wait", "20", "--rules", DSPARK, *evidence_files(sim))
    assert run.report is not None and run.report["probe"] is not None, run.explain()
    probe = run.report["probe"]
    accept = run.check("spec.accept_length")
    if healthy:
        assert probe["accept_length"] > 3.0 and accept["status"] == "pass", probe
    else:
        assert probe["accept_length"] == pytest.approx(1.0) and probe["completion_tokens"] <= 32, probe
        assert accept["status"] == "fail" and accept["evidence"]["threshold"] == 2.0


@pytest.mark.parametrize("scenario", ["healthy", "dspark", "cookbook", "baseline"])
def test_check_rules_auto_picks_the_live_servers_pack(scenario: str, tmp_path: Path) -> None:
    from tests.support.check_helpers import evidence_files
    from tests.support.in_process import check_in_process, sim_in_process
    from validator.sim.scenarios import SCENARIOS

    with sim_in_process(tmp_path, "--scenario", scenario) as sim:
        run = check_in_process(sim, "--wait", "20", "--rules", "auto", *evidence_files(sim))
    assert run.report is not None and run.report["rule_pack"] == SCENARIOS[scenario].pack, run.explain()
    assert run.check("rules.auto")["status"] == "pass" and run.report["verdict"] == "pass", run.explain()


def test_live_dspark_block_size_comes_from_the_workers_log_line(tmp_path: Path) -> None:
    """A pack expecting another draft (block size 4) fails spec.config live on the DSpark worker's own
    'Initialized DSpark draft runner ... gamma=8' line, not only on /server_info."""
    from tests.support.check_helpers import evidence_files
    from tests.support.in_process import check_in_process, sim_in_process

    text = (REPO / "rules" / f"{DSPARK}.yaml").read_text()
    assert "    block_size: 8 " in text and "    num_draft_tokens: 9 " in text
    pack = tmp_path / "dspark-block4.yaml"
    pack.write_text(
        text.replace("    block_size: 8 ", "    block_size: 4 ").replace(
            "    num_draft_tokens: 9 ", "    num_draft_tokens: 5 "
        )
    )
    with sim_in_process(tmp_path, "--scenario", "dspark") as sim:
        run = check_in_process(sim, "--wait", "20", "--rules", str(pack), *evidence_files(sim))
    assert run.report is not None and "spec.config" in run.with_status("fail"), run.explain()
    message = run.check("spec.config")["message"]
    assert "drafts blocks of 8, the recipe's 4" in message and "num_draft_tokens is 9, expected 5" in message


@pytest.mark.parametrize(("own", "shared", "status"), [(False, True, "pass"), (True, False, "fail")])
def test_live_dspark_draft_with_its_own_vocab_modules_is_told_apart(
    tmp_path: Path, own: bool, shared: bool, status: str
) -> None:
    """The plugin's DSpark hook records uses_own_vocab_modules (attestation lm_head.own_vocab_modules): a
    draft keeping its own head is not the recipe's, even though its head is consistently its own."""
    import dataclasses

    from validator.attestation import writer
    from validator.engine import run_checks
    from validator.facts import Facts
    from validator.plugin.state import PluginState
    from validator.rulepack import load_pack
    from validator.sources.server.attestation import read_attestation

    doc = PluginState(host="127.0.0.1", port=30000, tp_rank=0, tp_size=1).document(env={})
    sharing = dataclasses.replace(
        doc.lm_head,
        shared_module=shared,
        shared_weight=shared,
        worker="DSparkWorkerV2",
        own_vocab_modules=own,
    )
    path = tmp_path / "att" / "attestation.json"
    writer.write_document(path, dataclasses.replace(doc, lm_head=sharing))
    facts = Facts(mode="check", attestation=read_attestation(path))
    [result] = run_checks(facts, load_pack(DSPARK), mode="check", only={"spec.lm_head_shared"})
    assert result.status.value == status, result
    if own:
        assert "own vocabulary modules" in result.message


def _jit_cache(site: Path, version: str | None) -> None:
    """A flashinfer-jit-cache distribution record of ``version`` (None: none). Not on the package index
    (FlashInfer publishes it on its own), so only its record is written; the rule that judges it is read
    from the installed flashinfer/jit/env.py."""
    for old in site.glob("flashinfer_jit_cache-*.dist-info"):
        shutil.rmtree(old)
    if version is not None:
        info = site / f"flashinfer_jit_cache-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: flashinfer-jit-cache\nVersion: {version}\n"
        )


@pytest.mark.parametrize(
    ("python", "jit_cache", "outcome"),
    [
        ("0.6.3", "0.6.2+cu129", "start-up aborts"),  # 0.6.x _get_aot_dir raises at import
        ("0.7.2", "0.7.1+cu130", "which ignores it"),  # 0.7.x _get_aot_providers ignores the shim
    ],
)
def test_a_jit_cache_of_another_version_is_judged_by_the_release(
    server: Server, python: str, jit_cache: str, outcome: str
) -> None:
    """With fused_moe_120 precompiled where the server looks, a flashinfer-jit-cache of another version
    passed unseen: under 0.6.x FlashInfer then refuses to import (fail); under 0.7.x it ignores the shim
    and uses the JIT kernel (no failure from it)."""
    kernel = server.base / "home" / f".cache/sglang/.cache/flashinfer/{python}/121a/cached_ops/fused_moe_120"
    install_flashinfer(server.site, python)
    install_cubin(server.site, python if python == FLASHINFER else "0.6.13")
    _jit_cache(server.site, jit_cache)
    made = not kernel.exists()
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "fused_moe_120.so").write_bytes(b"\x7fELF")
    try:
        rc, report, err = preflight(
            server.recipe_env(COOKBOOK), COOKBOOK, "--launch-cmd", server.cmd(COOKBOOK)
        )
        result = check(report, "moe.flashinfer_kernels")
        assert outcome in result["message"], (err, result)
        if outcome == "start-up aborts":
            assert rc == 78 and result["status"] == "fail"
            assert (
                f"flashinfer-jit-cache {jit_cache} does not match flashinfer-python {python}"
                in result["message"]
            )
        else:
            assert result["status"] != "fail" and result["evidence"]["jit_cache_mismatch"] == "ignored", (
                result
            )
    finally:
        _jit_cache(server.site, None)
        if made:
            shutil.rmtree(kernel, ignore_errors=True)
        install_flashinfer(server.site, FLASHINFER)
        install_cubin(server.site, FLASHINFER)
