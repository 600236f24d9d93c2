"""The sequential rule that decides the acceptance probe: is the acceptance length above the threshold?

Each verify round accepts ``c`` of ``K`` drafts, so acceptance length is ``1 + K * mean(c / K)``, a mean of
a ``[0, 1]`` variable; SGLang's per-request sums are what a bound needs. Chernoff-Hoeffding in KL form
(Hoeffding 1963, Thm. 1; holds for martingales), exact binomial at ``c = 0`` where the trap lives. Looked at
after every request: look ``j`` spends ``alpha / (j (j + 1))``, a confidence sequence. ``fail`` when the
upper bound is below the threshold, ``pass`` when the lower is above (and ``min_requests_to_pass``
prompts ran). Zero correct drafts over ``zero_rounds`` rounds (the FP8-read-as-BF16 trap) is decisive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


class Decision(str, Enum):
    """The rule's call at one look: ``PASS``/``FAIL`` once a bound clears the threshold (or the zero-rounds
    trap fires); ``UNDECIDED`` otherwise, including a lower bound above it from too few distinct prompts,
    and then the probe runs on until its token or time cap."""

    PASS = "pass"
    FAIL = "fail"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class RuleConfig:
    threshold: float = 1.5  # acceptance length (tokens per verify round)
    num_drafts: int = 3  # K = speculative_num_draft_tokens - 1
    alpha: float = 0.01  # total error probability of the confidence sequence
    zero_rounds: int = 24  # zero correct drafts over this many rounds: the broken trap
    min_requests_to_pass: int = 2


@dataclass(frozen=True)
class Assessment:
    decision: Decision
    reason: str
    accept_length: float | None  # 1 + correct / verify_ct so far
    ci: tuple[float, float] | None  # bounds on acceptance length at this look


def kl_bernoulli(p: float, q: float) -> float:
    """KL divergence between Bernoulli(p) and Bernoulli(q), with the 0 log 0 = 0 convention."""
    eps = 1e-15
    q = min(max(q, eps), 1 - eps)
    out = 0.0
    if p > 0:
        out += p * math.log(p / q)
    if p < 1:
        out += (1 - p) * math.log((1 - p) / (1 - q))
    return out


def _kl_bound(mean: float, n: int, log_inv_delta: float, far: float) -> float:
    """The q between ``mean`` and ``far`` (1.0 or 0.0) farthest from ``mean`` with
    n * kl(mean, q) <= log(1/delta), by bisection: kl(mean, q) grows as q moves away from ``mean``, so the
    bracket [near, far] keeps the boundary inside it (60 halvings: below float resolution)."""
    if n <= 0:
        return far
    near = mean
    for _ in range(60):
        mid = (near + far) / 2
        if n * kl_bernoulli(mean, mid) > log_inv_delta:
            far = mid
        else:
            near = mid
    return far


def kl_upper(mean: float, n: int, log_inv_delta: float) -> float:
    """Largest q >= mean with n * kl(mean, q) <= log(1/delta): an upper confidence bound."""
    return _kl_bound(mean, n, log_inv_delta, 1.0)


def kl_lower(mean: float, n: int, log_inv_delta: float) -> float:
    """Smallest q <= mean with n * kl(mean, q) <= log(1/delta): a lower confidence bound."""
    return _kl_bound(mean, n, log_inv_delta, 0.0)


class SequentialRule:
    """Feed per-request sums with :meth:`update`; each call is one look and returns the assessment."""

    def __init__(self, config: RuleConfig | None = None) -> None:
        self.config = config or RuleConfig()
        if self.config.num_drafts < 1:
            raise ValueError("num_drafts must be >= 1")
        self.verify_ct = 0
        self.correct = 0
        self.requests = 0  # each update is one look

    def update(self, verify_ct: int, correct: int, num_drafts: int | None = None) -> Assessment:
        """Add one request's ``spec_verify_ct`` and ``spec_num_correct_drafts``; ``correct`` is clipped to
        what ``verify_ct`` rounds could accept."""
        k = num_drafts or self.config.num_drafts
        self.verify_ct += max(0, verify_ct)
        self.correct += min(max(0, correct), max(0, verify_ct) * k)
        self.requests += 1
        return self.assess()

    def assess(self) -> Assessment:
        cfg = self.config
        k = cfg.num_drafts
        n = self.verify_ct
        if n == 0:
            return Assessment(Decision.UNDECIDED, "no verify rounds yet", None, None)
        mean = min(1.0, self.correct / (n * k))
        length = 1 + self.correct / n
        j = max(1, self.requests)
        log_inv = math.log(2 * j * (j + 1) / cfg.alpha)  # alpha_j / 2 per side
        ci = (1 + k * kl_lower(mean, n, log_inv), 1 + k * kl_upper(mean, n, log_inv))
        if self.correct == 0 and n >= cfg.zero_rounds:
            return Assessment(
                Decision.FAIL,
                f"zero correct drafts in {n} verify rounds (draft proposals are garbage)",
                1.0,
                ci,
            )
        if ci[1] < cfg.threshold:
            return Assessment(
                Decision.FAIL,
                f"upper bound {ci[1]:.2f} < threshold {cfg.threshold:g} after {n} verify rounds",
                length,
                ci,
            )
        if ci[0] > cfg.threshold:
            if self.requests < cfg.min_requests_to_pass:
                return Assessment(
                    Decision.UNDECIDED,
                    f"lower bound above threshold after only {self.requests} request",
                    length,
                    ci,
                )
            return Assessment(
                Decision.PASS,
                f"lower bound {ci[0]:.2f} > threshold {cfg.threshold:g} after {n} verify rounds",
                length,
                ci,
            )
        return Assessment(
            Decision.UNDECIDED, f"interval {ci[0]:.2f}..{ci[1]:.2f} contains the threshold", length, ci
        )
