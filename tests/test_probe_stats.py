from __future__ import annotations

import asyncio
import math
import random

import pytest

from tests.support.probe_sim import SimCase, SimServer, draw_round
from validator.probe import load_prompts, probe_verdict, run_probe
from validator.probe_stats import Decision, RuleConfig, SequentialRule, kl_bernoulli, kl_lower, kl_upper
from validator.sim.decode import chain_probability

RUNS = 200
PROMPTS = load_prompts()


def _run(case: SimCase, seed: int) -> tuple[Decision, int]:
    r = asyncio.run(run_probe(SimServer(case, seed), PROMPTS))
    return probe_verdict(r), r.completion_tokens


@pytest.mark.parametrize("case", [SimCase("broken", 1.0)])
def test_broken_fails_within_64_tokens_every_time(case: SimCase) -> None:
    results = [_run(case, seed) for seed in range(RUNS)]
    assert all(d is Decision.FAIL for d, _ in results)
    assert max(t for _, t in results) <= 64


@pytest.mark.parametrize("mean", [2.68, 2.7, 3.05, 3.5, 3.9])
def test_healthy_passes_within_256_tokens_every_time(mean: float) -> None:
    results = [_run(SimCase(f"healthy-{mean}", mean), seed) for seed in range(RUNS)]
    assert [d for d, _ in results].count(Decision.PASS) == RUNS
    assert max(t for _, t in results) <= 256


def test_garbage_that_matches_by_chance_still_fails() -> None:
    # a garbage draft still hits now and then; the KL bound (not only the zero rule) must catch it
    rule = SequentialRule()
    rng = random.Random(7)
    decision = Decision.UNDECIDED
    for _ in range(20):
        rounds = [draw_round(rng, 0.02) for _ in range(31)]
        a = rule.update(31, sum(rounds))
        decision = a.decision
        if decision is not Decision.UNDECIDED:
            break
    assert decision is Decision.FAIL and rule.verify_ct <= 124


def test_marginal_server_is_never_passed() -> None:
    # true acceptance 1.3 < 1.5: a wrong verdict would be a pass; undecided at the cap is acceptable
    verdicts = [_run(SimCase("marginal", 1.3, jitter=0.1), seed)[0] for seed in range(RUNS)]
    assert Decision.PASS not in verdicts and verdicts.count(Decision.FAIL) > 0


def test_zero_rule_needs_enough_rounds() -> None:
    rule = SequentialRule(RuleConfig(zero_rounds=24))
    assert rule.update(10, 0).decision is Decision.UNDECIDED
    a = rule.update(14, 0)
    assert a.decision is Decision.FAIL and "zero correct drafts in 24" in a.reason and a.accept_length == 1.0


def test_one_request_never_passes() -> None:
    a = SequentialRule().update(100, 290)
    assert a.decision is Decision.UNDECIDED and a.ci is not None and a.ci[0] > 1.5


def test_kl_bounds() -> None:
    assert kl_bernoulli(0.3, 0.3) == 0.0 and kl_bernoulli(0.0, 0.5) == pytest.approx(math.log(2))
    # with zero successes the KL upper bound equals the exact binomial bound 1 - delta^(1/n)
    assert kl_upper(0.0, 30, math.log(100)) == pytest.approx(1 - 0.01 ** (1 / 30), abs=1e-9)
    lo, hi = kl_lower(0.5, 100, math.log(100)), kl_upper(0.5, 100, math.log(100))
    assert 0.3 < lo < 0.5 < hi < 0.7 and hi - 0.5 == pytest.approx(0.5 - lo, abs=1e-6)
    assert kl_upper(0.2, 0, 1.0) == 1.0 and kl_lower(0.2, 0, 1.0) == 0.0


def test_interval_covers_truth_in_simulation() -> None:
    # coverage of the single-look interval at alpha=0.01 (each side 0.005/... by spending): >= 99%
    rng = random.Random(1)
    p = chain_probability(2.7)
    misses = 0
    for _ in range(300):
        rule = SequentialRule()
        n = 60
        c = sum(draw_round(rng, p) for _ in range(n))
        a = rule.update(n, c)
        assert a.ci is not None
        misses += not (a.ci[0] <= 2.7 <= a.ci[1])
    assert misses <= 3
