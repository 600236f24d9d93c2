"""The acceptance probe: does MTP speculation really accept drafts on this server, right now?

What speculation achieves is the only direct evidence the draft's LM head works. Fixed prompts
(``rules/probe-prompts.yaml``), batch 1, temperature 0; each reply's ``meta_info`` feeds the sequential
rule (:mod:`validator.probe_stats`) until settled, within caps on tokens, requests and time. SGLang's
lifetime ``avg_spec_accept_length`` is never the verdict (other traffic, lag). The text is checked too: a
server can answer 200 with garbage (empty, one repeated token, never stopping).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from validator.bounded_files import read_bounded, read_trusted_bounded
from validator.errors import InputError, UnavailableError
from validator.facts import PROBE, SERVER, ProbeResult
from validator.probe_stats import Decision, RuleConfig, SequentialRule
from validator.sources.gathering import Unreadable
from validator.sources.live_gathering import LiveGathering, live_source
from validator.sources.server.client import Generation, SGLangClient
from validator.yaml_safe import safe_load

_HERE = Path(__file__).resolve().parent
RUN_LENGTH = 16  # a run of this many identical characters or token ids is degenerate output
_CHAR_RUN_RE = re.compile(r"([^\s\-=_*#~.`])\1{" + str(RUN_LENGTH - 1) + ",}")

GenerateFn = Callable[[dict[str, Any]], Awaitable[Generation]]


@dataclass(frozen=True)
class ProbePrompt:
    id: str
    text: str
    max_new_tokens: int
    expect_stop: bool = False


@dataclass(frozen=True)
class ProbeConfig:
    threshold: float = 1.5
    alpha: float = 0.01
    num_draft_tokens: int = 4  # speculative_num_draft_tokens; K = this - 1
    zero_rounds: int = 24
    max_total_tokens: int = 512  # hard cap on generated tokens
    max_wall_s: float = 120.0  # hard cap on the probe's wall time
    max_requests: int = 32
    stream: bool = True  # stream /generate to measure TTFT client-side

    def rule(self) -> RuleConfig:
        return RuleConfig(
            threshold=self.threshold,
            num_drafts=max(1, self.num_draft_tokens - 1),
            alpha=self.alpha,
            zero_rounds=self.zero_rounds,
        )


def default_prompts_path() -> Path:
    return _HERE / "data" / "rules" / "probe-prompts.yaml"  # package data, beside the built-in packs


PROMPTS_CAP = 1024 * 1024  # the shipped file is about 2 KB


def load_prompts(path: str | Path | None = None) -> list[ProbePrompt]:
    """Read and validate the prompt file; any defect is an InputError naming the file (exit 65)."""
    p = Path(path) if path is not None else default_prompts_path()
    where = str(p)
    # Package data is the installation's; a pack's own prompt file (beside a pack named by path) decides
    # what the acceptance probe measures, so it is trusted only as the pack is: nobody but root and the
    # reading user can have written it or a directory above it.
    shipped = default_prompts_path().parent
    if p.absolute().parent == shipped:  # as written: a link elsewhere is judged there
        data = read_bounded(shipped / p.name, PROMPTS_CAP, "probe prompts")
    else:
        data = read_trusted_bounded(p, PROMPTS_CAP, "probe prompts")
    try:
        doc = safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(where, "not valid YAML", None if line is None else line + 1) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("prompts"), list) or not doc["prompts"]:
        raise InputError(where, "expected a mapping with a non-empty 'prompts' list")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InputError(where, "'defaults' must be a mapping")
    default_max = defaults.get("max_new_tokens", 32)
    out: list[ProbePrompt] = []
    seen: set[str] = set()
    for i, item in enumerate(doc["prompts"]):
        if not isinstance(item, dict):
            raise InputError(where, f"prompts[{i}]: expected a mapping")
        pid, text = item.get("id"), item.get("text")
        mnt = item.get("max_new_tokens", default_max)
        stop = item.get("expect_stop", False)
        if not isinstance(pid, str) or not pid or pid in seen:
            raise InputError(where, f"prompts[{i}]: 'id' must be a unique non-empty string")
        if not isinstance(text, str) or not text.strip():
            raise InputError(where, f"prompts[{i}] ({pid}): 'text' must be a non-empty string")
        if type(mnt) is not int or not 1 <= mnt <= 4096:
            raise InputError(where, f"prompts[{i}] ({pid}): 'max_new_tokens' must be an integer in 1..4096")
        if not isinstance(stop, bool):
            raise InputError(where, f"prompts[{i}] ({pid}): 'expect_stop' must be true or false")
        seen.add(pid)
        out.append(ProbePrompt(pid, text, mnt, stop))
    return out


def _int(meta: dict[str, Any], key: str) -> int | None:
    v = meta.get(key)
    return v if type(v) is int else None


def _num(meta: dict[str, Any], key: str) -> float | None:
    v = meta.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _finish_type(meta: dict[str, Any]) -> str | None:
    fr = meta.get("finish_reason")
    if isinstance(fr, dict):
        t = fr.get("type")
        return t if isinstance(t, str) else None
    return fr if isinstance(fr, str) else None


@dataclass(frozen=True)
class SpecReading:
    """One reply's speculative counts, whatever a build calls them."""

    verify_ct: int
    correct: int | None  # accepted drafts, excluding the bonus token; None: no way to tell
    drafts_per_verify: int | None  # K, when the reply says it


# Names builds give the count of accepted drafts and of proposed drafts (SGLang 0.5.x first, then the
# older or forked builds' names), and the acceptance histogram (``h[k]`` = verify rounds accepting k).
_CORRECT_KEYS = ("spec_num_correct_drafts", "spec_accept_token_num", "spec_accepted_drafts")
_PROPOSED_KEYS = ("spec_num_proposed_drafts", "spec_draft_token_num", "spec_proposed_drafts")
_HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")


def read_spec_meta(meta: dict[str, Any], *, default_drafts: int) -> SpecReading | None:
    """The speculative counts of one final ``meta_info``, or None without ``spec_verify_ct``.

    Accepted drafts from the most direct field present: a count, the histogram, ``completion_tokens -
    spec_verify_ct`` (older builds), or ``spec_accept_rate`` times drafts; ``default_drafts`` is K."""
    v = _int(meta, "spec_verify_ct")
    if not v:
        return None
    proposed = next((p for key in _PROPOSED_KEYS if (p := _int(meta, key)) is not None), None)
    hist = next((h for key in _HISTOGRAM_KEYS if isinstance(h := meta.get(key), list) and h), None)
    k = proposed // v if proposed and proposed % v == 0 else None
    if k is None and hist is not None and sum(hist) == v:
        k = len(hist) - 1 or None
    for key in _CORRECT_KEYS:
        c = _int(meta, key)
        if c is not None:
            return SpecReading(v, c, k)
    if hist is not None and sum(hist) == v and all(type(n) is int for n in hist):
        return SpecReading(v, sum(i * n for i, n in enumerate(hist)), k)
    ct = _int(meta, "completion_tokens")
    if ct is not None and ct >= v:
        return SpecReading(v, ct - v, k)
    rate = _num(meta, "spec_accept_rate")
    if rate is not None:
        return SpecReading(v, round(rate * (proposed or v * (k or default_drafts))), k)
    return SpecReading(v, None, k)


def degenerate(gen: Generation) -> str | None:
    """Why this output looks like garbage, or None."""
    if not gen.text.strip():
        return "empty text"
    m = _CHAR_RUN_RE.search(gen.text)
    if m:
        run = len(m.group(0))
        return f"a run of {run} x {m.group(1)!r}"
    ids = gen.output_ids or []
    best, cur = 1, 1
    for a, b in itertools.pairwise(ids):
        cur = cur + 1 if a == b else 1
        best = max(best, cur)
    if best >= RUN_LENGTH:
        return f"a run of {best} identical token ids"
    return None


async def run_probe(
    generate: GenerateFn,
    prompts: list[ProbePrompt],
    config: ProbeConfig | None = None,
) -> ProbeResult:
    """Send prompts one at a time until the sequential rule decides or a cap is hit."""
    cfg = config or ProbeConfig()
    rule = SequentialRule(cfg.rule())
    start = time.monotonic()
    problems: list[str] = []
    missing: list[str] = []
    tokens = requests = verify_ct = correct = 0
    stop_reason = "prompts exhausted"
    spec_inactive = False
    ttfts: list[float] = []
    decode_s = 0.0
    decode_tokens = 0
    stop_expected = stop_as_length = 0
    spec_seen = False
    last = None
    for prompt in prompts:
        if requests >= cfg.max_requests:
            stop_reason = f"request cap ({cfg.max_requests})"
            break
        if tokens >= cfg.max_total_tokens:
            stop_reason = f"token cap ({cfg.max_total_tokens})"
            break
        remaining = cfg.max_wall_s - (time.monotonic() - start)
        if remaining <= 0:
            stop_reason = f"time cap ({cfg.max_wall_s:g} s)"
            break
        budget = min(prompt.max_new_tokens, cfg.max_total_tokens - tokens)
        payload = {"text": prompt.text, "sampling_params": {"temperature": 0, "max_new_tokens": budget}}
        try:
            gen = await asyncio.wait_for(generate(payload), timeout=remaining)
        except asyncio.TimeoutError:
            stop_reason = f"time cap ({cfg.max_wall_s:g} s)"
            break
        requests += 1
        meta = gen.meta_info
        ct = _int(meta, "completion_tokens") or 0
        tokens += ct
        why = degenerate(gen)
        if why:
            problems.append(f"prompt {prompt.id}: degenerate output ({why})")
        if prompt.expect_stop:
            stop_expected += 1
            stop_as_length += _finish_type(meta) == "length"
        ttft = gen.ttft_s if gen.ttft_s is not None else _num(meta, "first_token_latency")
        e2e = _num(meta, "e2e_latency") or gen.wall_s
        if ttft is not None:
            ttfts.append(ttft)
            if e2e is not None and ct > 1 and e2e > ttft:
                decode_s += e2e - ttft
                decode_tokens += ct - 1
        reading = read_spec_meta(meta, default_drafts=cfg.rule().num_drafts)
        if reading is None:
            if ct >= 2 and not spec_seen:
                missing.append(
                    "/generate meta_info has no spec_verify_ct (speculation inactive, or a build that does "
                    "not report it)"
                )
                spec_inactive = True
                break
            continue
        spec_seen = True
        v, c, k = reading.verify_ct, reading.correct, reading.drafts_per_verify
        if c is None:
            note = f"prompt {prompt.id}: spec_verify_ct without a count of accepted drafts"
            if note not in missing:
                missing.append(note)
            continue
        verify_ct += v
        correct += c
        last = rule.update(v, c, k)
        if last.decision is not Decision.UNDECIDED:
            break
    if last is not None and last.decision is not Decision.UNDECIDED:
        decided_by = f"{last.decision.value}: {last.reason}"
    elif spec_inactive:
        decided_by = "no speculative statistics in the replies"
    else:
        decided_by = f"undecided: {stop_reason}" + (f" ({last.reason})" if last is not None else "")
    if stop_expected and stop_as_length == stop_expected:
        problems.append(
            f"finish_reason was 'length' on all {stop_expected} prompt(s) that should stop: "
            "output may be garbage"
        )
    k_all = cfg.rule().num_drafts
    return ProbeResult(
        accept_length=(1 + correct / verify_ct) if verify_ct else None,
        accept_rate=(correct / (verify_ct * k_all)) if verify_ct else None,
        requests=requests,
        completion_tokens=tokens,
        verify_ct=verify_ct,
        tpot_ms=(1000 * decode_s / decode_tokens) if decode_tokens else None,
        ttft_ms=(1000 * statistics.median(ttfts)) if ttfts else None,
        accept_length_ci=last.ci if last is not None else None,
        accept_length_reported=(tokens / verify_ct) if verify_ct else None,
        decided_by=decided_by,
        decision=last.decision.value if last is not None else "undecided",
        wall_s=time.monotonic() - start,
        problems=problems,
        missing_fields=missing,
    )


def probe_verdict(result: ProbeResult) -> Decision:
    """The sequential rule's verdict on this result."""
    return Decision(result.decision)


async def probe_server(
    client: SGLangClient, prompts: list[ProbePrompt] | None = None, config: ProbeConfig | None = None
) -> ProbeResult:
    """Run the probe against a live server through ``client``."""
    cfg = config or ProbeConfig()
    gen = client.generate_stream if cfg.stream else client.generate
    return await run_probe(gen, prompts if prompts is not None else load_prompts(), cfg)


@live_source(PROBE, 80, needs=(SERVER,), applies=LiveGathering.probed)
async def gather(g: LiveGathering) -> None:
    """The probe as the live job's source: the pack's settings and prompts (parsed in a worker thread, off
    the sidecar's event loop), the draft count the server reports. Nothing is probed for a pack that lists
    no check reading the probe."""
    settings, threshold, prompts_file = g.probe, g.accept_length_min, g.probe_prompts
    if settings is None or threshold is None or prompts_file is None:
        return
    draft_tokens = g.server.server_info.get("speculative_num_draft_tokens")
    config = ProbeConfig(
        threshold=threshold,
        alpha=1.0 - settings.confidence,
        num_draft_tokens=draft_tokens if isinstance(draft_tokens, int) and draft_tokens > 1 else 4,
        max_total_tokens=settings.max_total_tokens,
        max_wall_s=settings.max_seconds,
    )
    try:
        loaded_prompts = await asyncio.to_thread(load_prompts, prompts_file)
        prompts = [
            replace(p, max_new_tokens=min(p.max_new_tokens, settings.max_new_tokens)) for p in loaded_prompts
        ]
        g.facts.probe = await probe_server(g.client, prompts, config)
    except (UnavailableError, InputError) as exc:
        raise Unreadable(str(exc)) from None
