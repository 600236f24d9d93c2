from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from validator.errors import InputError
from validator.probe import (
    ProbeConfig,
    ProbePrompt,
    default_prompts_path,
    degenerate,
    load_prompts,
    probe_server,
    probe_verdict,
    run_probe,
)
from validator.probe_stats import Decision
from validator.sim import runner as sim_runner
from validator.sources.server.client import Generation, SGLangClient
from validator.sources.server.readiness import wait_until_ready
from validator.validation import dump

KEY = "sk-probe-44aa55bb"


def _gen(text: str = "fine words here", **meta: Any) -> Generation:
    return Generation(text=text, output_ids=None, meta_info={"completion_tokens": 32, **meta})


class Fake:
    def __init__(self, gens: list[Generation], delay: float = 0.0) -> None:
        self.gens = gens
        self.delay = delay
        self.payloads: list[dict[str, Any]] = []

    async def __call__(self, payload: dict[str, Any]) -> Generation:
        self.payloads.append(payload)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.gens[min(len(self.payloads) - 1, len(self.gens) - 1)]


PROMPTS = [ProbePrompt(f"p{i}", f"prompt {i}", 32) for i in range(8)]


def test_shipped_prompts_are_valid_and_varied() -> None:
    prompts = load_prompts()
    assert default_prompts_path().name == "probe-prompts.yaml"
    assert 8 <= len(prompts) <= 32 and len({p.text for p in prompts}) == len(prompts)
    assert sum(p.expect_stop for p in prompts) >= 2 and not prompts[0].expect_stop
    assert sum(p.max_new_tokens for p in prompts) <= ProbeConfig().max_total_tokens


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ("prompts: []", "non-empty 'prompts' list"),
        ("prompts:\n  - {id: a, text: x}\n  - {id: a, text: y}", "unique"),
        ("prompts:\n  - {id: a, text: x, max_new_tokens: 0}", "max_new_tokens"),
        ("prompts:\n  - {id: a, text: '  '}", "'text'"),
        ("prompts: [\n", "not valid YAML"),
    ],
)
def test_bad_prompt_files(tmp_path: Path, doc: str, reason: str) -> None:
    p = tmp_path / "prompts.yaml"
    p.write_text(doc)
    with pytest.raises(InputError) as err:
        load_prompts(p)
    assert str(err.value).startswith(str(p)) and reason in str(err.value) and err.value.exit_code == 65


def test_payload_is_greedy_bounded_and_sequential() -> None:
    fake = Fake([_gen(spec_verify_ct=31, spec_num_correct_drafts=0, spec_num_proposed_drafts=93)])
    r = asyncio.run(run_probe(fake, PROMPTS, ProbeConfig(max_total_tokens=40)))
    assert fake.payloads[0] == {
        "text": "prompt 0",
        "sampling_params": {"temperature": 0, "max_new_tokens": 32},
    }
    assert probe_verdict(r) is Decision.FAIL and r.requests == 1 and r.accept_length == 1.0
    assert r.accept_rate == 0.0 and r.verify_ct == 31 and r.accept_length_reported == pytest.approx(32 / 31)


def test_replies_without_spec_fields_are_missing_evidence_not_bad_text() -> None:
    """No spec_verify_ct: speculation is off or the build does not report it. Either way the reading is
    missing (spec.accept_length errors), and nothing is said about the text (probe.output passes)."""
    r = asyncio.run(run_probe(Fake([_gen()]), PROMPTS))
    assert r.decided_by == "no speculative statistics in the replies" and r.accept_length is None
    assert r.requests == 1 and r.problems == []
    assert any("no spec_verify_ct" in m for m in r.missing_fields)
    assert probe_verdict(r) is Decision.UNDECIDED


def test_degenerate_outputs_are_named() -> None:
    assert degenerate(_gen("")) == "empty text"
    assert degenerate(_gen("ok " + "!" * 20)) == "a run of 20 x '!'"
    assert degenerate(Generation("a b", [5] * 16, {})) == "a run of 16 identical token ids"
    assert degenerate(_gen("a markdown rule\n----------------------\nand more")) is None
    spec = {"spec_verify_ct": 12, "spec_num_correct_drafts": 20}
    r = asyncio.run(run_probe(Fake([_gen("!" * 32, **spec)]), PROMPTS))
    assert any("degenerate output (a run of 32 x '!')" in p for p in r.problems)


def test_finish_reason_always_length_on_stop_prompts() -> None:
    prompts = [ProbePrompt("s1", "q1", 16, True), ProbePrompt("s2", "q2", 16, True)]
    spec: dict[str, Any] = {
        "spec_verify_ct": 5,
        "spec_num_correct_drafts": 10,
        "finish_reason": {"type": "length"},
    }
    r = asyncio.run(run_probe(Fake([_gen(**spec)]), prompts))
    assert any("'length' on all 2 prompt(s) that should stop" in p for p in r.problems)
    spec["finish_reason"] = {"type": "stop", "matched": 1}
    assert not asyncio.run(run_probe(Fake([_gen(**spec)]), prompts)).problems


def test_time_cap_stops_a_stuck_server() -> None:
    fake = Fake([_gen(spec_verify_ct=12, spec_num_correct_drafts=20)], delay=5)
    r = asyncio.run(run_probe(fake, PROMPTS, ProbeConfig(max_wall_s=0.2)))
    assert r.requests == 0 and r.decided_by == "undecided: time cap (0.2 s)" and r.wall_s is not None
    assert r.wall_s < 2


def test_latency_figures() -> None:
    gens = [
        Generation(
            "w " * 10,
            None,
            {"completion_tokens": 11, "e2e_latency": 1.2, "spec_verify_ct": 5, "spec_num_correct_drafts": 5},
            ttft_s=0.2,
        ),
        Generation(
            "w " * 10,
            None,
            {
                "completion_tokens": 21,
                "e2e_latency": 2.4,
                "spec_verify_ct": 8,
                "spec_num_correct_drafts": 12,
                "first_token_latency": 0.4,
            },
        ),
    ]
    r = asyncio.run(run_probe(Fake(gens), PROMPTS[:2]))
    assert r.ttft_ms == pytest.approx(300.0)  # median of 0.2 s (client-side) and 0.4 s (meta_info)
    assert r.tpot_ms == pytest.approx(1000 * (1.0 + 2.0) / (10 + 20))
    assert r.accept_length == pytest.approx(1 + 17 / 13) and r.completion_tokens == 32


# ---- against the simulator, over real loopback sockets -----------------------------------------------


def _probe_sim(scenario: str, api_key: str | None = None, stream: bool = True) -> Any:
    with sim_runner.SimServer(scenario, seed=3, speed=50, startup_seconds=0.05, api_key=api_key) as sim:

        async def go() -> Any:
            async with SGLangClient(sim.url, api_key=api_key, retries=2, backoff=0.01) as c:
                ready = await wait_until_ready(c, wait_s=20, first_interval_s=0.02)
                return ready, await probe_server(c, config=ProbeConfig(stream=stream))

        return asyncio.run(go())


def test_sim_healthy_passes() -> None:
    _, r = _probe_sim("healthy")
    assert probe_verdict(r) is Decision.PASS and r.completion_tokens <= 256 and not r.problems
    assert r.accept_length is not None and r.accept_length > 2.5 and r.ttft_ms is not None and r.tpot_ms


def test_sim_broken_draft_fails_within_64_tokens() -> None:
    _, r = _probe_sim("draft-head-weight-only", stream=False)
    assert probe_verdict(r) is Decision.FAIL and r.completion_tokens <= 64
    assert r.accept_length is not None and r.accept_length < 1.05


def test_sim_no_spec_and_degenerate_and_auth() -> None:
    _, r = _probe_sim("no-spec")
    assert r.decided_by == "no speculative statistics in the replies" and not r.problems
    _, r = _probe_sim("degenerate-output")
    assert any("degenerate output" in p for p in r.problems)
    ready, r = _probe_sim("auth-required", api_key=KEY)
    assert probe_verdict(r) is Decision.PASS
    assert KEY not in json.dumps(ready.server_info) and KEY not in json.dumps(dump(r))
