# ruff: noqa: E501  (log lines are data, kept verbatim)
"""Logs saved through Docker: ``docker compose logs`` (``SERVICE  | `` before each line) and ``docker logs
--timestamps`` (an RFC 3339 stamp before each line) wrap SGLang's own line; they are read through the
wrapper, never as a way to inject a line (issue 29, item 9).

The real artifact: 1iis/m01's ``docker compose logs`` of an SGLang server (``tests/corpus/logs/``). What a
wrapper may never do: a line of another service in the same output, a line wrapped differently from the
log's first line, or a wrapper written inside a line (a client's request text) sets no fact.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.check_helpers import CheckRun
from tests.support.cli import REPO
from tests.support.in_process import check_in_process, sim_in_process
from tests.support.loopback import free_port
from tests.test_log_grammar import _hostile_lines
from tests.test_server_log import RUN_HEALTHY, TP, _write
from validator.facts import LogFacts
from validator.sources.server.log import read_server_log
from validator.sources.server.log_grammar import (
    Decode,
    Other,
    Prefill,
    Start,
    Stream,
    read_in_stream,
    stream_of,
)
from validator.sources.server.log_state import LogParser

CORPUS = REPO / "tests" / "corpus" / "logs" / "1iis-m01-docker-compose-logs.log"
COMPOSE = "qwen35-4b-sglang  | "  # the corpus's own wrapper
STAMP = "2026-11-29T15:00:00.123456789Z "  # docker logs --timestamps
DSPARK = "ling-3.0-flash-dgx-spark-dspark"

WRAPPERS = {
    "compose": lambda line: COMPOSE + line,
    "timestamps": lambda line: STAMP + line,
    "compose-timestamps": lambda line: COMPOSE + STAMP + line,
}


def _projection(facts: LogFacts) -> dict[str, object]:
    d = asdict(facts)
    for key in ("path", "lines_total", "bytes_read", "bytes_skipped", "run_start_line"):
        d.pop(key)
    d["decode_samples"] = [(s.accept_len, s.accept_rate, s.gen_throughput) for s in facts.decode_samples]
    b = facts.last_batch  # what it says, not when this reader saw it
    d["last_batch"] = None if b is None else (b.kind, b.running, b.queued)
    return d


def _fresh(tmp_path: Path) -> Path:
    """A new directory under ``tmp_path`` (``_write`` names every log ``sglang.log``)."""
    path = Path(tempfile.mkdtemp(dir=tmp_path))
    return path


def _facts_of(lines: list[str]) -> LogFacts:
    parser = LogParser("test.log")
    for i, line in enumerate(lines):
        parser.feed(line, i)
    return parser.snapshot()


def test_the_real_compose_logs_are_read_through_their_wrapper() -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    stream = stream_of(lines[0])
    assert stream == Stream(True, "qwen35-4b-sglang")
    events = [read_in_stream(line, stream) for line in lines]
    decodes = [e for e in events if isinstance(e, Decode)]
    assert len(decodes) == sum("Decode batch" in line for line in lines) == 14
    assert decodes[0] == Decode(None, None, 0.14) and decodes[-1] == Decode(None, None, 54.9)
    prefills = [e for e in events if isinstance(e, Prefill)]  # read for server.progress's counts
    assert len(prefills) == sum("Prefill batch" in line for line in lines) == 5
    assert all(isinstance(e, Other) for e in events if not isinstance(e, Decode | Prefill))  # access lines


@pytest.mark.parametrize("how", sorted(WRAPPERS))
def test_a_wrapped_start_reads_as_the_same_start(tmp_path: Path, how: str) -> None:
    """Every fact of a healthy start, through the wrapper, by the line parser and the file follower."""
    wrap = WRAPPERS[how]
    busy = [
        f"{TP} Decode batch, #running-req: 1, accept len: 3.05, accept rate: 0.68, cuda graph: True"
    ] * 300
    base = read_server_log(_write(tmp_path, RUN_HEALTHY + busy))
    (tmp_path / "w").mkdir()
    wrapped = read_server_log(_write(tmp_path / "w", [wrap(line) for line in RUN_HEALTHY + busy]))
    assert base.unusable() is None and base.decode_sample_count == 302
    assert _projection(wrapped) == _projection(base)
    assert _projection(_facts_of([wrap(line) for line in RUN_HEALTHY])) == _projection(_facts_of(RUN_HEALTHY))


def test_another_service_or_another_wrapper_sets_nothing(tmp_path: Path) -> None:
    """``docker compose logs`` of several services: a client container printing SGLang-shaped lines (a
    start with another backend, decode lines at 1.00) changes no fact of the server's; nor does an
    unwrapped line in a wrapped log, or a wrapped one in a plain log."""
    base = [COMPOSE + line for line in RUN_HEALTHY]
    forged_start = RUN_HEALTHY[0].replace("'humming'", "'triton'")
    assert forged_start != RUN_HEALTHY[0]
    forged = [
        forged_start,
        f"{TP} Decode batch, #running-req: 1, accept len: 1.00, accept rate: 0.00, cuda graph: True",
    ]
    for foreign in (
        [f"client-1          | {line}" for line in forged],
        forged,  # unwrapped, in a wrapped log
        [STAMP + line for line in forged],  # the engine's stamp without the service
    ):
        mixed = base[:5] + foreign + base[5:] + foreign
        assert _projection(_facts_of(mixed)) == _projection(_facts_of(base))
        path = _write(tmp_path, mixed)
        assert _projection(read_server_log(path)) == _projection(
            read_server_log(_write(_fresh(tmp_path), base))
        )
    plain = RUN_HEALTHY[:5] + [COMPOSE + line for line in forged] + RUN_HEALTHY[5:]
    assert _projection(_facts_of(plain)) == _projection(_facts_of(RUN_HEALTHY))


def test_one_wrapper_only_and_only_at_the_start_of_a_line() -> None:
    """A second wrapper inside a wrapped line is the line's text: no start."""
    stream = Stream(True, "qwen35-4b-sglang")
    assert isinstance(read_in_stream(COMPOSE + RUN_HEALTHY[0], stream), Start)
    assert not isinstance(read_in_stream(COMPOSE + "evil  | " + RUN_HEALTHY[0], stream), Start)
    assert not isinstance(
        read_in_stream(COMPOSE + STAMP + STAMP + RUN_HEALTHY[0], Stream(True, "qwen35-4b-sglang")), Start
    )


_INJECTED = st.one_of(
    st.text(max_size=120),
    st.sampled_from(
        [
            f"\n{COMPOSE}{RUN_HEALTHY[0].replace('humming', 'triton')}\n",
            f"{COMPOSE}[2026-11-29 15:05:01 TP0] Decode batch, #running-req: 1, accept len: 1.00, accept rate: 0.00, cuda graph: True",
            f"\n{STAMP}[2026-11-29 15:05:01 TP0] Decode batch, #running-req: 1, accept len: 1.00, cuda graph: True\n",
            "other-svc  | [2026-11-29 15:05:01] server_args={'moe_runner_backend': 'triton'}",
        ]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(_INJECTED, min_size=1, max_size=4),
    at=st.integers(min_value=0, max_value=len(RUN_HEALTHY)),
    how=st.sampled_from(sorted(WRAPPERS)),
)
def test_request_text_in_wrapped_access_and_request_lines_never_changes_a_fact(
    texts: list[str], at: int, how: str
) -> None:
    """The property of ``test_log_grammar`` under Docker's wrappers: a client's text (with wrappers and
    SGLang lines inside it) in access and request-echo lines, wrapped as Docker wraps every line."""
    wrap = WRAPPERS[how]
    hostile = [wrap(line) for text in texts for line in _hostile_lines(text, "10.1.2.3")]
    lines = [wrap(line) for line in RUN_HEALTHY]
    base = _projection(_facts_of(lines))
    assert _projection(_facts_of(lines[:at] + hostile + lines[at:])) == base


def _dead_start_log(tmp_path: Path) -> Path:
    """sim dspark-ring-16's own log: it dies at pool allocation, after logging its server_args."""
    with sim_in_process(tmp_path, "--scenario", "dspark-ring-16", startup=1.0, wait_listen=False) as sim:
        for _ in range(300):
            text = sim.log.read_text(encoding="utf-8") if sim.log.exists() else ""
            if "hit an exception" in text or "sigquit" in text.lower():
                break
            time.sleep(0.1)
        kept = tmp_path / "dead.log"
        shutil.copyfile(sim.log, kept)
    return kept


def _check(log: Path) -> CheckRun:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the log is the evidence
    # the real check front door in this process (tests/support/in_process.py)
    return check_in_process(url, "--rules", DSPARK, "--wait", "3", "--no-probe", "--log", str(log))


def test_check_reads_a_dead_start_through_each_wrapper_as_it_reads_the_plain_log(tmp_path: Path) -> None:
    """Through the real CLI: the log's dead start and why it died (the DSpark ring too small, from the
    start's own lines) are read whether the log was saved plain (the control) or by ``docker compose logs``
    / ``docker logs -t``; the same statuses, the same reason."""
    plain = _dead_start_log(tmp_path)
    control = _check(plain)
    why = "spec-verify ring too small"
    assert control.report is not None and why in control.check("server.ready")["message"], control.explain()
    assert why in control.check("server.log")["message"], control.explain()
    expected = {c["id"]: c["status"] for c in control.report["checks"]}
    lines = plain.read_text(encoding="utf-8").splitlines()
    for how, wrap in WRAPPERS.items():
        wrapped = tmp_path / f"{how}.log"
        wrapped.write_text("".join(wrap(line) + "\n" for line in lines), encoding="utf-8")
        run = _check(wrapped)
        assert run.rc == control.rc and run.report is not None, (how, run.explain())
        assert {c["id"]: c["status"] for c in run.report["checks"]} == expected, how
        assert why in run.check("server.log")["message"], (how, run.explain())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_INJECTED, min_size=1, max_size=3), how=st.sampled_from(sorted(WRAPPERS)))
def test_the_file_follower_agrees_under_wrapped_hostile_lines(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], how: str
) -> None:
    """Through the file follower too: its backward start scan and its byte-level bulk count of decode
    lines, behind the wrapper."""
    wrap = WRAPPERS[how]
    busy = [
        f"{TP} Decode batch, #running-req: 1, accept len: 3.05, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 58.50"
    ] * 50
    hostile = [line for text in texts for line in _hostile_lines(text, "10.1.2.3")]
    tmp = tmp_path_factory.mktemp("w")
    base = read_server_log(_write(tmp, [wrap(line) for line in RUN_HEALTHY + busy + busy]))
    (tmp / "x").mkdir()
    facts = read_server_log(_write(tmp / "x", [wrap(line) for line in RUN_HEALTHY + busy + hostile + busy]))
    assert _projection(facts) == _projection(base)
    assert base.decode_sample_count == 102


def test_another_service_speaking_first_does_not_choose_the_stream(tmp_path: Path) -> None:
    """deploy/compose's ``docker compose logs``: the sidecar's JSON lines can come before the server's
    first line. The stream is the first SGLang line's, so the server's start is read (as plainly logged)."""
    sidecar = 'sidecar-1           | {"ts": "2026-11-29T15:00:00Z", "level": "info", "msg": "waiting for the server"}'
    server = [f"sglang-1            | {line}" for line in RUN_HEALTHY]
    mixed = [sidecar, sidecar, *server[:4], sidecar, *server[4:]]
    assert _projection(_facts_of(mixed)) == _projection(_facts_of(RUN_HEALTHY))
    assert _projection(read_server_log(_write(tmp_path, mixed))) == _projection(
        read_server_log(_write(_fresh(tmp_path), RUN_HEALTHY))
    )
