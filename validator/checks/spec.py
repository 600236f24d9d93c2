"""Speculative-decoding checks: NEXTN configured as the recipe says, the draft sharing the target's whole
LM-head module, and a measured acceptance length above the pack's threshold.

The sharing check is the reason this project exists: stock SGLang shares only the head's weight tensor
(``set_embed_and_head``), so with an FP8 head the draft reads FP8 codes as BF16, accepts nothing
(acceptance length exactly 1.00) and the server runs slower than the unoptimized baseline, silently.
"""

from __future__ import annotations

from typing import Any

from validator.checks.base import (
    CheckContext,
    Outcome,
    builtin,
    env_bool,
    errored,
    failed,
    passed,
    probe_not_run,
    skipped,
    warned,
)
from validator.checks.lm_head import fp8_requested
from validator.checks.log import log_shows_broken_draft
from validator.facts import ATTESTATION, LAUNCH, LOG, PROBE, SERVER, SGLANG, WEIGHTS, Facts
from validator.report import ProbeResult

SHARE_ENV = "SPARK_VALIDATE_SHARE_LM_HEAD"
PLUGIN_NAME = "spark_validate"


def _spec_remedy(ctx: CheckContext) -> str:
    s = ctx.expect.speculative
    return (
        f"Launch with --speculative-algorithm {s.algorithm} --speculative-num-steps {s.num_steps} "
        f"--speculative-eagle-topk {s.eagle_topk} --speculative-num-draft-tokens {s.num_draft_tokens} "
        "--speculative-draft-model-path <the model path>."
    )


@builtin("spec.config")
def spec_config(facts: Facts, ctx: CheckContext) -> Outcome:
    s = ctx.expect.speculative
    if ctx.mode == "preflight":
        if facts.launch is None:
            return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])
        args = facts.launch.args
        algo = args.get("speculative_algorithm")
        sources = [LAUNCH]
        algo_ok = algo is not None and str(algo).upper() == s.algorithm.upper()
        shown_algo = algo
    else:
        if facts.server is None:
            return errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
        args = facts.server.server_info
        algo = args.get("speculative_algorithm")
        launch_cmd = str(args.get("launch_command") or "")
        sources = [SERVER]
        # SGLang rewrites NEXTN to EAGLE; only launch_command still says NEXTN.
        algo_ok = algo is not None and str(algo).upper() == s.resolved_algorithm.upper()
        if algo_ok and launch_cmd and s.algorithm.upper() not in launch_cmd.upper():
            algo_ok = False
        shown_algo = (
            f"{algo} (launch_command {'has' if s.algorithm.upper() in launch_cmd.upper() else 'lacks'} "
        )
        shown_algo += f"{s.algorithm})"
    steps = args.get("speculative_num_steps")
    topk = args.get("speculative_eagle_topk")
    tokens = args.get("speculative_num_draft_tokens")
    draft_path = args.get("speculative_draft_model_path")
    ev: dict[str, Any] = {
        "speculative_algorithm": algo,
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": tokens,
        "speculative_draft_model_path": draft_path,
    }
    if algo is None:
        return failed(
            "speculative decoding is off (no --speculative-algorithm)", sources, _spec_remedy(ctx), **ev
        )
    problems: list[str] = []
    if ctx.mode == "check" and facts.log is not None:
        problems += _log_disagrees(facts.log, args, ctx, ev)
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
    if topk == 1 and steps is not None and tokens is not None and tokens != steps + 1:
        problems.append(
            f"with topk 1 the draft tokens must be steps + 1 = {steps + 1} (SGLang silently adjusts {tokens})"
        )
    if s.require_draft_model_path and not draft_path:
        problems.append("no draft model path: SGLang does not default it for BailingMoeV3ForCausalLM")
    if problems:
        return failed(
            "speculative settings differ from the recipe: " + "; ".join(problems),
            sources,
            _spec_remedy(ctx),
            **ev,
        )
    model_path = args.get("model_path")
    if draft_path and model_path and str(draft_path).rstrip("/") != str(model_path).rstrip("/"):
        return warned(
            f"draft model path {draft_path} differs from the model path {model_path}; the NEXTN layer "
            "ships in the model's own checkpoint",
            sources,
            _spec_remedy(ctx),
            **ev,
        )
    return passed(
        f"{s.algorithm} speculation, {steps} steps, topk {topk}, {tokens} draft tokens", sources, **ev
    )


_SPEC_KEYS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


def _log_disagrees(log: Any, info: dict[str, Any], ctx: CheckContext, ev: dict[str, Any]) -> list[str]:
    """The log's own account of the last start: its resolved ``server_args=`` must match /server_info,
    and with speculation on the draft model must have loaded."""
    problems: list[str] = []
    logged = getattr(log, "server_args", None)
    if isinstance(logged, dict):
        for key in _SPEC_KEYS:
            if key in logged and logged[key] != info.get(key):
                problems.append(
                    f"sources disagree on {key}: server says {info.get(key)}, log says {logged[key]}"
                )
    loaded = list(getattr(log, "loaded_models", []) or [])
    ev["log_loaded_models"] = loaded
    ev["log_draft_graph_captures"] = getattr(log, "draft_graph_begin", None)
    draft = ctx.expect.checkpoint.draft_architecture
    if info.get("speculative_algorithm") and loaded and draft not in loaded:
        problems.append(f"the log shows no {draft} (draft) weights loaded, only {', '.join(loaded)}")
    return problems


def _spec_and_fp8(facts: Facts, ctx: CheckContext) -> tuple[bool | None, bool | None]:
    if ctx.mode == "preflight":
        spec_on = None if facts.launch is None else bool(facts.launch.args.get("speculative_algorithm"))
    else:
        spec_on = (
            None if facts.server is None else bool(facts.server.server_info.get("speculative_algorithm"))
        )
    fp8, _ = fp8_requested(facts, ctx.expect.fp8_lm_head_env)
    return spec_on, fp8


@builtin("spec.lm_head_shared")
def spec_lm_head_shared(facts: Facts, ctx: CheckContext) -> Outcome:
    if ctx.mode == "preflight":
        return _shared_preflight(facts, ctx)
    return _shared_live(facts, ctx)


def _shared_preflight(facts: Facts, ctx: CheckContext) -> Outcome:
    if facts.launch is None:
        return errored(facts.errors.get(LAUNCH, "no launch command given"), [LAUNCH])
    spec_on, fp8 = _spec_and_fp8(facts, ctx)
    if not spec_on or not fp8:
        return skipped(
            "applies only when the FP8 head and NEXTN speculation are combined",
            [LAUNCH],
            speculative=spec_on,
            fp8_lm_head=fp8,
        )
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = (sg.note if sg is not None else None) or facts.errors.get(
            SGLANG, "no SGLang installation found"
        )
        return skipped(f"cannot inspect the draft class: {note}", [LAUNCH, SGLANG])
    ev: dict[str, Any] = {
        "sglang_version": sg.version,
        "sglang_root": str(sg.root),
        "set_lm_head_from_target": sg.nextn_shares_lm_head,
    }
    cls = ctx.expect.checkpoint.draft_architecture
    if sg.nextn_shares_lm_head is None:
        return errored(f"cannot read {cls} in {sg.root}: {sg.note}", [SGLANG], **ev)
    if sg.nextn_shares_lm_head:
        return passed(
            f"{cls} shares the target's LM-head module (set_lm_head_from_target)", [LAUNCH, SGLANG], **ev
        )
    share = env_bool(facts.launch.env.get(SHARE_ENV))
    ev[SHARE_ENV] = facts.launch.env.get(SHARE_ENV)
    ev["plugins"] = sorted(sg.plugins)
    if share and PLUGIN_NAME in sg.plugins:
        allowed = facts.launch.env.get("SGLANG_PLUGINS")
        if allowed is None or PLUGIN_NAME in [p.strip() for p in allowed.split(",")]:
            return passed(
                f"{cls} lacks set_lm_head_from_target; the spark-validate plugin adds it at load "
                f"({SHARE_ENV}=1)",
                [LAUNCH, SGLANG],
                **ev,
            )
    return failed(
        f"FP8 head + NEXTN, but SGLang {sg.version}'s {cls} lacks set_lm_head_from_target: "
        "the draft shares only "
        "the weight tensor, reads FP8 codes as BF16, and the acceptance length drops to 1.00",
        [LAUNCH, SGLANG],
        "Install an SGLang build with the Ling-3.0 patch, or install spark-validate[sglang] "
        "into the server's "
        f"environment and set {SHARE_ENV}=1 so its plugin shares the whole module.",
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


def _head_unquantized(att: dict[str, Any]) -> bool:
    """The target's head has no quantization (no scales, not FP8) and the draft's head runs the same method
    over a shared tensor: then tensor-only sharing computes exactly the target's logits."""
    target = (att.get("target") or {}).get("lm_head") or {}
    draft = (att.get("draft") or {}).get("lm_head") or {}
    return (
        bool((att.get("lm_head") or {}).get("shared_weight"))
        and target.get("weight_dtype") in ("bfloat16", "float16", "float32")
        and not target.get("has_weight_scale")
        and target.get("quant_method") is not None
        and target.get("quant_method") == draft.get("quant_method")
    )


def _shared_live(facts: Facts, ctx: CheckContext) -> Outcome:
    spec_on, fp8 = _spec_and_fp8(facts, ctx)
    if spec_on is False:
        return skipped("speculative decoding is off", [SERVER])
    att = facts.attestation
    if att is not None:
        head = att.get("lm_head") or {}
        draft = att.get("draft") or {}
        ev: dict[str, Any] = {
            "shared_module": head.get("shared_module"),
            "shared_weight": head.get("shared_weight"),
            "remedy_applied": head.get("remedy_applied"),
            "draft_quant_method": (draft.get("lm_head") or {}).get("quant_method"),
            "target_quant_method": ((att.get("target") or {}).get("lm_head") or {}).get("quant_method"),
        }
        if head.get("shared_module") is True:
            how = " (the plugin's remedy shared it)" if head.get("remedy_applied") else ""
            return passed(f"the draft's LM head is the target's module object{how}", [ATTESTATION], **ev)
        if head.get("shared_module") is False and _head_unquantized(att):
            # Stock tensor sharing of a BF16 head: the draft runs the same unquantized method over the same
            # tensor, so its logits are the target's. Harmless today (lm_head.fp8 reports the missing FP8
            # head); it turns into the trap the moment the FP8 head becomes active on this build.
            return warned(
                "the draft shares only the LM head's weight tensor; harmless while the head is unquantized "
                f"({ev['target_quant_method']}), but with the FP8 head active the draft would read FP8 "
                "codes as BF16 (accept length 1.00)",
                [ATTESTATION],
                **ev,
            )
        if head.get("shared_module") is False:
            weight = " only the weight tensor is shared;" if head.get("shared_weight") else ""
            return failed(
                f"the draft's LM head is a separate module:{weight} the draft reads the head under "
                f"{ev['draft_quant_method']}",
                [ATTESTATION],
                **ev,
            )
        return errored(
            "the attestation does not record LM-head sharing (hook init_lm_head not reached)",
            [ATTESTATION],
            **ev,
        )
    if facts.server is None and ATTESTATION not in facts.errors:
        # No server, no attestation: there is no functional evidence to weigh either.
        return errored(facts.errors.get(SERVER, "server state unavailable"), [SERVER])
    demanded = None
    if ctx.expect.require_attestation or ctx.strict or ATTESTATION in facts.errors:
        why = facts.errors.get(ATTESTATION, "no attestation given (--attestation)")
        demanded = errored(
            f"the draft head's identity needs the in-process attestation: {why}", [ATTESTATION]
        )
    server = facts.server
    if server is not None and server.weights_checksums is not None:
        shared, why = _weights_checker_verdict(server.weights_checksums)
        return passed(why, [WEIGHTS]) if shared else failed(why, [WEIGHTS])
    if demanded is not None:
        return demanded
    probe: ProbeResult | None = facts.probe
    how = (
        "Prove it with the spark-validate SGLang plugin (--attestation), or the opt-in deep check "
        "--weights-checker (hashes all weights)."
    )
    if probe is not None and probe.verify_ct > 0 and probe.accept_rate == 0.0 and fp8:
        return failed(
            f"the probe accepted no draft token in {probe.verify_ct} verify rounds with the FP8 head on: "
            "the signature of a draft reading FP8 weights as BF16",
            [PROBE],
            how,
            accept_length=probe.accept_length,
            verify_ct=probe.verify_ct,
        )
    ev = {}
    if probe is not None:
        ev = {"probe_accept_length": probe.accept_length, "probe_accept_rate": probe.accept_rate}
    return warned(
        "the draft head's identity can only be proven in-process; functional evidence: "
        + (f"probe accept length {probe.accept_length}" if probe is not None else "none"),
        [PROBE] if probe is not None else [SERVER],
        how,
        **ev,
    )


@builtin("spec.accept_length")
def spec_accept_length(facts: Facts, ctx: CheckContext) -> Outcome:
    threshold = ctx.expect.accept_length_min
    if ctx.mode == "preflight":
        return skipped("measured by the live probe (spark-validate check)")
    if facts.server is not None and not facts.server.server_info.get("speculative_algorithm"):
        return failed(
            "speculative decoding is not active on the server, nothing is accepted",
            [SERVER],
            _spec_remedy(ctx),
        )
    probe: ProbeResult | None = facts.probe
    if probe is None:
        broken = log_shows_broken_draft(facts.log) if facts.log is not None else None
        if broken is not None:  # the log's real traffic is evidence enough of a broken draft
            return failed(
                f"the server log shows accept len 1.00 in all of its last {broken} decode intervals: the "
                "draft proposes nothing the target accepts (broken draft head)",
                [LOG],
                log_decode_intervals=broken,
            )
        if PROBE in facts.errors:
            return errored(f"probe failed: {facts.errors[PROBE]}", [PROBE])
        return skipped(probe_not_run(facts), [PROBE])
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
    cross = _lifetime_cross_check(facts)
    if cross is not None:
        ev["server_avg_spec_accept_length"] = cross
    sources = [PROBE] + ([LOG] if facts.log is not None else [])
    if probe.accept_length is None:
        return errored(
            "the probe returned no speculative statistics: "
            + ("; ".join(probe.problems) or "spec_verify_ct missing"),
            [PROBE],
            **ev,
        )
    if probe.accept_length <= 1.0 + 1e-9:
        return failed(
            f"acceptance length {probe.accept_length:.2f}: the draft proposes nothing the target accepts "
            "(broken draft head)",
            sources,
            **ev,
        )
    settled = (probe.decided_by or "").split(":", 1)[0]
    if probe.accept_length < threshold or settled == "fail":
        return failed(
            f"acceptance length {probe.accept_length:.2f} is below the threshold {threshold}", sources, **ev
        )
    if settled != "pass":
        return warned(
            f"acceptance length {probe.accept_length:.2f} is above {threshold} but not statistically settled "
            f"({probe.decided_by})",
            sources,
            "Re-run the probe with a higher token cap (probe.max_total_tokens in the rule pack).",
            **ev,
        )
    return passed(f"acceptance length {probe.accept_length:.2f} > {threshold}", sources, **ev)


def _lifetime_cross_check(facts: Facts) -> float | None:
    if facts.server is None:
        return None
    for state in facts.server.server_info.get("internal_states") or []:
        if isinstance(state, dict) and isinstance(state.get("avg_spec_accept_length"), (int, float)):
            return float(state["avg_spec_accept_length"])
    return None
