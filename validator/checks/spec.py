"""Speculative-decoding checks: speculation configured as the pack says, the draft sharing the target's
whole LM-head module, and a measured acceptance length above the pack's threshold.

The sharing check is the reason this project exists: stock SGLang shares only the head's weight tensor
(``set_embed_and_head``), so with an FP8 head the draft reads FP8 codes as BF16, accepts nothing
(acceptance length exactly 1.00) and the server runs slower than the unoptimized baseline, silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from validator.checks import base as check
from validator.checks.lm_head import fp8_requested
from validator.checks.log import log_shows_broken_draft
from validator.facts import (
    ATTESTATION,
    DSPARK_DRAFT,
    LAUNCH,
    LOG,
    PROBE,
    SERVER,
    SGLANG,
    WEIGHTS,
    Facts,
    ServerArgs,
    logged_settings,
)
from validator.pack_schema import DSparkExpect, SpeculativeExpect
from validator.sources.dspark_draft import ring_problems, smallest_ring, verify_width, width_conflict
from validator.sources.plugin_env import ENV_SHARE

if TYPE_CHECKING:
    from validator.attestation.schema import Attestation

DSPARK = "DSPARK"
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
        return _dspark_config_preflight(facts, ctx, args)
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
    s = check.need(ctx.expect.speculative, "speculative")
    if facts.server is None:
        return check.no_server(facts)
    args = facts.server.settings
    algo = args.speculative_algorithm
    launch_cmd = (args.launch_command or "").upper()
    # SGLang rewrites the algorithm once resolved (NEXTN to EAGLE); only launch_command keeps what was asked.
    algo_ok = algo is not None and algo.upper() == s.resolved_algorithm.upper()
    alias = False
    if algo_ok and launch_cmd and s.algorithm.upper() not in launch_cmd:
        alias = _alias_of_recipe(args, s.resolved_algorithm.upper(), s)
        algo_ok = alias
    shown = f"{algo} (launch_command {'has' if s.algorithm.upper() in launch_cmd else 'lacks'} {s.algorithm})"
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


@check.builtin("spec.lm_head_shared", "preflight", needs=_SHARED_NEEDS, remedies=("install_or_plugin",))
def spec_lm_head_shared_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    s: SpeculativeExpect = check.need(ctx.expect.speculative, "speculative")
    if facts.launch is None:
        return check.no_launch(facts)
    if s.algorithm.upper() == DSPARK:
        return _dspark_shared_preflight(facts, ctx)
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
    ev: dict[str, Any] = {
        "sglang_version": sg.version,
        "sglang_root": str(sg.root),
        "set_lm_head_from_target": sg.nextn_shares_lm_head,
    }
    cls = check.need(ctx.expect.checkpoint, "checkpoint").draft_architecture
    if sg.nextn_shares_lm_head is None:
        return check.errored(f"cannot read {cls} in {sg.root}: {sg.note}", [SGLANG], **ev)
    if sg.nextn_shares_lm_head:
        return check.passed(
            f"{cls} shares the target's LM-head module (set_lm_head_from_target)", [LAUNCH, SGLANG], **ev
        )
    plugin = facts.plugin
    ev[ENV_SHARE] = facts.launch.env.get(ENV_SHARE)
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
    # Not proven (contract v2: an attestation that is missing, stale or untrusted is `error`): a good
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
    if probe is None:
        broken = log_shows_broken_draft(facts.log) if facts.log is not None else None
        if broken is not None:  # the log's real traffic is evidence enough of a broken draft
            return check.failed(
                f"the server log shows accept len 1.00 in all of its last {broken} decode intervals: the "
                "draft proposes nothing the target accepts (broken draft head)",
                [LOG],
                log_decode_intervals=broken,
            )
        return check.no_probe(facts)
    ev: dict[str, Any] = {
        "accept_length": probe.accept_length,
        "accept_rate": probe.accept_rate,
        "verify_ct": probe.verify_ct,
        "completion_tokens": probe.completion_tokens,
        "requests": probe.requests,
        "threshold": threshold,
        "ci": probe.accept_length_ci,
        "decided_by": probe.decided_by,
    }
    cross = facts.server.settings.avg_spec_accept_length if facts.server is not None else None
    if cross is not None:
        ev["server_avg_spec_accept_length"] = cross
    sources = [PROBE] + ([LOG] if facts.log is not None else [])
    if probe.accept_length is None:
        return check.errored(
            "the probe returned no speculative statistics: "
            + ("; ".join(probe.problems) or "spec_verify_ct missing"),
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


DSPARK = "DSPARK"


def _is_dspark(ctx: check.CheckContext) -> bool:
    s = ctx.expect.speculative
    return s is not None and s.algorithm.upper() == DSPARK


def _width_args(args: ServerArgs) -> dict[str, int | None]:
    return {
        "speculative_dspark_block_size": args.speculative_dspark_block_size,
        "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
    }


def _draft_problems(
    facts: Facts, ctx: check.CheckContext, ev: dict[str, Any]
) -> tuple[list[str], str | None]:
    """(what is wrong with the DSpark draft, why it could not be read). The draft must be a DSpark model
    the installed build registers, with what DSpark needs to start (markov_rank > 0, mask_token_id;
    ``resolve_runtime_config``) and the pack's block size."""
    d = check.need(ctx.expect.dspark, "dspark")
    draft = facts.dspark_draft
    if draft is None or draft.config_path is None:
        return [], (draft.note if draft is not None else None) or "the DSpark draft was not read"
    ev.update(
        draft_config=str(draft.config_path),
        draft_architectures=draft.architectures,
        draft_block_size=draft.block_size,
        draft_block_size_key=draft.block_size_key,
        draft_markov_rank=draft.markov_rank,
    )
    problems: list[str] = []
    arch = draft.architectures[0] if draft.architectures else None
    registered = facts.sglang.dspark_draft_classes if facts.sglang is not None else None
    if arch not in d.draft_architectures:
        problems.append(
            f"the draft at {draft.path} is {arch or 'no architecture'}, not a DSpark draft "
            f"({', '.join(d.draft_architectures)})"
        )
    elif registered is not None and arch not in registered:
        problems.append(f"the installed SGLang registers no DSpark draft class {arch}")
    else:
        if not draft.markov_rank:
            problems.append("the draft's markov_rank is not > 0: DSpark refuses it at start")
        if draft.mask_token_id is None:
            problems.append("the draft's config sets no mask_token_id: DSpark refuses it at start")
        if draft.block_size != d.block_size:
            problems.append(f"the draft's block size is {draft.block_size}, the recipe's {d.block_size}")
    return problems, None


def _dspark_config_preflight(facts: Facts, ctx: check.CheckContext, args: ServerArgs) -> check.Outcome:
    """DSPARK as the recipe runs it. SGLang resolves steps and topk to 1 and the draft-token count to the
    draft's block size + 1 (``_handle_dspark``): unset is right; a different explicit value is overridden
    with a warning (steps, topk) or refused at start (draft tokens)."""
    s = check.need(ctx.expect.speculative, "speculative")
    ev: dict[str, Any] = {
        "speculative_algorithm": args.speculative_algorithm,
        "speculative_draft_model_path": args.speculative_draft_model_path,
        "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
        "speculative_dspark_block_size": args.speculative_dspark_block_size,
    }
    sources = [LAUNCH]
    if args.speculative_algorithm is None:
        return check.failed("speculative decoding is off (no --speculative-algorithm)", sources, **ev)
    problems: list[str] = []
    if args.speculative_algorithm.upper() != DSPARK:
        problems.append(f"algorithm is {args.speculative_algorithm}, expected {s.algorithm}")
        return check.failed(
            "speculative settings differ from the recipe: " + "; ".join(problems), sources, **ev
        )
    for name, got in (("num_steps", args.speculative_num_steps), ("eagle_topk", args.speculative_eagle_topk)):
        if got is not None and got != 1:
            problems.append(f"{name} is {got}: DSpark overrides it to 1 (the command says otherwise)")
    draft = facts.dspark_draft
    if (
        s.require_draft_model_path
        and not args.speculative_draft_model_path
        and (draft is None or draft.config_path is None)
    ):
        problems.append("no draft model path (and no dspark/ subfolder in the model directory)")
    else:
        found, unread = _draft_problems(facts, ctx, ev)
        if unread is not None and not problems:
            return check.errored(
                f"the DSpark draft checkpoint could not be read: {unread} (run preflight where the draft "
                "checkpoint is)",
                [LAUNCH, DSPARK_DRAFT],
                **ev,
            )
        problems += found
        sources.append(DSPARK_DRAFT)
        conflict = width_conflict(draft.block_size if draft else None, _width_args(args))
        if conflict:
            problems.append(conflict)
    if problems:
        return check.failed(
            "speculative settings differ from the recipe: " + "; ".join(problems), sources, **ev
        )
    assert draft is not None
    return check.passed(
        f"DSPARK speculation with {draft.architectures[0]} (block size {draft.block_size}, "
        f"{draft.block_size + 1 if draft.block_size else '?'} verify tokens)",
        sources,
        **ev,
    )


@check.builtin(
    "spec.dspark",
    "preflight",
    needs=("dspark", "speculative"),
    remedies=("enable_spec_verify", "ring", "read_draft"),
    params=("ring",),
)
def spec_dspark(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The KDA ReplaySSM spec-verify ring as SGLang 0.5.23 allocates it (``memory_pool.py`` l.818-832):
    a power of two of at least twice the verify width. SGLang raises only at pool allocation, after the
    weights have loaded; here it costs nothing."""
    d = check.need(ctx.expect.dspark, "dspark")
    if facts.launch is None:
        return check.no_launch(facts)
    args = facts.launch.settings
    if (args.speculative_algorithm or "").upper() != DSPARK:
        return check.skipped("the launch command does not run DSPARK (see spec.config)", [LAUNCH])
    ring = args.linear_replayssm_cache_len
    ev: dict[str, Any] = {
        "enable_linear_replayssm_spec": args.enable_linear_replayssm_spec,
        "linear_replayssm_cache_len": ring,
    }
    draft = facts.dspark_draft
    flag = args.speculative_dspark_block_size
    if draft is not None and draft.config_path is not None:
        arch = draft.architectures[0] if draft.architectures else None
        if arch not in d.draft_architectures and flag is None:
            return check.skipped(
                "the draft is not a DSpark checkpoint (see spec.config)", [LAUNCH, DSPARK_DRAFT], **ev
            )
    elif flag is None and d.replayssm_spec and args.enable_linear_replayssm_spec:
        note = draft.note if draft is not None else "the DSpark draft was not read"
        return check.errored(
            f"the verify width needs the draft's block size: {note}",
            [LAUNCH, DSPARK_DRAFT],
            remedy="read_draft",
            **ev,
        )
    width, how = verify_width(draft.block_size if draft is not None else None, _width_args(args))
    ev.update(verify_width=width, verify_width_from=how)
    return _ring_verdict(
        d,
        args,
        width,
        LAUNCH,
        [LAUNCH, DSPARK_DRAFT],
        off="--enable-linear-replayssm-spec is off: the recipe's KDA verify runs ReplaySSM's "
        "fold-every-commit window instead of per-draft full-state snapshots",
        after=f" (verify width {width}: {how}); SGLang would raise this only after the weights have loaded",
        ev=ev,
    )


def _ring_verdict(
    d: DSparkExpect,
    args: ServerArgs,
    width: int,
    where: str,
    ring_sources: list[str],
    *,
    off: str,
    after: str,
    ev: dict[str, Any],
) -> check.Outcome:
    """The ReplaySSM spec-verify ring judged the same way before and after start (``where`` is the launch
    command or the server; ``ring_sources`` adds the draft a width was read from): the spec-verify on when
    the recipe wants it, and a ring that SGLang's two rules accept; the remedy names the smallest that
    would."""
    ring = args.linear_replayssm_cache_len
    if d.replayssm_spec and not args.enable_linear_replayssm_spec:
        return check.failed(off, [where], "enable_spec_verify", params={"ring": smallest_ring(width)}, **ev)
    if not args.enable_linear_replayssm_spec:
        return check.passed("ReplaySSM spec-verify is off; no ring to size", [where], **ev)
    problems = ring_problems(ring, width)
    if problems:
        return check.failed(
            "; ".join(problems) + after, ring_sources, "ring", params={"ring": smallest_ring(width)}, **ev
        )
    return check.passed(
        f"ReplaySSM ring {ring} >= 2 x {width} verify tokens, a power of two", ring_sources, **ev
    )


@check.builtin(
    "spec.dspark",
    "check",
    needs=("dspark", "speculative"),
    remedies=("enable_spec_verify", "ring"),
    params=("ring",),
)
def spec_dspark_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """Live: what /server_info resolved. A server that runs without the ReplaySSM spec-verify serves, but
    not the recipe; one whose ring SGLang would refuse cannot be up (it dies at pool allocation). Such a
    server is never reached; its log then holds the dead start's ``server_args=``, which is judged instead,
    so the verdict names the misconfiguration rather than only the server that did not come up."""
    d = check.need(ctx.expect.dspark, "dspark")
    where, who, after = SERVER, "server", ""
    if facts.server is not None:
        args = facts.server.settings
    elif (dead := _dead_start(facts)) is not None:
        args, after = dead
        where, who = LOG, "logged start"
    else:
        return check.errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
    if (args.speculative_algorithm or "").upper() != DSPARK:
        return check.skipped(f"the {who} does not run DSPARK (see spec.config)", [where])
    ring = args.linear_replayssm_cache_len
    width = args.speculative_num_draft_tokens or d.block_size + 1
    ev: dict[str, Any] = {
        "enable_linear_replayssm_spec": args.enable_linear_replayssm_spec,
        "linear_replayssm_cache_len": ring,
        "verify_width": width,
    }
    return _ring_verdict(
        d,
        args,
        width,
        where,
        [where],
        off=f"the {who} runs without --enable-linear-replayssm-spec: the recipe's KDA verify uses "
        "ReplaySSM's fold-every-commit window",
        after=after,
        ev=ev,
    )


def _dead_start(facts: Facts) -> tuple[ServerArgs, str] | None:
    """The resolved args of the start the log shows dying before it was ready (that server is never
    reached), and the words saying so; None when the server answered or the log shows no such start."""
    log = facts.log
    if facts.server is not None or log is None or log.start_failure is None:
        return None
    args = logged_settings(log)
    return None if args is None else (args, f" (the start logged in {log.path} died: {log.start_failure})")


def _dspark_shared_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """DSpark's draft shares the target's LM-head *module* by construction (``attach_shared_modules``),
    unless its class sets ``uses_own_vocab_modules``; the FP8-head trap of NEXTN does not arise, but a
    draft with its own head is not the recipe."""
    assert facts.launch is not None
    if (facts.launch.settings.speculative_algorithm or "").upper() != DSPARK:
        return check.skipped("the launch command does not run DSPARK (see spec.config)", [LAUNCH])
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = (sg.note if sg is not None else None) or facts.errors.get(
            SGLANG, "no SGLang installation found"
        )
        return check.errored(f"cannot inspect the DSpark worker: {note}", [LAUNCH, SGLANG])
    draft = facts.dspark_draft
    arch = draft.architectures[0] if draft is not None and draft.architectures else None
    classes = sg.dspark_draft_classes or {}
    ev: dict[str, Any] = {
        "sglang_version": sg.version,
        "attach_shared_modules": sg.dspark_attaches_lm_head,
        "draft_class": arch,
        "uses_own_vocab_modules": classes.get(arch) if arch else None,
    }
    if sg.dspark_attaches_lm_head is None:
        return check.errored(
            f"SGLang {sg.version} at {sg.root} has no readable DSpark worker: {sg.note}", [SGLANG], **ev
        )
    if not sg.dspark_attaches_lm_head:
        return check.failed(
            f"SGLang {sg.version}'s DSpark worker does not hand the draft the target's lm_head module "
            "(no attach_shared_modules(lm_head=...))",
            [SGLANG],
            **ev,
        )
    if arch is None:
        why = (draft.note if draft is not None else None) or "the DSpark draft was not read"
        return check.errored(f"which draft class loads is unknown: {why}", [SGLANG, DSPARK_DRAFT], **ev)
    own = classes.get(arch, False)
    if own is None:
        return check.errored(
            f"{arch}.uses_own_vocab_modules is decided by the platform at import",
            [SGLANG, DSPARK_DRAFT],
            **ev,
        )
    if own:
        return check.failed(
            f"{arch} sets uses_own_vocab_modules: the draft uses its checkpoint's own embedding and LM head, "
            "not the target's",
            [SGLANG, DSPARK_DRAFT],
            **ev,
        )
    return check.passed(
        f"the DSpark worker hands {arch} the target's lm_head module (attach_shared_modules)",
        [LAUNCH, SGLANG, DSPARK_DRAFT],
        **ev,
    )


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
