"""The decode model: how many drafts each verify round accepts, how long steps take, and what text comes out.

Step and round costs are calibrated to the published DGX Spark figures (``domain.md``; the constants below).
Acceptance per round is a chain: each of ``K`` drafts is accepted with probability ``p`` if all earlier ones
were, so ``E[k + 1]`` is the scenario's mean accept length; the first token comes from prefill. Draws use a
``random.Random`` seeded by the simulator seed and the request, so concurrency changes nothing.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from validator.sim.scenarios import VOCAB, Scenario

# One verify round in decode steps of 22.76 ms, calibrated to the published throughputs (domain.md):
VERIFY_COST_GREEDY = 9.72 * 3.90 / 22.76  # synthetic greedy: 9.72 ms TPOT at 3.90 (102.9 tok/s)
VERIFY_COST_SAMPLED = 18.56 * 2.68 / 22.76  # GSM8K-like, temperature 0.6: 18.56 ms TPOT at 2.68 (53.9 tok/s)
VERIFY_COST_BROKEN = 1000.0 / 24.0 / 22.76  # broken draft: 24.0 tok/s at accept length 1.00
VERIFY_COST_DSPARK = 6.4 * 1000.0 / 72.0 / 22.76  # DSpark: 72 tok/s at ~6.4 (code); 40 at ~3.5 gives 3.84

# (resolved MoE backend, head precision) -> ms per decode step at batch 1
_STEP_MS: dict[tuple[str, str], float] = {
    ("flashinfer_mxfp4", "fp32"): 27.71,
    ("flashinfer_mxfp4", "bf16"): 27.71,
    ("flashinfer_mxfp4", "fp8"): 27.71 - (25.35 - 22.76),
    ("humming", "fp32"): 25.35,
    ("humming", "bf16"): 25.35,
    ("humming", "fp8"): 22.76,
}

_SYLLABLES = (
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "xe", "qu", "bo", "fi", "gu", "ze",
)  # fmt: skip


def step_ms(scenario: Scenario) -> float:
    return _STEP_MS.get((scenario.moe_backend, scenario.head_precision), 27.71)


def verify_ms(scenario: Scenario, temperature: float = 0.0) -> float:
    if scenario.published_tpot_ms is not None and not scenario.drafter_broken:
        return scenario.published_tpot_ms * scenario.accept_mean(temperature)
    if scenario.dspark:
        factor = VERIFY_COST_DSPARK  # the block is drafted and verified whatever the drafter's quality
    elif scenario.draft_broken:
        factor = VERIFY_COST_BROKEN
    else:
        factor = VERIFY_COST_GREEDY if temperature <= 0.0 else VERIFY_COST_SAMPLED
    return factor * step_ms(scenario)


def ttft_s(prompt_tokens: int) -> float:
    """Prefill time: about 0.21 s for a GSM8K 5-shot prompt (~900 tokens), growing with the prompt."""
    return 0.19 + 2.0e-5 * prompt_tokens


def chain_probability(mean_length: float, drafts: int = 3) -> float:
    """Per-draft acceptance ``p`` such that ``1 + p + ... + p^drafts == mean_length`` (bisection)."""
    target = mean_length - 1.0
    if target <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(1, drafts + 1)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: about one token per 4 characters, at least 1."""
    return max(1, (len(text) + 3) // 4)


@dataclass
class Decoded:
    """One request's outcome: tokens, text, and the per-round acceptance SGLang would report."""

    output_ids: list[int]
    text: str
    prompt_tokens: int
    rounds: list[int] = field(default_factory=list)  # accepted drafts per verify round (0..K)
    ttft_s: float = 0.0
    decode_s: float = 0.0  # time from the first token to the last
    stopped: bool = False  # ended at EOS (a grammar's end) rather than at max_new_tokens

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def verify_ct(self) -> int:
        return len(self.rounds)

    @property
    def correct_drafts(self) -> int:
        return sum(self.rounds)

    def histogram(self) -> list[int]:
        """``spec_correct_drafts_histogram``: ``h[k]`` verify rounds accepted ``k`` drafts; the list grows to
        the largest ``k`` seen (``Req.update_spec_correct_drafts_histogram``, schedule_batch.py:1566-1572)."""
        hist = [0] * (max(self.rounds, default=-1) + 1)
        for k in self.rounds:
            hist[k] += 1
        return hist


CLOSED_ANSWER_TOKENS = 3


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def word(token_id: int) -> str:
    """The text of one simulated token."""
    a = _SYLLABLES[token_id % 16]
    b = _SYLLABLES[(token_id // 16) % 16]
    return a + b if token_id % 3 else a + b + _SYLLABLES[(token_id // 256) % 16]


def decode(
    scenario: Scenario,
    *,
    seed: int,
    prompt: str,
    max_new_tokens: int,
    temperature: float,
    sampling_seed: int | None = None,
    constrained: str | None = None,
) -> Decoded:
    """Simulate one request end to end (no sleeping here; the app sleeps by the returned times).

    ``constrained`` is the whole text a grammar (``json_schema``) forces: generation stops at its end
    (EOS), or is cut at ``max_new_tokens`` like any other."""
    prompt_tokens = count_tokens(prompt)
    n = max(1, max_new_tokens)
    stopped = False
    if constrained is not None:
        needed = count_tokens(constrained)
        stopped = needed <= n
        n = min(n, needed)
    elif not scenario.degenerate and prompt.rstrip().endswith("Answer:") and n > CLOSED_ANSWER_TOKENS:
        # A closed question ("...\nAnswer:") gets a short answer and EOS, as a working model gives it; a
        # degenerate server never stops (what the probe's stop rule catches).
        stopped, n = True, CLOSED_ANSWER_TOKENS
    extra = () if constrained is None else (constrained,)
    rng = _rng(seed, prompt, n, temperature, sampling_seed, *extra)
    ids = [0] * n if scenario.degenerate else [rng.randrange(1000, VOCAB) for _ in range(n)]
    rounds: list[int] = []
    if scenario.spec:
        drafts = scenario.drafts_per_verify
        p = chain_probability(scenario.accept_mean(temperature), drafts)
        produced = 1  # the first token comes from prefill
        while produced < n:
            k = 0
            while k < drafts and rng.random() < p:
                k += 1
            rounds.append(k)
            produced += k + 1
        decode_s = len(rounds) * verify_ms(scenario, temperature) / 1000.0
    else:
        decode_s = (n - 1) * step_ms(scenario) / 1000.0
    if constrained is not None:
        text = constrained if stopped else constrained[: n * 4]
    else:
        text = "!" * n if scenario.degenerate else " ".join(word(t) for t in ids)
    return Decoded(ids, text, prompt_tokens, rounds, ttft_s(prompt_tokens), decode_s, stopped)


def stream_chunks(d: Decoded) -> list[int]:
    """How many new tokens each streamed chunk carries: the prefill token, then one chunk per round."""
    if not d.rounds:
        return [1] * d.completion_tokens
    chunks = [1]
    left = d.completion_tokens - 1
    for k in d.rounds:
        take = min(k + 1, left)
        if take <= 0:
            break
        chunks.append(take)
        left -= take
    return chunks
