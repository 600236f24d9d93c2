"""``--rules auto``: which shipped recipe a launch command (or a live server) follows, and why.

Each shipped pack names its recipe in a ``recipe:`` section (speculation, MoE backend, LM head); the
deployment's own three are read from the launch command and its environment (or from ``/server_info`` and
the log), and the pack whose recipe matches on all three is chosen. Anything less is doubt, and doubt
falls back to the default pack with a warning that says which recipe came closest and where it differs.
That is the point of the rule: a NEXTN recipe that lost its speculative flags must fail the default pack's
``spec.config``, not pass as a "baseline" it never was. The baseline's recipe demands what a baseline
really is (no speculation, ``flashinfer_mxfp4``, FP32 logits, no FP8 head), so it is never matched by
accident.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from validator.facts import Facts
    from validator.report import CheckResult
    from validator.rulepack import LoadedPack

NONE = "none"
FP8_ENV = "SGLANG_ENABLE_FP8_LM_HEAD"  # the Ling-3.0 patch's switch (every shipped pack's fp8_lm_head_env)


@dataclass(frozen=True)
class Recipe:
    """The three settings that tell the shipped recipes apart."""

    speculative: str  # NEXTN | DSPARK | none (as written on the command line)
    moe_runner_backend: str  # humming | flashinfer_mxfp4 | auto | ...
    lm_head: str | None  # fp8 | bf16 | fp32 | fp8+fp32; None: not known (a live server without evidence)

    def describe(self) -> str:
        spec = "no speculation" if self.speculative == NONE else f"{self.speculative} speculation"
        head = {
            "fp8": "FP8 head",
            "bf16": "BF16 head",
            "fp32": "FP32 logits",
            "fp8+fp32": "FP8 and FP32 heads",
        }
        return f"{spec}, {self.moe_runner_backend} MoE, {head.get(self.lm_head or '', 'head dtype unknown')}"


def deployment_recipe(
    *,
    algorithm: str | None,
    launch_command: str | None,
    moe_runner_backend: str | None,
    fp8: bool | None,
    fp32: bool,
) -> Recipe:
    """The deployment's recipe. ``algorithm`` is the launch's (or the resolved one, with the server's
    ``launch_command`` to undo SGLang's NEXTN -> EAGLE rewrite); ``fp8`` None when it cannot be told."""
    algo = (algorithm or "").upper()
    if algo == "EAGLE" and launch_command and "NEXTN" in launch_command.upper():
        algo = "NEXTN"
    if fp8 is None:
        head: str | None = "fp32" if fp32 else None
    elif fp8:
        head = "fp8+fp32" if fp32 else "fp8"
    else:
        head = "fp32" if fp32 else "bf16"
    return Recipe(algo or NONE, moe_runner_backend or "auto", head)


@dataclass(frozen=True)
class Choice:
    pack: str
    reason: str
    exact: bool  # False: nothing (or more than one) matched and the default pack was used


def _differences(have: Recipe, want: Recipe, auto_backend: str | None) -> list[str]:
    out: list[str] = []
    if have.speculative != want.speculative:
        out.append(f"speculation {have.speculative} instead of {want.speculative}")
    backend_ok = have.moe_runner_backend == want.moe_runner_backend or (
        have.moe_runner_backend == "auto" and auto_backend == want.moe_runner_backend
    )
    if not backend_ok:
        out.append(f"MoE backend {have.moe_runner_backend} instead of {want.moe_runner_backend}")
    if have.lm_head is not None and have.lm_head != want.lm_head:
        out.append(f"LM head {have.lm_head} instead of {want.lm_head}")
    return out


def choose(
    have: Recipe,
    packs: Sequence[tuple[str, Recipe]],
    *,
    default: str,
    auto_backend: str | None = "flashinfer_mxfp4",
    source: str = "the launch command",
) -> Choice:
    """The pack whose recipe ``have`` follows on all three settings; else the default, saying why."""
    diffs = [(name, _differences(have, want, auto_backend)) for name, want in packs]
    matches = [name for name, d in diffs if not d]
    if len(matches) == 1:
        unknown = " (the head's dtype could not be read)" if have.lm_head is None else ""
        return Choice(
            matches[0], f"{source} follows the {matches[0]} recipe: {have.describe()}{unknown}", True
        )
    if matches:
        return Choice(
            default,
            f"{source} ({have.describe()}) fits several recipes ({', '.join(matches)}); "
            f"checked against the default pack {default}",
            False,
        )
    name, closest = min(diffs, key=lambda nd: len(nd[1])) if diffs else ("none", [])
    return Choice(
        default,
        f"{source} ({have.describe()}) follows no shipped recipe; closest is {name} "
        f"({'; '.join(closest)}); checked against the default pack {default}",
        False,
    )


AUTO = "auto"
CHECK_ID = "rules.auto"


def shipped_recipes() -> list[tuple[str, Recipe]]:
    """(pack name, its recipe) for every built-in pack that declares one."""
    from validator.rulepack import list_builtin_packs, load_pack

    out: list[tuple[str, Recipe]] = []
    for path in list_builtin_packs():
        pack = load_pack(str(path)).pack
        if pack.recipe is not None:
            r = pack.recipe
            out.append(
                (
                    pack.metadata.name,
                    Recipe(
                        r.speculative.upper() if r.speculative != NONE else NONE,
                        r.moe_runner_backend,
                        r.lm_head,
                    ),
                )
            )
    return out


def launch_recipe(facts: Facts) -> Recipe | None:
    """The deployment's recipe from a parsed launch command and its environment (preflight)."""
    from validator.checks.base import env_bool

    launch = facts.launch
    if launch is None:
        return None
    s = launch.settings
    fp8 = env_bool(launch.env.get(FP8_ENV))
    if fp8 and facts.sglang is not None and facts.sglang.declares_fp8_lm_head is False:
        fp8 = False  # a build that does not declare it ignores it
    return deployment_recipe(
        algorithm=s.speculative_algorithm,
        launch_command=None,
        moe_runner_backend=s.moe_runner_backend,
        fp8=bool(fp8),
        fp32=s.enable_fp32_lm_head,
    )


def server_recipe(facts: Facts) -> Recipe | None:
    """The deployment's recipe from a live server: ``/server_info`` (NEXTN undone from EAGLE through its
    ``launch_command``); the FP8 head from the attestation's head dtype or the log's FP8 line, else
    unknown (the server does not report its environment)."""
    server = facts.server
    if server is None:
        return None
    s = server.settings
    fp8: bool | None = None
    att = facts.attestation
    if att is not None and att.target is not None and att.target.lm_head is not None:
        fp8 = "float8" in (att.target.lm_head.weight_dtype or "")
    elif facts.log is not None:
        fp8 = bool(facts.log.fp8_lm_head_lines)
    return deployment_recipe(
        algorithm=s.speculative_algorithm,
        launch_command=s.launch_command,
        moe_runner_backend=s.moe_runner_backend,
        fp8=fp8,
        fp32=s.enable_fp32_lm_head,
    )


def choose_pack(facts: Facts) -> tuple[LoadedPack, CheckResult]:
    """``--rules auto``: the chosen pack, and the ``rules.auto`` result that says which and why."""
    from validator.report import CheckResult, Severity, Status
    from validator.rulepack import DEFAULT_PACK, load_pack

    live = facts.mode == "check"
    have = server_recipe(facts) if live else launch_recipe(facts)
    source = "the server" if live else "the launch command"
    if have is None:
        choice = Choice(DEFAULT_PACK, f"{source} could not be read; checked against {DEFAULT_PACK}", False)
    else:
        choice = choose(have, shipped_recipes(), default=DEFAULT_PACK, source=source)
    result = CheckResult(
        id=CHECK_ID,
        status=Status.PASS if choice.exact else Status.WARN,
        severity=Severity.WARNING,
        message=choice.reason,
        evidence={"pack": choice.pack, "recipe": have.describe() if have is not None else None},
        sources=["server" if live else "launch"],
        remedy=None if choice.exact else "Name the pack the deployment means to follow with --rules NAME.",
    )
    return load_pack(choice.pack), result
