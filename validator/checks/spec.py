"""Speculative-decoding checks: speculation configured as the pack says, the draft sharing the target's
whole LM-head module, and a measured acceptance length above the pack's threshold.

The sharing check is the reason this project exists: stock SGLang shares only the head's weight tensor
(``set_embed_and_head``), so with an FP8 head the draft reads FP8 codes as BF16, accepts nothing
(acceptance length exactly 1.00) and the server runs slower than the unoptimized baseline, silently.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from validator.checks import base as check
from validator.checks.lm_head import fp8_requested
from validator.checks.server import log_shows_broken_draft
from validator.checks.spec_dspark import DSPARK, dead_start, dspark_config_preflight, dspark_shared_preflight
from validator.facts import (
    ATTESTATION,
    LAUNCH,
    LOG,
    METRICS,
    PLUGIN_SHARE_ENV,
    PROBE,
    SERVER,
    SGLANG,
    WEIGHTS,
    Facts,
    SGLangInstallFacts,
)
from validator.pack_schema import SpeculativeExpect
from validator.server_settings import ServerArgs, logged_settings

if TYPE_CHECKING:
    from validator.attestation.schema import Attestation

_CONFIG_NEEDS = ("speculative", "checkpoint")


def _judge_config(
    facts: Facts,
    ctx: check.CheckContext,
    args: ServerArgs,
    sources: list[str],
    algo_ok: bool,
    shown_algo: str | None,
    *,
    live: bool,
    alias: bool = False,
) -> check.Outcome:
    s = check.need(ctx.expect.speculative, "speculative")
    arch = check.need(ctx.expect.checkpoint, "checkpoint").architecture
    algo = args.speculative_algorithm
    steps = args.speculative_num_steps
    topk = args.speculative_eagle_topk
    tokens = args.speculative_num_draft_tokens
    draft_path = args.speculative_draft_model_path
    ev: dict[str, Any] = {
        "speculative_algorithm": algo,
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": tokens,
        "speculative_draft_model_path": draft_path,
    }
    if algo is None:
        return check.failed("speculative decoding is off (no --speculative-algorithm)", sources, **ev)
    problems: list[str] = []
    if live and facts.log is not None:
        problems += _log_disagrees(facts, args, ctx, ev)
        if problems:
            sources = [*sources, LOG]
    if not algo_ok:
        problems.append(f"algorithm is {shown_algo}, expected {s.algorithm}")
    for name, got, want in (
        ("num_steps", steps, s.num_steps),
        ("eagle_topk", topk, s.eagle_topk),
        ("num_draft_tokens", tokens, s.num_draft_tokens),
    ):
        if got is None:
            problems.append(f"{name} not set (SGLang then picks its own default), expected {want}")
        elif got != want:
            problems.append(f"{name} is {got}, expected {want}")
    dspark = s.algorithm.upper() == DSPARK  # one drafted block per round: tokens = block size + 1
    if not dspark and topk == 1 and steps is not None and tokens is not None and tokens != steps + 1:
        problems.append(
            f"with topk 1 the draft tokens must be steps + 1 = {steps + 1} (SGLang silently adjusts {tokens})"
        )
    if s.require_draft_model_path and not draft_path:
        problems.append(f"no draft model path: SGLang does not default it for {arch}")
    if problems:
        return check.failed(
            "speculative settings differ from the recipe: " + "; ".join(problems), sources, **ev
        )
    model_path = args.model_path
    if not dspark and draft_path and model_path and draft_path.rstrip("/") != model_path.rstrip("/"):
        return check.warned(
            f"draft model path {draft_path} differs from the model path {model_path}; "
            f"the {s.algorithm} layer ships in the model's own checkpoint",
            sources,
            **ev,
        )
    how = (
        f"{s.resolved_algorithm} with the model's own {s.algorithm} layer as draft (SGLang resolves "
        f"{s.algorithm} to {s.resolved_algorithm}: the same speculation)"
        if alias
        else f"{s.algorithm} speculation"
    )
    return check.passed(f"{how}, {steps} steps, topk {topk}, {tokens} draft tokens", sources, **ev)


@check.builtin("spec.config", "preflight", needs=_CONFIG_NEEDS)
def spec_config_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    s = check.need(ctx.expect.speculative, "speculative")
    if facts.launch is None:
        return check.no_launch(facts)
    args = facts.launch.settings
    if s.algorithm.upper() == DSPARK:
        return dspark_config_preflight(facts, ctx, args)
    algo = args.speculative_algorithm
    alias = _alias_of_recipe(args, (algo or "").upper(), s)
    algo_ok = algo is not None and (algo.upper() == s.algorithm.upper() or alias)
    return _judge_config(facts, ctx, args, [LAUNCH], algo_ok, algo, live=False, alias=alias)


def _alias_of_recipe(args: ServerArgs, typed: str, s: SpeculativeExpect) -> bool:
    """``typed`` is what the recipe's algorithm resolves to (EAGLE for NEXTN), with the model's own
    checkpoint as draft (its NEXTN layer): SGLang then runs exactly the recipe's speculation. With another
    draft model it is that algorithm proper, not the recipe."""
    if typed == s.algorithm.upper() or typed != s.resolved_algorithm.upper():
        return False
    draft, model = args.speculative_draft_model_path, args.model_path
    return bool(draft and model and draft.rstrip("/") == model.rstrip("/"))


@check.builtin("spec.config", "check", needs=_CONFIG_NEEDS)
def spec_config_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """Live: what /server_info resolved. A server that died before it was ready is never reached; its log
    then holds the dead start's ``server_args=``, which is judged instead (a recipe SGLang refused to run
    is still the wrong recipe, and the verdict should name it)."""
    s = check.need(ctx.expect.speculative, "speculative")
    if facts.server is None:
        dead = dead_start(facts)
        if dead is None:
            return check.no_server(facts)
        args, after = dead
        algo = args.speculative_algorithm
        # the logged args are resolved (NEXTN is already EAGLE) and may lack launch_command
        wanted = {s.algorithm.upper(), s.resolved_algorithm.upper()}
        algo_ok = algo is not None and algo.upper() in wanted
        outcome = _judge_config(facts, ctx, args, [LOG], algo_ok, algo, live=False)
        return replace(outcome, message=outcome.message + after)
    args = facts.server.settings
    algo = args.speculative_algorithm
    asked, resolved = s.algorithm.upper(), s.resolved_algorithm.upper()
    # SGLang rewrites the algorithm once resolved (NEXTN to EAGLE). Builds that serve launch_command keep
    # what was asked there; the others (SGLang's docs dumps have none) are judged from the resolved
    # fields: EAGLE drafting with the model's own checkpoint is the NEXTN layer, the recipe's speculation.
    raw = facts.server.server_info.get("launch_command")
    launch_cmd = raw.upper() if isinstance(raw, str) else None
    algo_ok = algo is not None and algo.upper() == resolved
    alias = False
    if algo_ok and asked != resolved and (launch_cmd is None or asked not in launch_cmd):
        alias = _alias_of_recipe(args, resolved, s)
        algo_ok = alias
    if launch_cmd is None:
        shown = f"{algo} (this build's /server_info has no launch_command; judged from the resolved fields)"
    else:
        shown = f"{algo} (launch_command {'has' if asked in launch_cmd else 'lacks'} {s.algorithm})"
    return _judge_config(facts, ctx, args, [SERVER], algo_ok, shown, live=True, alias=alias)


_SPEC_KEYS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


def _log_disagrees(facts: Facts, info: ServerArgs, ctx: check.CheckContext, ev: dict[str, Any]) -> list[str]:
    """The log's own account of the last start: its resolved ``server_args=`` must match /server_info,
    and with speculation on the draft model must have loaded."""
    log = facts.log
    assert log is not None
    problems: list[str] = []
    logged = logged_settings(log)
    if logged is not None and log.server_args is not None:
        for key in _SPEC_KEYS:
            if key in log.server_args and getattr(logged, key) != getattr(info, key):
                problems.append(
                    f"sources disagree on {key}: "
                    f"server says {getattr(info, key)}, log says {getattr(logged, key)}"
                )
    loaded = list(log.loaded_models)
    ev["log_loaded_models"] = loaded
    ev["log_draft_graph_captures"] = log.draft_graph_begin
    draft = check.need(ctx.expect.checkpoint, "checkpoint").draft_architecture
    if info.speculative and loaded and draft not in loaded:
        problems.append(f"the log shows no {draft} (draft) weights loaded, only {', '.join(loaded)}")
    d = ctx.expect.dspark
    if d is not None and log.dspark_gamma is not None:
        # the DSpark worker's own account of the block it drafts and the window the target verifies
        ev.update(log_dspark_gamma=log.dspark_gamma, log_dspark_verify_tokens=log.dspark_verify_tokens)
        if log.dspark_gamma != d.block_size:
            problems.append(
                f"the DSpark worker drafts blocks of {log.dspark_gamma}, the recipe's {d.block_size}"
            )
        if info.speculative_num_draft_tokens not in (None, log.dspark_verify_tokens):
            problems.append(
                f"sources disagree on the verify width: server says {info.speculative_num_draft_tokens}, "
                f"the DSpark worker's log line {log.dspark_verify_tokens}"
            )
    return problems


def _fp8(facts: Facts, ctx: check.CheckContext) -> bool | None:
    fp8, _ = fp8_requested(facts, check.need(ctx.expect.fp8_lm_head_env, "fp8_lm_head_env"))
    return fp8


_SHARED_NEEDS = ("fp8_lm_head_env", "checkpoint", "speculative")


@check.builtin(
    "spec.lm_head_shared",
    "preflight",
    needs=_SHARED_NEEDS,
    remedies=("install_or_plugin", "unshared"),
    params=("skipped_by",),
)
def spec_lm_head_shared_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    s: SpeculativeExpect = check.need(ctx.expect.speculative, "speculative")
    if facts.launch is None:
        return check.no_launch(facts)
    if s.algorithm.upper() == DSPARK:
        return dspark_shared_preflight(facts, ctx)
    spec_on, fp8 = facts.launch.settings.speculative, _fp8(facts, ctx)
    if not spec_on or not fp8:
        return check.skipped(
            f"applies only when the FP8 head and {s.algorithm} speculation are combined",
            [LAUNCH],
            speculative=spec_on,
            fp8_lm_head=fp8,
        )
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = check.sglang_note(facts)
        return check.errored(f"cannot inspect the draft class: {note}", [SGLANG, LAUNCH])
    cls = check.need(ctx.expect.checkpoint, "checkpoint").draft_architecture
    shares = sg.draft_share_hook.get(cls)
    ev: dict[str, Any] = {
        "sglang_version": sg.version,
        "sglang_root": str(sg.root),
        "set_lm_head_from_target": shares,
    }
    if cls not in sg.draft_share_hook:
        why = "; ".join(x for x in (f"no draft model file in srt/models defines class {cls}", sg.note) if x)
        return check.errored(f"cannot read {cls} in {sg.root}: {why}", [SGLANG], **ev)
    if shares is None:
        return check.errored(f"cannot read {cls} in {sg.root}: {sg.note}", [SGLANG], **ev)
    token_map = facts.launch.args.get("speculative_token_map")
    if shares and sg.share_skipped_by is None and token_map:
        why = sg.note or "no worker file of the build calls set_lm_head_from_target where it could be read"
        return check.errored(
            f"--speculative-token-map {token_map} is given, and whether SGLang {sg.version} then still "
            f"shares the head cannot be read: {why}",
            [SGLANG, LAUNCH],
            **ev,
        )
    skipped = _share_skipped(facts, sg, cls) if shares else None
    if skipped is not None:
        ev["share_skipped_by"] = skipped
        return check.failed(
            f"FP8 head + {s.algorithm}, but {skipped}: SGLang {sg.version}'s worker then gives the draft a "
            f"sliced copy of the head's data instead of calling {cls}.set_lm_head_from_target, so the draft "
            "reads FP8 codes as BF16 and the acceptance length drops to 1.00",
            [LAUNCH, SGLANG],
            "unshared",
            params={"skipped_by": skipped},
            **ev,
        )
    if shares:
        return check.passed(
            f"{cls} shares the target's LM-head module (set_lm_head_from_target)", [LAUNCH, SGLANG], **ev
        )
    plugin = facts.plugin
    ev[PLUGIN_SHARE_ENV] = facts.launch.env.get(PLUGIN_SHARE_ENV)
    ev["plugins"] = sorted(sg.plugins)
    if plugin is not None and plugin.remedy:
        return check.passed(
            f"{cls} lacks set_lm_head_from_target; the spark-validate plugin adds it at load ({plugin.why})",
            [LAUNCH, SGLANG],
            **ev,
        )
    # the remedy is credited only when every switch agrees; say which one does not
    unless = f" (the plugin's remedy would not run: {plugin.why})" if plugin and plugin.installed else ""
    return check.failed(
        f"FP8 head + {s.algorithm}, but SGLang {sg.version}'s {cls} lacks set_lm_head_from_target: "
        "the draft shares only the weight tensor, reads FP8 codes as BF16, and the acceptance length "
        f"drops to 1.00{unless}",
        [LAUNCH, SGLANG],
        "install_or_plugin",
        **ev,
    )


def _share_skipped(facts: Facts, sg: SGLangInstallFacts, cls: str) -> str | None:
    """What in this launch makes the installed build's worker skip ``set_lm_head_from_target`` (the
    condition around its call, as the install reader read it), in words naming the flag or the draft
    attribute; None when nothing does. A build whose condition could not be read skips nothing it is known
    to (the hook's presence is then the whole proof, as before this was read)."""
    assert facts.launch is not None
    algorithm = (facts.launch.settings.speculative_algorithm or "").upper()
    for dest, ignored_by in sorted((sg.share_skipped_by or {}).items()):
        value = facts.launch.args.get(dest)
        if value not in (None, "", False) and algorithm not in ignored_by:
            return f"--{dest.replace('_', '-')} {value} is given"
    own = [a for a in sg.draft_sets.get(cls, []) if a in (sg.share_skipped_by_draft or [])]
    if own:
        return f"the draft class {cls} sets its own {', '.join(own)}"
    return None


def _weights_checker_verdict(sums: dict[str, str]) -> tuple[bool, str]:
    """Module shared: draft.lm_head.* mirrors lm_head.* in names and checksums (sglang-0.5.23.md §7)."""
    target = {k: v for k, v in sums.items() if k.startswith("lm_head.")}
    draft = {k[len("draft.") :]: v for k, v in sums.items() if k.startswith("draft.lm_head.")}
    if not target or not draft:
        return False, "no lm_head entries for both target and draft"
    if set(target) != set(draft):
        missing = sorted(set(target) - set(draft))
        return False, f"the draft's head lacks {', '.join(missing)}: only the weight tensor is shared"
    differ = sorted(k for k in target if target[k] != draft[k])
    if differ:
        return False, f"checksums differ for {', '.join(differ)}: the draft reads the raw FP8 bytes"
    return True, "draft.lm_head.* equals lm_head.* in names and checksums"


def _head_unquantized(att: Attestation) -> bool:
    """The target's head has no quantization (no scales, not FP8) and the draft's head runs the same method
    over a shared tensor: then tensor-only sharing computes exactly the target's logits."""
    target = att.target.lm_head if att.target is not None else None
    draft = att.draft.lm_head if att.draft is not None else None
    return (
        bool(att.lm_head.shared_weight)
        and target is not None
        and target.weight_dtype in ("bfloat16", "float16", "float32")
        and not target.has_weight_scale
        and target.quant_method is not None
        and target.quant_method == (draft.quant_method if draft is not None else None)
    )


@check.builtin("spec.lm_head_shared", "check", needs=_SHARED_NEEDS, remedies=("prove",))
def spec_lm_head_shared_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    spec_on = None if facts.server is None else facts.server.settings.speculative
    fp8 = _fp8(facts, ctx)
    if spec_on is False:
        return check.skipped("speculative decoding is off", [SERVER])
    att = facts.attestation
    if att is not None and att.lm_head.own_vocab_modules:
        return check.failed(
            f"the draft uses its checkpoint's own vocabulary modules ({att.lm_head.worker}: "
            "uses_own_vocab_modules), not the target's LM head",
            [ATTESTATION],
            worker=att.lm_head.worker,
            own_vocab_modules=True,
        )
    if att is not None:
        head = att.lm_head
        draft_head = att.draft.lm_head if att.draft is not None else None
        target_head = att.target.lm_head if att.target is not None else None
        ev: dict[str, Any] = {
            "shared_module": head.shared_module,
            "shared_weight": head.shared_weight,
            "remedy_applied": head.remedy_applied,
            "draft_quant_method": draft_head.quant_method if draft_head is not None else None,
            "target_quant_method": target_head.quant_method if target_head is not None else None,
        }
        if head.shared_module is True:
            how = " (the plugin's remedy shared it)" if head.remedy_applied else ""
            return check.passed(
                f"the draft's LM head is the target's module object{how}", [ATTESTATION], **ev
            )
        if head.shared_module is False and _head_unquantized(att):
            # Stock tensor sharing of a BF16 head: the draft runs the same unquantized method over the same
            # tensor, so its logits are the target's. Harmless today (lm_head.fp8 reports the missing FP8
            # head); it turns into the trap the moment the FP8 head becomes active on this build.
            return check.warned(
                "the draft shares only the LM head's weight tensor; harmless while the head is unquantized "
                f"({ev['target_quant_method']}), but with the FP8 head active the draft would read FP8 "
                "codes as BF16 (accept length 1.00)",
                [ATTESTATION],
                **ev,
            )
        if head.shared_module is False and head.hot_token_count is not None:
            ev["hot_token_count"] = head.hot_token_count
            return check.failed(
                f"the draft's LM head is a sliced copy narrowed to {head.hot_token_count or 'some'} hot "
                "tokens (--speculative-token-map, or the draft's own hot_token_id): SGLang skipped "
                f"set_lm_head_from_target, and the draft reads the head under {ev['draft_quant_method']}",
                [ATTESTATION],
                **ev,
            )
        if head.shared_module is False:
            weight = " only the weight tensor is shared;" if head.shared_weight else ""
            return check.failed(
                f"the draft's LM head is a separate module:{weight} the draft reads the head under "
                f"{ev['draft_quant_method']}",
                [ATTESTATION],
                **ev,
            )
        return check.errored(
            "the attestation does not record LM-head sharing (hook init_lm_head not reached)",
            [ATTESTATION],
            **ev,
        )
    if facts.server is None and ATTESTATION not in facts.errors:
        # No server, no attestation: there is no functional evidence to weigh either.
        return check.no_server(facts)
    server = facts.server
    if server is not None and server.weights_checksums is not None:
        shared, why = _weights_checker_verdict(server.weights_checksums)
        return check.passed(why, [WEIGHTS]) if shared else check.failed(why, [WEIGHTS])
    probe = facts.probe
    if probe is not None and probe.verify_ct > 0 and probe.accept_rate == 0.0 and fp8:
        return check.failed(
            f"the probe accepted no draft token in {probe.verify_ct} verify rounds with the FP8 head on: "
            "the signature of a draft reading FP8 weights as BF16",
            [PROBE],
            "prove",
            accept_length=probe.accept_length,
            verify_ct=probe.verify_ct,
        )
    # Not proven (an attestation that is missing, stale or untrusted is `error`, never a pass): a good
    # acceptance length is consistent with sharing, but a BF16 head shared by tensor looks the same.
    why = facts.errors.get(ATTESTATION, "no attestation given (--attestation)")
    ev = {}
    if probe is not None:
        ev = {"probe_accept_length": probe.accept_length, "probe_accept_rate": probe.accept_rate}
    return check.errored(
        f"the draft head's identity needs the in-process attestation: {why}; functional evidence: "
        + (f"probe accept length {probe.accept_length}" if probe is not None else "none"),
        [ATTESTATION, WEIGHTS],
        **ev,
    )


@check.builtin(
    "spec.accept_length",
    "check",
    needs=("accept_length_min", "speculative", "probe"),
    remedies=("enable_spec", "more_tokens"),
)
def spec_accept_length(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    threshold = check.need(ctx.expect.accept_length_min, "accept_length_min")
    if facts.server is not None and not facts.server.settings.speculative:
        return check.failed(
            "speculative decoding is not active on the server, nothing is accepted", [SERVER], "enable_spec"
        )
    probe = facts.probe
    metrics = facts.server.metrics if facts.server is not None else None
    server_ev: dict[str, Any] = metrics.evidence() if metrics is not None else {}
    if probe is None:
        broken = log_shows_broken_draft(facts.log) if facts.log is not None else None
        if broken is not None:  # the log's real traffic is evidence enough of a broken draft
            return check.failed(
                f"the server log shows accept len 1.00 in all of its last {broken} decode intervals: the "
                "draft proposes nothing the target accepts (broken draft head)",
                [LOG],
                log_decode_intervals=broken,
                **server_ev,
            )
        if metrics is not None and metrics.lifetime_collapsed and metrics.reading is not None:
            calls = metrics.reading.verify_calls
            return check.failed(
                f"the server's own counters: {metrics.reading.generation_tokens:g} tokens generated in "
                f"{calls:g} verify rounds over its life (one per round) and sglang:spec_accept_length "
                f"{metrics.accept_length:.2f}: the draft proposes nothing the target accepts "
                "(broken draft head)",
                [METRICS],
                **server_ev,
            )
        if metrics is not None and metrics.collapsed:  # the server's own gauge, on production traffic
            return check.failed(
                f"the server's own sglang:spec_accept_length is {metrics.accept_length:.2f} while it "
                f"generates ({metrics.tokens_since:g} tokens since the previous reading): the draft "
                "proposes nothing the target accepts (broken draft head)",
                [METRICS],
                **server_ev,
            )
        outcome = check.no_probe(facts)
        return replace(outcome, evidence={**outcome.evidence, **server_ev}) if server_ev else outcome
    ev: dict[str, Any] = {
        "accept_length": probe.accept_length,
        "accept_rate": probe.accept_rate,
        "verify_ct": probe.verify_ct,
        "completion_tokens": probe.completion_tokens,
        "requests": probe.requests,
        "threshold": threshold,
        "ci": probe.accept_length_ci,
        "decided_by": probe.decided_by,
        **server_ev,
    }
    cross = facts.server.settings.avg_spec_accept_length if facts.server is not None else None
    if cross is not None:
        ev["server_avg_spec_accept_length"] = cross
    sources = [PROBE] + ([LOG] if facts.log is not None else [])
    if probe.accept_length is None:
        return check.errored(
            "the probe returned no speculative statistics: "
            + ("; ".join(probe.missing_fields or probe.problems) or "spec_verify_ct missing"),
            [PROBE],
            **ev,
        )
    if probe.accept_length <= 1.0 + 1e-9:
        return check.failed(
            f"acceptance length {probe.accept_length:.2f}: the draft proposes nothing the target accepts "
            "(broken draft head)",
            sources,
            **ev,
        )
    if probe.accept_length < threshold or probe.decision == "fail":
        return check.failed(
            f"acceptance length {probe.accept_length:.2f} is below the threshold {threshold}", sources, **ev
        )
    if probe.decision != "pass":
        return check.warned(
            f"acceptance length {probe.accept_length:.2f} is above {threshold} but not statistically settled "
            f"({probe.decided_by})",
            sources,
            "more_tokens",
            **ev,
        )
    return check.passed(f"acceptance length {probe.accept_length:.2f} > {threshold}", sources, **ev)


@check.builtin("spec.off", "preflight")
def spec_off_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The baseline decodes one token per step: no --speculative-algorithm."""
    if facts.launch is None:
        return check.no_launch(facts)
    algo = facts.launch.settings.speculative_algorithm
    if algo:
        return check.failed(f"speculative decoding is on ({algo})", [LAUNCH], speculative_algorithm=algo)
    return check.passed("no speculative decoding", [LAUNCH], speculative_algorithm=None)


@check.builtin("spec.off", "check")
def spec_off_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.server is None:
        return check.errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
    algo = facts.server.settings.speculative_algorithm
    if algo:
        return check.failed(f"the server speculates ({algo})", [SERVER], speculative_algorithm=algo)
    return check.passed("the server runs no speculative decoding", [SERVER], speculative_algorithm=None)
