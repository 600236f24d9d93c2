"""In-memory MTP round simulator for the probe's statistics tests and bench/probe_verdict.py.

Each verify round accepts a prefix of the K drafts: draft i+1 is accepted only if draft i was, each with
probability p (the usual model of speculative acceptance, the simulator's own: ``p`` comes from
``validator.sim.decode.chain_probability``). A request's p varies around the case's mean
(some prompts are more predictable than others). Output is SGLang's ``meta_info`` shape, so the real
probe loop runs unchanged against it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from validator.probe import ProbePrompt
from validator.sim.decode import chain_probability
from validator.sources.server.client import Generation

K = 3


def draw_round(rng: random.Random, p: float, k: int = K) -> int:
    c = 0
    while c < k and rng.random() < p:
        c += 1
    return c


@dataclass
class SimCase:
    name: str
    mean_len: float  # the server's true mean acceptance length
    jitter: float = 0.3  # per-request spread of the mean (uniform +/-)
    k: int = K  # drafts per verify round: NEXTN 3 (num_draft_tokens 4), DSpark its block size (8)


class SimServer:
    """A fake ``generate`` callable: one request at a time, as the probe sends them."""

    def __init__(self, case: SimCase, seed: int, stop_tokens: int = 3) -> None:
        self.case = case
        self.rng = random.Random(seed)
        self.stop_tokens = stop_tokens
        self.requests = 0

    async def __call__(self, payload: dict[str, object]) -> Generation:
        sp = payload["sampling_params"]
        assert isinstance(sp, dict) and sp["temperature"] == 0
        max_new = int(sp["max_new_tokens"])
        text = str(payload["text"])
        should_stop = "Answer" in text  # the expect_stop prompts end with "Answer:"
        limit = min(max_new, self.stop_tokens) if should_stop else max_new
        self.requests += 1
        mean, k = self.case.mean_len, self.case.k
        if mean > 1.0:
            mean = min(1 + k, max(1.0, mean + self.rng.uniform(-self.case.jitter, self.case.jitter)))
        p = chain_probability(mean, k) if mean > 1.0 else 0.0
        tokens, verify, correct = 1, 0, 0  # the first token comes from prefill
        while tokens < limit:
            c = draw_round(self.rng, p, k)
            verify += 1
            correct += c
            tokens += 1 + c
        tokens = min(tokens, limit)
        meta: dict[str, object] = {
            "id": f"sim-{self.requests}",
            "finish_reason": {"type": "stop" if should_stop else "length"},
            "completion_tokens": tokens,
            "prompt_tokens": 20,
            "e2e_latency": 0.02 + 0.01 * verify,
            "first_token_latency": 0.02,
        }
        if verify:
            meta.update(
                spec_verify_ct=verify,
                spec_num_correct_drafts=correct,
                spec_num_proposed_drafts=verify * k,
                spec_accept_length=tokens / verify,
                spec_accept_rate=correct / (verify * k),
            )
        words = " ".join(f"w{self.rng.randrange(1000)}" for _ in range(tokens))
        return Generation(text=words, output_ids=list(range(tokens)), meta_info=meta)


def sim_prompts(n: int = 16, max_new_tokens: int = 32) -> list[ProbePrompt]:
    return [ProbePrompt(f"p{i}", f"prompt {i}", max_new_tokens) for i in range(n)]
