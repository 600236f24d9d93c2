"""A start that dies before it is ready: the log says why (``Scheduler hit an exception`` and its traceback,
then the launcher's SIGQUIT line), and ``check --log`` ends its wait on it instead of waiting out --wait.

The misconfiguration is then judged from the dead start's own ``server_args=`` (the ring SGLang refused
fails ``spec.dspark``, exit 78). A dead start that was already in the log when the check began is no
evidence: it may be an earlier attempt than the server being waited for. The checks are the real ``check``
front door run in this process (tests/support/in_process.py, held to real processes by
tests/test_live_in_process.py, a dead start included).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.in_process import check_in_process, sim_in_process
from tests.support.loopback import free_port
from validator.sources.server.log import read_server_log

ARGS = (
    "[2026-12-01 12:00:00] server_args={'model_path': '/models/Ling-3.0-flash-fp4', 'speculative_algorithm': "
    "'DSPARK', 'enable_linear_replayssm_spec': True, 'linear_replayssm_cache_len': 16}\n"
)
LOADED = "[2026-12-01 12:00:30 TP0] Load weight end. elapsed=30.00 s, type=BailingMoeV3ForCausalLM\n"
CRASH = (
    "[2026-12-01 12:00:31 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/mem_cache/memory_pool.py", line 821, in x\n'
    "    raise ValueError(\n"
    "ValueError: spec-verify ring too small: 16 < 2 * 9 (early-flush margin)\n"
    "[2026-12-01 12:00:31] Received sigquit from a child process. It usually means the child failed.\n"
)
RING = "ValueError: spec-verify ring too small: 16 < 2 * 9 (early-flush margin)"
READY = "[2026-12-01 12:01:00] The server is fired up and ready to roll!\n"


def _log(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "server.log"
    p.write_text(text)
    return p


def test_the_log_says_why_a_start_died(tmp_path: Path) -> None:
    assert read_server_log(_log(tmp_path, ARGS + LOADED + CRASH)).start_failure == RING
    # a chained traceback: the exception that escaped is the last one
    chained = CRASH.replace(RING, "KeyError: 'ring'\nDuring handling of the above exception:\n" + RING)
    assert read_server_log(_log(tmp_path, ARGS + chained)).start_failure == RING
    # the launcher's line alone still says a child failed
    sigquit = CRASH.splitlines(keepends=True)[-1]
    assert "child process failed" in str(read_server_log(_log(tmp_path, ARGS + sigquit)).start_failure)


def test_error_lines_of_a_starting_or_running_server_are_no_start_failure(tmp_path: Path) -> None:
    request_error = "[2026-12-01 12:00:10] ValueError: prompt too long for context length 4096\n"
    assert read_server_log(_log(tmp_path, ARGS + request_error + LOADED)).start_failure is None
    assert read_server_log(_log(tmp_path, ARGS + LOADED + READY + CRASH)).start_failure is None  # after ready
    # a new start is a new attempt: the previous one's death is not its own
    assert read_server_log(_log(tmp_path, ARGS + LOADED + CRASH + ARGS + LOADED)).start_failure is None


@pytest.mark.timeout(90)  # the bound the check process had: waiting out --wait fails this test
def test_check_ends_its_wait_on_the_ring_error_and_fails_the_ring(tmp_path: Path) -> None:
    # the port never opens (the server dies while loading, before it binds), as a real launcher's
    with sim_in_process(tmp_path, "--scenario", "dspark-ring-16", startup=1.0, wait_listen=False) as sim:
        started = time.monotonic()
        run = check_in_process(
            sim, "--rules", "ling-3.0-flash-dgx-spark-dspark", "--wait", "600", "--log", str(sim.log)
        )
        took = time.monotonic() - started
    assert run.rc == 78, run.explain()
    ready = run.check("server.ready")
    assert ready["status"] == "error" and "failed to start" in ready["message"] and RING in ready["message"]
    ring = run.check("spec.dspark")
    assert ring["status"] == "fail" and ring["sources"] == ["log"], run.explain()
    assert "--linear-replayssm-cache-len 32" in str(ring["remedy"])
    assert run.check("server.log")["evidence"]["start_failure"] == RING
    assert took < 600


def test_a_start_that_died_before_the_check_is_not_judged(tmp_path: Path) -> None:
    """The unit failed an hour ago, or systemd is already starting the next attempt: the dead start in
    the log may not be the server being waited for, so nothing is judged from it and the check waits."""
    log = _log(tmp_path, ARGS + LOADED + CRASH)
    run = check_in_process(
        f"http://127.0.0.1:{free_port()}", "--rules", "ling-3.0-flash-dgx-spark-dspark", "--wait", "2",
        "--log", str(log),
    )  # fmt: skip
    assert run.rc == 69, run.explain()
    ready = run.check("server.ready")["message"]
    assert "not ready after" in ready and f"the log's last start had failed: {RING}" in ready
    assert run.check("spec.dspark")["status"] == "error"
    log_check = run.check("server.log")
    assert log_check["status"] == "error" and "already died when this check began" in log_check["message"]
