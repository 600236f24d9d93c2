"""--rules auto's matcher: the recipe a deployment follows, and doubt that falls back to the default pack."""

from __future__ import annotations

from validator.recipe_match import Recipe, choose, deployment_recipe

PACKS = [
    ("ling-3.0-flash-dgx-spark", Recipe("NEXTN", "humming", "fp8")),
    ("ling-3.0-flash-dgx-spark-dspark", Recipe("DSPARK", "humming", "fp8")),
    ("sglang-cookbook-dgx-spark", Recipe("DSPARK", "flashinfer_mxfp4", "bf16")),
    ("ling-3.0-flash-baseline", Recipe("none", "flashinfer_mxfp4", "fp32")),
]
DEFAULT = "ling-3.0-flash-dgx-spark"


def pick(**kw: object) -> tuple[str, bool, str]:
    args = {
        "algorithm": None,
        "launch_command": None,
        "moe_runner_backend": None,
        "fp8": False,
        "fp32": False,
    }
    args.update(kw)
    c = choose(deployment_recipe(**args), PACKS, default=DEFAULT)  # type: ignore[arg-type]
    return c.pack, c.exact, c.reason


def test_each_recipe_picks_its_pack() -> None:
    assert pick(algorithm="NEXTN", moe_runner_backend="humming", fp8=True)[:2] == (DEFAULT, True)
    dspark = pick(algorithm="DSPARK", moe_runner_backend="humming", fp8=True)
    assert dspark[:2] == ("ling-3.0-flash-dgx-spark-dspark", True) and "DSPARK speculation" in dspark[2]
    assert pick(algorithm="DSPARK", moe_runner_backend="flashinfer_mxfp4")[:2] == (
        "sglang-cookbook-dgx-spark",
        True,
    )
    assert pick(moe_runner_backend="auto", fp32=True)[:2] == (
        "ling-3.0-flash-baseline",
        True,
    )  # auto resolves
    # a live server: NEXTN is reported as EAGLE, only launch_command keeps NEXTN
    live = pick(
        algorithm="EAGLE",
        launch_command="--speculative-algorithm NEXTN",
        moe_runner_backend="humming",
        fp8=None,
    )
    assert live[:2] == (DEFAULT, True) and "could not be read" in live[2]


def test_a_nextn_recipe_without_its_speculative_flags_is_not_a_baseline() -> None:
    pack, exact, reason = pick(moe_runner_backend="humming", fp8=True)
    assert (pack, exact) == (DEFAULT, False)
    assert "follows no shipped recipe" in reason and "checked against the default pack" in reason
    # even with the backend flag gone too (auto -> flashinfer_mxfp4): the FP8 head still tells it apart
    pack, exact, _ = pick(moe_runner_backend="auto", fp8=True)
    assert (pack, exact) == (DEFAULT, False)
    # and a "baseline" without --enable-fp32-lm-head is no baseline either
    assert pick(moe_runner_backend="flashinfer_mxfp4")[:2] == (DEFAULT, False)
