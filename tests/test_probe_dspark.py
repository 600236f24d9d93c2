"""The acceptance probe on DSpark: K = 8 drafts per verify round (the draft's block size), the DSpark packs'
threshold 2.0, 200 seeded runs per case: never a wrong verdict; a broken drafter fails fast and every
published workload mean (3.5 prose to 6.4 code, macro mean 5.29) is never failed."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.probe_sim import SimCase, SimServer
from validator.probe import ProbeConfig, load_prompts, probe_verdict, run_probe
from validator.probe_stats import Decision

RUNS = 200
PROMPTS = load_prompts()
DSPARK = ProbeConfig(threshold=2.0, num_draft_tokens=9)


def _verdicts(case: SimCase) -> list[tuple[Decision, int]]:
    out = []
    for seed in range(RUNS):
        r = asyncio.run(run_probe(SimServer(case, seed), PROMPTS, DSPARK))
        out.append((probe_verdict(r), r.completion_tokens))
    return out


def test_broken_drafter_fails_every_time_within_64_tokens() -> None:
    results = _verdicts(SimCase("broken", 1.0, k=8))
    assert all(d is Decision.FAIL for d, _ in results) and max(t for _, t in results) <= 64


@pytest.mark.parametrize("mean", [5.29, 6.4])
def test_typical_drafter_passes_every_time(mean: float) -> None:
    results = _verdicts(SimCase(f"healthy-{mean}", mean, k=8))
    assert all(d is Decision.PASS for d, _ in results) and max(t for _, t in results) <= 256


def test_slowest_workload_is_never_failed() -> None:
    verdicts = [d for d, _ in _verdicts(SimCase("prose", 3.5, k=8))]
    assert Decision.FAIL not in verdicts and verdicts.count(Decision.PASS) >= RUNS * 0.9


def test_marginal_drafter_is_never_passed() -> None:
    verdicts = [d for d, _ in _verdicts(SimCase("marginal", 1.6, jitter=0.1, k=8))]
    assert Decision.PASS not in verdicts
