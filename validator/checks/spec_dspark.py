"""DSpark checks (``spec.dspark``, and the DSPARK forms of ``spec.config`` and ``spec.lm_head_shared``): a
draft the build registers, its verify width as SGLang resolves it, and a KDA ReplaySSM ring SGLang accepts.

SGLang's rules as pure functions, each naming the code it follows (0.5.23's ``_handle_dspark`` in
``srt/arg_groups/speculative_hook.py``, ring checks of ``srt/mem_cache/memory_pool.py``); the draft's files
are read by ``sources/host/dspark_draft``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validator.checks import base as check
from validator.facts import DSPARK_DRAFT, LAUNCH, LOG, SERVER, SGLANG, DSparkDraftFacts, Facts
from validator.pack_schema import DSparkExpect
from validator.server_settings import ServerArgs, logged_settings

DSPARK = "DSPARK"


def verify_width(block_size: int | None, args: Mapping[str, Any]) -> tuple[int, str]:
    """The verify width SGLang resolves for DSPARK (``_handle_dspark``): ``--speculative-dspark-block-size``
    (gamma) else the draft's block size, plus one; else ``--speculative-num-draft-tokens``; else the
    default gamma 7 plus one. Returns (width, where it came from)."""
    flag = args.get("speculative_dspark_block_size")
    tokens = args.get("speculative_num_draft_tokens")
    if isinstance(flag, int) and flag > 0:
        return flag + 1, f"--speculative-dspark-block-size {flag} + 1"
    if block_size is not None and block_size > 0:
        return block_size + 1, f"the draft's block size {block_size} + 1"
    if isinstance(tokens, int):
        return tokens, f"--speculative-num-draft-tokens {tokens}"
    return DEFAULT_GAMMA + 1, f"SGLang's default gamma {DEFAULT_GAMMA} + 1 (no block size found)"


DEFAULT_GAMMA = 7  # srt/speculative/dspark_components/dspark_config.py: DEFAULT_DSPARK_GAMMA


def width_conflict(block_size: int | None, args: Mapping[str, Any]) -> str | None:
    """``_handle_dspark`` refuses to start when --speculative-num-draft-tokens is not gamma + 1."""
    flag = args.get("speculative_dspark_block_size")
    gamma = flag if isinstance(flag, int) and flag > 0 else block_size
    tokens = args.get("speculative_num_draft_tokens")
    if gamma is not None and isinstance(tokens, int) and tokens != gamma + 1:
        return (
            f"DSpark speculative_num_draft_tokens must equal gamma + 1 (= {gamma + 1} for gamma={gamma}), "
            f"but got speculative_num_draft_tokens={tokens}"
        )
    return None


def ring_problems(ring_len: Any, width: int) -> list[str]:
    """SGLang's own two ring rules (``memory_pool.py``, KDA with ``--enable-linear-replayssm-spec``), in
    its words: a power of two (``L & (L - 1) == 0``), and ``L >= 2 * N`` with N the draft-token count."""
    if not isinstance(ring_len, int) or isinstance(ring_len, bool):
        return [f"--linear-replayssm-cache-len is {ring_len!r}, not an integer"]
    problems = []
    if ring_len & (ring_len - 1) != 0:
        problems.append(f"spec-verify ring length must be a power of two, got {ring_len}")
    if ring_len < 2 * width:
        problems.append(f"spec-verify ring too small: {ring_len} < 2 * {width} (early-flush margin)")
    return problems


def smallest_ring(width: int) -> int:
    """The smallest ring length SGLang accepts for a verify width: the power of two >= 2 x width."""
    n = 1
    while n < 2 * width:
        n *= 2
    return n


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
    # a DSpark draft is any class the installed build registers as one (0.5.23's models/dspark.py
    # EntryClass: DSparkDraftModel, Qwen3DSparkModel, LingDSparkModel, one implementation whose tag names
    # only the target family); the pack's list stands in only where the build was not read
    known = registered if registered else d.draft_architectures
    shape = _shape_problems(draft, ctx, strict=arch not in d.draft_architectures)
    ev.update(draft_vocab_size=draft.vocab_size, draft_hidden_size=draft.hidden_size)
    if arch not in known:
        if registered and arch in d.draft_architectures:
            problems.append(f"the installed SGLang registers no DSpark draft class {arch}")
        else:
            problems.append(
                f"the draft at {draft.path} is {arch or 'no architecture'}, not a DSpark draft "
                f"({', '.join(known)})"
            )
    else:
        problems += shape
        if not draft.markov_rank:
            problems.append("the draft's markov_rank is not > 0: DSpark refuses it at start")
        if draft.mask_token_id is None:
            problems.append("the draft's config sets no mask_token_id: DSpark refuses it at start")
        if draft.block_size != d.block_size:
            problems.append(f"the draft's block size is {draft.block_size}, the recipe's {d.block_size}")
    return problems, None


def _shape_problems(draft: DSparkDraftFacts, ctx: check.CheckContext, *, strict: bool) -> list[str]:
    """The draft's vocabulary and hidden size against the target's LM head (``lm_head_shape``): DSpark
    runs the draft on the target's embedding and head. ``strict``: a class the pack does not name is
    accepted on its shape alone, so an unstated size is a problem too."""
    want = ctx.expect.checkpoint.lm_head_shape if ctx.expect.checkpoint is not None else None
    if want is None or len(want) != 2:
        return []
    problems = []
    for name, got, need in (
        ("vocab_size", draft.vocab_size, want[0]),
        ("hidden_size", draft.hidden_size, want[1]),
    ):
        if got is None and strict:
            problems.append(f"the draft's config states no {name} (the target's is {need})")
        elif got is not None and got != need:
            problems.append(
                f"the draft's {name} is {got}, the target's {need}: it cannot run on the target's head"
            )
    return problems


def dspark_config_preflight(facts: Facts, ctx: check.CheckContext, args: ServerArgs) -> check.Outcome:
    """DSPARK as the recipe runs it. SGLang resolves steps and topk to 1 and the draft-token count to the
    draft's block size + 1 (``_handle_dspark``): unset is right; a different explicit value is overridden
    with a warning (steps, topk: a warning here) or refused at start (draft tokens: a failure)."""
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
    # SGLang logs a warning and runs with 1 ("DSpark only supports speculative_num_steps == 1; overriding"):
    # the server runs the recipe, the command line misleads whoever reads it
    overridden = [
        f"--speculative-{name} {got} is overridden to 1 (DSpark supports only 1)"
        for name, got in (
            ("num-steps", args.speculative_num_steps),
            ("eagle-topk", args.speculative_eagle_topk),
        )
        if got is not None and got != 1
    ]
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
            "speculative settings differ from the recipe: " + "; ".join(problems + overridden), sources, **ev
        )
    assert draft is not None
    if overridden:
        return check.warned("; ".join(overridden) + ": the server runs the recipe's DSpark", sources, **ev)
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
        registered = facts.sglang.dspark_draft_classes if facts.sglang is not None else None
        if arch not in (registered or d.draft_architectures) and flag is None:
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
    elif (dead := dead_start(facts)) is not None:
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


def dead_start(facts: Facts) -> tuple[ServerArgs, str] | None:
    """The resolved args of the start the log shows dying before it was ready (that server is never
    reached), and the words saying so; None when the server answered or the log shows no such start."""
    log = facts.log
    if facts.server is not None or log is None or log.start_failure is None:
        return None
    args = logged_settings(log)
    return None if args is None else (args, f" (the start logged in {log.path} died: {log.start_failure})")


def dspark_shared_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """DSpark's draft shares the target's LM-head *module* by construction (``attach_shared_modules``),
    unless its class sets ``uses_own_vocab_modules``; the FP8-head trap of NEXTN does not arise, but a
    draft with its own head is not the recipe."""
    assert facts.launch is not None
    if (facts.launch.settings.speculative_algorithm or "").upper() != DSPARK:
        return check.skipped("the launch command does not run DSPARK (see spec.config)", [LAUNCH])
    sg = facts.sglang
    if sg is None or sg.root is None:
        return check.errored(
            f"cannot inspect the DSpark worker: {check.sglang_note(facts)}", [LAUNCH, SGLANG]
        )
    draft = facts.dspark_draft
    arch = draft.architectures[0] if draft is not None and draft.architectures else None
    classes = sg.dspark_draft_classes or {}
    ev: dict[str, Any] = {
        "sglang_version": sg.version,
        "attach_shared_modules": sg.dspark_attaches_lm_head,
        "draft_class": arch,
        "uses_own_vocab_modules": classes.get(arch) if arch else None,
    }
    if sg.dspark_supported is False:
        return check.failed(
            f"SGLang {sg.version} at {sg.root} has no DSPARK speculative algorithm (no DSpark worker, no "
            "DSPARK in srt/speculative/spec_info.py): the server refuses --speculative-algorithm DSPARK",
            [SGLANG],
            **ev,
        )
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
