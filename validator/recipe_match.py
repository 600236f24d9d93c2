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

NONE = "none"


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
