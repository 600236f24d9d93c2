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


def test_resolved_eagle_is_nextn_when_the_draft_is_the_models_own_checkpoint() -> None:
    """No launch_command (builds whose /server_info lacks it): the draft path decides."""
    base = {"algorithm": "EAGLE", "launch_command": None, "moe_runner_backend": "humming", "fp8": True}
    same = deployment_recipe(**base, fp32=False, model_path="/m/ling/", draft_model_path="/m/ling")  # type: ignore[arg-type]
    assert same.speculative == "NEXTN"
    other = deployment_recipe(**base, fp32=False, model_path="/m/ling", draft_model_path="/m/eagle")  # type: ignore[arg-type]
    assert other.speculative == "EAGLE"
    assert deployment_recipe(**base, fp32=False).speculative == "EAGLE"  # type: ignore[arg-type]


def test_the_architecture_decides_before_model_type() -> None:
    from validator.recipe_match import Model, ShippedRecipe

    pack = ShippedRecipe("p", PACKS[0][1], ("BailingMoeV3ForCausalLM",), ("bailing_hybrid",))
    assert pack.for_model(Model(("BailingMoeV3ForCausalLM",), "bailing_hybrid", "x"))
    # a checkpoint that names another class is another model, whatever its model_type says
    assert not pack.for_model(Model(("Qwen2ForCausalLM",), "bailing_hybrid", "x"))
    assert pack.for_model(Model((), "bailing_hybrid", "x")) and not pack.for_model(Model((), "qwen2", "x"))


def test_shipped_packs_state_their_model() -> None:
    from validator.recipe_match import shipped_recipes

    shipped = shipped_recipes()
    assert {p.pack for p in shipped} == {name for name, _ in PACKS}
    assert all(p.architectures == ("BailingMoeV3ForCausalLM",) for p in shipped)
    assert all(p.model_types == ("bailing_hybrid",) for p in shipped)


def test_a_bf16_head_on_an_fp8_recipe_is_that_recipe() -> None:
    """DSPARK + humming with the head in BF16 (the FP8 variable ignored by the build, or not visible to a
    live check without the attestation): the DSpark recipe, whose lm_head.fp8 fails, not the default
    pack's NEXTN recipe (which would send the operator to NEXTN)."""
    pack, exact, reason = pick(algorithm="DSPARK", moe_runner_backend="humming", fp8=False)
    assert (pack, exact) == ("ling-3.0-flash-dgx-spark-dspark", False)
    assert "but for its FP8 head" in reason and "lm_head.fp8" in reason
    assert pick(algorithm="NEXTN", moe_runner_backend="humming", fp8=False)[:2] == (DEFAULT, False)
    # the cookbook's own recipe (BF16 by design) is still an exact match
    assert pick(algorithm="DSPARK", moe_runner_backend="flashinfer_mxfp4")[:2] == (
        "sglang-cookbook-dgx-spark",
        True,
    )
