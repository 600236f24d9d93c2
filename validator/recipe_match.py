"""``--rules auto``: which shipped recipe a launch command (or a live server) follows, and why.

The model first: read from ``/model_info``, the attestation, ``config.json``, the log or the Hub repo id,
matched to each pack's ``recipe.architectures``/``model_types``. A model no pack is for, or that nothing
names, is a critical ``rules.auto`` error (exit 69): unknown stays unknown. Then the recipe (speculation,
MoE backend, LM head, as asked for): the pack matching all three is chosen; anything less falls back to
the default pack with a warning naming the closest, so a NEXTN recipe that lost its flags fails
``spec.config`` instead of passing as a baseline (whose recipe is strict enough never to match by accident).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from validator.bounded_files import looks_like
from validator.errors import InputError
from validator.facts import Facts
from validator.report import CheckResult, Severity, Status
from validator.rulepack import DEFAULT_PACK, LoadedPack, load_pack, pack_candidates
from validator.server_settings import logged_settings
from validator.sglang_env import env_bool
from validator.sources.host import hf_cache
from validator.trusted_files import read_as

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


@dataclass(frozen=True)
class Model:
    """The deployment's target model, and where that was read."""

    architectures: tuple[str, ...]
    model_type: str | None
    source: str
    repo_id: str | None = None  # a Hugging Face repo id, where that is all that names the model

    def describe(self) -> str:
        if self.repo_id is not None and not self.architectures and not self.model_type:
            return f"the Hugging Face repo {self.repo_id}"
        arch = ", ".join(self.architectures) or "architecture unknown"
        return f"{arch} (model_type {self.model_type})" if self.model_type else arch


@dataclass(frozen=True)
class ShippedRecipe:
    """A built-in pack's recipe and the model it is written for."""

    pack: str
    recipe: Recipe
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    fp8_env: str | None = None  # the variable that asks for the pack's FP8 head (expect.fp8_lm_head_env)
    repo_ids: tuple[str, ...] = ()  # the Hub repos the pack's model is published as (metadata.model)

    def for_model(self, model: Model) -> bool:
        """The architectures decide when known (they name the class SGLang loads); else ``model_type``;
        else the Hub repo the server downloads, when that is all there is (case-insensitive, as the Hub
        resolves repo ids)."""
        if model.architectures:
            return bool(set(model.architectures) & set(self.architectures))
        if model.model_type is not None:
            return model.model_type in self.model_types
        return model.repo_id is not None and model.repo_id.lower() in {r.lower() for r in self.repo_ids}


def _same_path(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.normpath(str(a)) == os.path.normpath(str(b))


def deployment_recipe(
    *,
    algorithm: str | None,
    launch_command: str | None,
    moe_runner_backend: str | None,
    fp8: bool | None,
    fp32: bool,
    model_path: str | None = None,
    draft_model_path: str | None = None,
) -> Recipe:
    """The deployment's recipe. ``algorithm`` is the launch's or the resolved one: SGLang rewrites NEXTN
    to EAGLE, which is undone by the server's ``launch_command`` where it has one, or by the draft being
    the model's own checkpoint (its MTP layer: what NEXTN is; a separate EAGLE draft is another path);
    ``fp8`` None when it cannot be told."""
    algo = (algorithm or "").upper()
    if algo == "EAGLE" and (
        (launch_command and "NEXTN" in launch_command.upper()) or _same_path(model_path, draft_model_path)
    ):
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
    pack: str  # the pack chosen, or the default one the deployment is checked against
    reason: str
    exact: bool  # False: nothing (or more than one) matched and the default pack was used


def _differences(have: Recipe, want: Recipe) -> list[str]:
    out: list[str] = []
    if have.speculative != want.speculative:
        out.append(f"speculation {have.speculative} instead of {want.speculative}")
    backend_ok = have.moe_runner_backend == want.moe_runner_backend or (
        have.moe_runner_backend == "auto" and want.moe_runner_backend == "flashinfer_mxfp4"  # what auto picks
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
    source: str = "the launch command",
) -> Choice:
    """The pack whose recipe ``have`` follows on all three settings; else the default, saying why."""
    diffs = [(name, _differences(have, want)) for name, want in packs]
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
    # A BF16 head where a recipe wants FP8, all else that recipe's: the FP8 head was asked for and the
    # build ignored it, or it was forgotten (both show as BF16 when the environment is not visible). It is
    # that recipe, whose lm_head.fp8 then fails with the remedy, not the default pack's other recipe.
    lost_fp8 = [
        name
        for name, want in packs
        if want.lm_head == "fp8"
        and have.lm_head == "bf16"
        and _differences(have, want) == ["LM head bf16 instead of fp8"]
    ]
    if len(lost_fp8) == 1:
        return Choice(
            lost_fp8[0],
            f"{source} ({have.describe()}) follows the {lost_fp8[0]} recipe but for its FP8 head, which is "
            "not in effect (see lm_head.fp8)",
            False,
        )
    name, closest = min(diffs, key=lambda nd: len(nd[1])) if diffs else ("none", [])
    return Choice(
        default,
        f"{source} ({have.describe()}) follows no shipped recipe; closest is {name} "
        f"({'; '.join(closest)}); checked against the default pack {default}",
        False,
    )


CHECK_ID = "rules.auto"
NO_PACK = "none"  # the report's rule_pack when no shipped pack is written for the model


def shipped_recipes(dirs: Sequence[Path] = ()) -> list[ShippedRecipe]:
    """Every built-in pack (and pack in ``dirs``, ``--rules-dir``) that declares a recipe, with the model
    it is for."""

    out: list[ShippedRecipe] = []
    for path in candidate_paths(dirs).values():
        pack = load_pack(str(path)).pack
        if pack.recipe is not None:
            r = pack.recipe
            spec = r.speculative.upper() if r.speculative != NONE else NONE
            out.append(
                ShippedRecipe(
                    pack.metadata.name,
                    Recipe(spec, r.moe_runner_backend, r.lm_head),
                    tuple(r.architectures),
                    tuple(r.model_types),
                    pack.expect.fp8_lm_head_env,
                    _published_repos(pack.metadata.model),
                )
            )
    return out


def _published_repos(model: str) -> tuple[str, ...]:
    """``metadata.model`` (``inclusionAI/Ling-3.0-flash-fp4``, or ``TARGET + DRAFT``): the target's repo id,
    the first one named."""
    first = model.split("+", 1)[0].strip()
    return (first,) if hf_cache.looks_like_repo_id(first) else ()


def candidate_paths(dirs: Sequence[Path] = ()) -> dict[str, Path]:
    """Pack name -> file, for the packs ``--rules auto`` may choose: built-in first; a pack in ``dirs`` that
    takes a name already taken is refused (exit 65) rather than silently shadow or be shadowed."""
    paths: dict[str, Path] = {}
    for path in pack_candidates(dirs):
        name = load_pack(str(path)).name
        if name in paths:
            raise InputError(str(path), f"pack name {name!r} is already the pack {paths[name]}")
        paths[name] = path
    return paths


def _text_list(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def deployment_model(facts: Facts) -> Model | None:
    """The target model, from the first source that names it: the live server's ``/model_info``, the
    attestation (the class the plugin saw loaded), the checkpoint's ``config.json``, the log's
    ``Load weight end ... type=`` line (a start that died after loading)."""
    server = facts.server
    if server is not None and server.model_info:
        info = server.model_info
        archs = _text_list(info.get("architectures"))
        mtype = info.get("model_type")
        if archs or isinstance(mtype, str):
            return Model(archs, mtype if isinstance(mtype, str) else None, "/model_info")
    att = facts.attestation
    if att is not None and att.target is not None and att.target.model_class:
        return Model((att.target.model_class,), None, "the attestation (the loaded model's class)")
    ck = facts.checkpoint
    if ck is not None and (ck.architectures or isinstance(ck.config.get("model_type"), str)):
        mtype = ck.config.get("model_type")
        return Model(
            tuple(ck.architectures),
            mtype if isinstance(mtype, str) else None,
            f"the checkpoint's config.json ({ck.model_dir})",
        )
    if facts.log is not None and facts.log.loaded_models:
        return Model((facts.log.loaded_models[0],), None, f"the log's weight-load line ({facts.log.path})")
    named = _model_repo(facts)
    if named is not None:
        return Model((), None, named[1], repo_id=named[0])
    return None


def _model_repo(facts: Facts) -> tuple[str, str] | None:
    """The ``--model-path`` a server downloads from the Hugging Face Hub, and where it was read: the
    launch command, ``/server_info`` or the log's ``server_args``. A path (absolute, relative to where the
    server starts, or a directory here) is no repo id: a directory's name says nothing of what it holds."""
    found: list[tuple[str | None, str, Path | None]] = []
    if facts.launch is not None:
        found.append(
            (
                facts.launch.settings.model_path,
                "the launch command's --model-path",
                facts.launch.working_directory,
            )
        )
    if facts.server is not None:
        found.append((facts.server.settings.model_path, "the server's model_path (/server_info)", None))
    if facts.log is not None and (logged := logged_settings(facts.log)) is not None:
        found.append((logged.model_path, f"the model_path in the log's server_args ({facts.log.path})", None))
    for value, source, cwd in found:
        if not value or value.startswith(("/", ".", "~")) or not hf_cache.looks_like_repo_id(value):
            continue
        namers = facts.launch.named_by if facts.launch is not None else {}
        if _a_directory(Path(value), namers) or (cwd is not None and _a_directory(cwd / value, namers)):
            continue
        return value, source
    return None


def _a_directory(path: Path, namers: Mapping[int, tuple[str, tuple[int, ...]]]) -> bool:
    """Whether a directory is at ``path``. Where another user named the launch, looked at from a walk judged
    as them (``bounded_files.looks_like``: a directory on the way they could not enter counts as one, the
    same words whatever is there), never by name as this process: the answer picks the report's words."""
    if not namers:
        return path.is_dir()
    with read_as(namers):
        return looks_like(path, stat.S_ISDIR, "a --model-path directory")


def launch_recipe(facts: Facts, fp8_envs: Sequence[str]) -> Recipe | None:
    """The deployment's recipe from a parsed launch command and its environment (preflight). The FP8
    head counts as asked for whether or not the installed build declares the variable: that build ignoring
    it is what the FP8 pack's ``lm_head.fp8`` fails, with the patch remedy. ``fp8_envs`` are the variables
    the candidate packs name for it (``expect.fp8_lm_head_env``): setting any of them asks for it."""
    launch = facts.launch
    if launch is None:
        return None
    s = launch.settings
    return deployment_recipe(
        algorithm=s.speculative_algorithm,
        launch_command=None,
        moe_runner_backend=s.moe_runner_backend,
        fp8=any(env_bool(launch.env.get(name)) for name in fp8_envs),
        fp32=s.enable_fp32_lm_head,
        model_path=s.model_path,
        draft_model_path=s.speculative_draft_model_path,
    )


def server_recipe(facts: Facts, fp8_envs: Sequence[str]) -> tuple[Recipe, str] | None:
    """The deployment's recipe from a live server, and what it was read from: ``/server_info`` (NEXTN
    undone from EAGLE), else the log's ``server_args`` of a start that never answered. The FP8 head: asked
    for in the attestation's environment, or its head's dtype, or the log's FP8 line; else unknown (the
    server does not report its environment)."""
    if facts.server is not None:
        s = facts.server.settings
        source = "the server"
    elif facts.log is not None and (logged := logged_settings(facts.log)) is not None:
        s = logged
        source = f"the logged server_args of the start in {facts.log.path}"
    else:
        return None
    fp8: bool | None = None
    att = facts.attestation
    if att is not None and any(env_bool(att.env.get(name)) for name in fp8_envs):
        fp8 = True
    elif att is not None and att.target is not None and att.target.lm_head is not None:
        fp8 = "float8" in (att.target.lm_head.weight_dtype or "")
    elif facts.log is not None and (facts.log.fp8_lm_head_lines or facts.log.ready):
        fp8 = bool(facts.log.fp8_lm_head_lines)  # the FP8 line is logged while loading, before ready
    recipe = deployment_recipe(
        algorithm=s.speculative_algorithm,
        launch_command=s.launch_command,
        moe_runner_backend=s.moe_runner_backend,
        fp8=fp8,
        fp32=s.enable_fp32_lm_head,
        model_path=s.model_path,
        draft_model_path=s.speculative_draft_model_path,
    )
    return recipe, source


def choose_pack(facts: Facts, dirs: Sequence[Path] = ()) -> tuple[LoadedPack | None, CheckResult]:
    """``--rules auto``: the chosen pack (None: none is written for the deployment's model, and nothing
    is to be checked), and the ``rules.auto`` result that says which and why."""

    live = facts.mode == "check"
    shipped = shipped_recipes(dirs)
    model = deployment_model(facts)
    sources = ["server" if live else "launch"]
    which_model = sources if live else ["checkpoint", *sources]  # what would name the model
    if model is None:
        return None, CheckResult(
            id=CHECK_ID,
            status=Status.ERROR,
            severity=Severity.CRITICAL,
            message=(
                "which model this deployment serves could not be read (no /model_info, attestation, "
                "config.json, Hugging Face repo id or weight-load line in the log), so no pack can be chosen "
                "for it and nothing was checked: another model judged by Ling's recipe would only fail"
            ),
            evidence={"pack": None, "model": None, "model_source": None},
            sources=which_model,
            remedy=(
                "Give the checkpoint (--model-dir, or download the repo into the server's Hugging Face "
                "cache), the server's log (--log) or the live server (--url), or name the pack with "
                "--rules NAME."
            ),
        )
    fitting = [p for p in shipped if p.for_model(model)]
    if not fitting:
        written_for = sorted({a for p in shipped for a in p.architectures})
        if model.repo_id is not None and not model.architectures and not model.model_type:
            repos = sorted({r for p in shipped for r in p.repo_ids})
            reason = (
                f"{model.source} ({model.describe()}) names a model no shipped pack is written for (they are "
                f"for {', '.join(written_for)}, published as {', '.join(repos)}), and its config.json is not "
                "in the Hugging Face cache here to say otherwise, so nothing was checked"
            )
        else:
            reason = (
                f"{model.source} names the model {model.describe()}; no shipped pack is written for it "
                f"(they are for {', '.join(written_for)}), so nothing was checked"
            )
        return None, CheckResult(
            id=CHECK_ID,
            status=Status.ERROR,
            severity=Severity.CRITICAL,
            message=reason,
            evidence={"pack": None, "model": model.describe(), "model_source": model.source},
            sources=which_model if model.repo_id is not None and not model.architectures else sources,
            remedy=(
                "Name a pack written for this model with --rules PATH (spark-validate rules lint PATH "
                "checks it); the shipped packs validate Ling-3.0-flash recipes only."
            ),
        )
    shipped = fitting
    have: Recipe | None
    fp8_envs = sorted({p.fp8_env for p in shipped if p.fp8_env})
    if live:
        read = server_recipe(facts, fp8_envs)
        have, source = read if read is not None else (None, "the server")
    else:
        have, source = launch_recipe(facts, fp8_envs), "the launch command"
    names = [p.pack for p in shipped]
    default = DEFAULT_PACK if DEFAULT_PACK in names or not names else names[0]
    if have is None:
        choice = Choice(default, f"{source} could not be read; checked against {default}", False)
    else:
        choice = choose(have, [(p.pack, p.recipe) for p in shipped], default=default, source=source)
    model_note = f"; the model, {model.describe()} from {model.source}, is the pack's"
    result = CheckResult(
        id=CHECK_ID,
        status=Status.PASS if choice.exact else Status.WARN,
        severity=Severity.WARNING,
        message=choice.reason + model_note,
        evidence={
            "pack": choice.pack,
            "recipe": have.describe() if have is not None else None,
            "model": model.describe(),
            "model_source": model.source,
        },
        sources=sources,
        remedy=None if choice.exact else "Name the pack the deployment means to follow with --rules NAME.",
    )
    return load_pack(str(candidate_paths(dirs)[choice.pack])), result
