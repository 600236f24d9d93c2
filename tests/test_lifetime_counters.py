"""One /metrics reading proves the broken draft when the server's lifetime counters say so (issue 29, 12).

``sglang:generation_tokens_total`` equal to ``sglang:spec_verify_calls_total`` is one token per verify round
over the server's whole life: every round accepted nothing. With ``sglang:spec_accept_length 1.0`` that is
the trap, conclusively, in one reading; ``check --no-probe`` fails (78) instead of waiting to see the
counters grow (69). The stand-in serves the real production dump (tests/corpus/metrics, cited there) with
the speculative series added in the same label style, and the counters never move between scrapes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.test_corpus_live import METRICS, NEW_DUMP, _check, _load, _nextn, _one, stand_in

MODEL = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'


def _static_metrics(gauge: float, tokens: float, verify_calls: float) -> Callable[[], str]:
    base = METRICS.read_text(encoding="utf-8").replace(
        f"sglang:generation_tokens_total{{{MODEL}}} 7.557572e+06",
        f"sglang:generation_tokens_total{{{MODEL}}} {tokens}",
    )
    text = (
        base
        + "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.\n"
        + "# TYPE sglang:spec_accept_length gauge\n"
        + f"sglang:spec_accept_length{{{MODEL}}} {gauge}\n"
        + "# HELP sglang:spec_verify_calls_total Number of speculative verify calls.\n"
        + "# TYPE sglang:spec_verify_calls counter\n"
        + f"sglang:spec_verify_calls_total{{{MODEL}}} {verify_calls}\n"
    )
    return lambda: text


@pytest.mark.parametrize(
    ("gauge", "tokens", "calls", "rc", "status"),
    [
        (1.0, 48000.0, 48000.0, 78, "fail"),  # one token per round over its whole life: the trap
        (1.0, 48000.0, 15000.0, 69, "error"),  # the gauge's last interval only; its life was healthy
        (3.2, 48000.0, 15000.0, 69, "error"),  # healthy: the gauge is evidence, not a verdict
        (1.0, 40.0, 40.0, 69, "error"),  # 40 rounds: too few to be proof
    ],
)
def test_one_reading_of_lifetime_counters(
    gauge: float, tokens: float, calls: float, rc: int, status: str
) -> None:
    metrics = _static_metrics(gauge, tokens, calls)
    recipe = {"moe_runner_backend": "humming", "speculative_moe_runner_backend": None}  # nothing else fails
    info = {**_nextn(_load(NEW_DUMP)), **recipe}
    with stand_in(info=info, metrics=metrics) as (url, s):
        report = _check(url, "--no-probe")
        assert s.generated == 0  # no probe token spent
    acc = _one(report, "spec.accept_length")
    failing = [(c["id"], c["message"]) for c in report["checks"] if c["status"] == "fail"]
    assert (report["_rc"], acc["status"]) == (rc, status), (acc, failing)
    assert acc["evidence"]["server_verify_calls_total"] == calls
    if status == "fail":
        assert "one per round" in acc["message"] and f"{calls:g} verify rounds" in acc["message"]
        assert acc["evidence"]["server_decoding"] is False  # proven without seeing the counters grow
