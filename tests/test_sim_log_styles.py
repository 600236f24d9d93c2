"""The simulator speaks like real servers of each build family (``sim --log-style``), and ``check --log``
reaches the same verdict on each as on today's dict form: the reader's grammar, not the simulator's, is
what the styles try. The verdicts come from the real ``check`` front door run in this process against the
``sim`` command's own server (tests/support/in_process.py, held to real processes, a log style included,
by tests/test_live_in_process.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.check_helpers import CheckRun, evidence_files
from tests.support.in_process import check_in_process, sim_in_process
from validator.sim.runner import SimServer
from validator.sim.scenarios import SCENARIOS
from validator.sim.server_log import LOG_STYLES
from validator.sources.server.log import read_server_log
from validator.sources.server.log_grammar import Start, read_line

STYLES = list(LOG_STYLES)
# the rows the log decides or could mislead: a clean start, the auto override, the FP8 line a build
# ignores, a crash after ready
ROWS = ["healthy", "backend-auto", "fp8-ignored", "crash-after-ready"]


def _check(tmp_path: Path, scenario: str, style: str) -> tuple[CheckRun, str]:
    where = tmp_path / style
    where.mkdir(mode=0o700)
    with sim_in_process(where, "--scenario", scenario, "--log-style", style) as sim:
        run = check_in_process(sim, "--rules", SCENARIOS[scenario].pack, "--wait", "20", *evidence_files(sim))
        text = sim.log.read_text(encoding="utf-8")
    return run, text


@pytest.mark.parametrize("scenario", ROWS)
def test_every_log_style_gives_the_dict_styles_verdict(tmp_path: Path, scenario: str) -> None:
    runs = {style: _check(tmp_path, scenario, style) for style in STYLES}
    base = runs["dict"][0]
    assert base.report is not None and base.report["verdict"] == SCENARIOS[scenario].verdict, base.explain()
    for style, (run, text) in runs.items():
        assert "Traceback" not in run.stderr, run.stderr[-2000:]
        assert run.report is not None, run.explain()
        assert (run.rc, run.report["verdict"]) == (base.rc, base.report["verdict"]), (style, run.explain())
        assert run.with_status("fail") == base.with_status("fail"), (style, run.explain())
        log = run.check("server.log")
        assert log["status"] == base.check("server.log")["status"], (style, log)
        if style != "dict":  # the style really wrote what it imitates
            assert "server_args=ServerArgs(" in text and "server_args={" not in text
            assert re.search(r'\] INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 200', text)
            assert "Loading safetensors checkpoint shards: 100% Completed" in text


def test_the_styles_log_the_same_facts(tmp_path: Path) -> None:
    """One scenario, each style, through the reader: the same start, arguments and evidence lines."""
    facts = {}
    for style in STYLES:
        log = tmp_path / f"{style}.log"
        with SimServer("healthy", speed=1000.0, startup_seconds=0.05, log_path=log, log_style=style) as sim:
            sim.wait_ready(20)
        facts[style] = read_server_log(log)
    base = facts["dict"]
    assert base.server_args is not None and base.unusable() is None
    for style, f in facts.items():
        assert f.server_args is not None and f.server_args.pop("port") != 0
        assert isinstance(f.server_args.pop("random_seed"), int)  # drawn at each start, as SGLang does
        per_start = ("port", "random_seed")
        assert f.server_args == {k: v for k, v in base.server_args.items() if k not in per_start}, style
        assert (f.runs, f.ready, f.fp8_lm_head_lines, f.humming_prepare_lines, f.loaded_models) == (
            base.runs,
            base.ready,
            base.fp8_lm_head_lines,
            base.humming_prepare_lines,
            base.loaded_models,
        ), style


def test_ranked_style_writes_2026_builds_lines(tmp_path: Path) -> None:
    log = tmp_path / "ranked.log"
    with SimServer(
        "healthy", speed=1000.0, startup_seconds=0.05, log_path=log, log_style="dataclass-ranked"
    ) as sim:
        sim.wait_ready(20)
    lines = log.read_text(encoding="utf-8").splitlines()
    start = [ln for ln in lines if "server_args=" in ln]
    assert len(start) == 1 and re.match(
        r"\[[\d: -]+\] INFO engine\.py:177: server_args=ServerArgs\(", start[0]
    )
    assert isinstance(read_line(start[0]), Start)
    assert any(
        re.match(r"\[[\d: -]+ DP0 TP0 EP0\] INFO model_runner\.py:\d+: Load weight end\.", ln) for ln in lines
    )
    echo = [ln for ln in lines if "Receive: obj=GenerateReqInput(" in ln]
    assert echo and "The capital city of France is" in echo[0]  # the warm-up request, echoed


def test_an_unknown_style_is_a_usage_error(tmp_path: Path) -> None:
    from validator.errors import UsageError

    with pytest.raises(UsageError, match="log-style"):
        SimServer("healthy", log_style="nope")


@pytest.mark.parametrize("style", STYLES)
def test_each_styles_decode_line_is_a_sample_the_reader_reads(style: str) -> None:
    from validator.sim.server_log import ServerLog, decode_batch_line
    from validator.sources.server.log_grammar import Decode

    line = decode_batch_line(
        running=2, used_tokens=4096, accept_len=1.0, accept_rate=0.0, throughput=24.0,
        style=LOG_STYLES[style], iteration=400, rounds=40,
    )  # fmt: skip
    event = read_line(f"[2026-12-01 12:00:00{ServerLog(None, style=LOG_STYLES[style])._prefix}] {line}")
    assert isinstance(event, Decode) and event.accept_len == 1.0 and event.gen_throughput == 24.0
