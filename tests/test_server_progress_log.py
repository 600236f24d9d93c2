"""``server.progress``'s log leg from the user's side: the real ``check --log`` against the simulator's
``stall`` scenario (its scheduler's last batch line says requests are queued, then nothing), against a
healthy simulator under traffic (batch lines keep coming), and the readers on real and hostile logs.

SGLang 0.5.23 writes ``#running-req`` and ``#queue-req`` in both its ``Prefill batch`` and ``Decode batch``
lines (metrics_reporter.py ``report_prefill_stats``, ``report_decode_stats``); the corpus's real log
(tests/corpus/logs/1iis-m01-docker-compose-logs.log) has both, behind Docker Compose's wrapper.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import web
from tests.support.check_helpers import evidence_files, run_check
from tests.support.sim_process import sim_process, wait_healthy
from tests.test_server_progress import traffic
from validator.sources.server.log import FileLogReader, read_server_log
from validator.sources.server.log_grammar import BatchCounts, Stream, batch_counts, read_line, stream_of

CORPUS = Path(__file__).parent / "corpus" / "logs" / "1iis-m01-docker-compose-logs.log"
BOUND = 2.0  # --stall-after for these runs: the simulator's stall holds requests for as long as it runs


def _hold(url: str) -> threading.Thread:
    """A request sent into a stalled server and left waiting (the server holds it until it exits)."""
    t = threading.Thread(target=_post_and_wait, args=(url,), daemon=True)
    t.start()
    return t


def _post_and_wait(url: str) -> None:
    body = {"text": "held", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
    with contextlib.suppress(httpx.HTTPError):  # the simulator stopped under it
        web.post(f"{url}/generate", json=body, timeout=120)


def _wait_for(cond: object, what: str, limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _last_line(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[-1] if lines else ""


def test_check_fails_a_stall_from_the_log_when_queued_requests_get_no_batch(tmp_path: Path) -> None:
    """No /metrics and a check that may not generate (``--no-probe``, as the sidecar's re-checks): only
    the log can tell. Its last batch line says a request waits in the queue, and the scheduler wrote
    nothing for over the bound."""
    with sim_process(tmp_path, "--scenario", "stall") as sim:
        wait_healthy(sim.url)
        _hold(sim.url)
        _wait_for(lambda: "#queue-req: 1," in _last_line(sim.log), "the held request's queue line")
        _wait_for(lambda: time.time() - sim.log.stat().st_mtime > BOUND + 0.5, "the log to stay quiet")
        run = run_check(sim.url, "--stall-after", str(BOUND), "--no-probe", *evidence_files(sim))
    assert run.rc == 78 and run.report is not None, run.explain()
    progress = run.check("server.progress")
    assert progress["status"] == "fail", run.explain()
    ev = progress["evidence"]
    assert ev["source"] == "log" and ev["stalled_for_s"] > BOUND, run.explain()
    assert "request_tokens" not in ev  # no request of ours was sent into the stall
    assert "1 queued" in progress["message"], run.explain()
    assert run.with_status("fail") == {"server.progress"}, run.explain()


def test_a_full_check_confirms_a_quiet_queue_line_with_its_own_request(tmp_path: Path) -> None:
    """SGLang logs nothing when it aborts a waiting request (``Scheduler.abort_request``), so a queue
    line can outlive its queue: the last batch line of a healthy, idle server says 2 queued, and nothing
    follows for over the bound. A full check asks the server itself (its own 4-token request), which
    answers: no stall."""
    with sim_process(tmp_path) as sim:
        wait_healthy(sim.url)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        _log(
            sim.log,
            f"[{stamp}] Prefill batch, #new-seq: 1, #running-req: 1, #queue-req: 2, cuda graph: False",
        )
        _wait_for(lambda: time.time() - sim.log.stat().st_mtime > BOUND + 0.5, "the log to stay quiet")
        run = run_check(sim.url, "--stall-after", str(BOUND), *evidence_files(sim))
    progress = run.check("server.progress")
    assert progress["status"] == "pass" and progress["evidence"]["source"] == "request", run.explain()
    assert progress["evidence"]["request_tokens"] > 0


def test_a_queue_line_younger_than_the_bound_is_recent_work_not_a_stall(tmp_path: Path) -> None:
    """The same queue line, read well within the bound: SGLang writes a batch line after its forward,
    so it is work completed that recently; a stall shorter than the bound is none."""
    with sim_process(tmp_path, "--scenario", "stall") as sim:
        wait_healthy(sim.url)
        _hold(sim.url)
        _wait_for(lambda: "#queue-req: 1," in _last_line(sim.log), "the held request's queue line")
        run = run_check(sim.url, "--stall-after", "600", "--no-probe", *evidence_files(sim))
    progress = run.check("server.progress")
    assert progress["status"] == "pass" and progress["evidence"]["source"] == "log", run.explain()
    assert "request_tokens" not in progress["evidence"]


def test_check_passes_progress_from_the_log_while_batch_lines_continue(tmp_path: Path) -> None:
    """A healthy server under traffic: its decode lines keep coming, so the log shows progress and no
    request of ours is spent on it."""
    with sim_process(tmp_path, speed=50.0) as sim:
        wait_healthy(sim.url)
        with traffic(sim.url, clients=2) as done:
            _wait_for(lambda: done[0] >= 4 and "Decode batch" in _last_line(sim.log), "decode lines")
            run = run_check(sim.url, "--stall-after", "30", "--no-probe", *evidence_files(sim))
    progress = run.check("server.progress")
    assert progress["status"] == "pass", run.explain()
    assert progress["evidence"]["source"] == "log" and "request_tokens" not in progress["evidence"]


def test_the_real_logs_batch_lines_keep_their_counts(tmp_path: Path) -> None:
    """The corpus's real 0.5.x log, behind Compose's wrapper: both line kinds keep their counts, and its
    last batch line (a decode line saying one request runs, none queued) is what the reader holds."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    stream = next(s for s in map(stream_of, lines) if s is not None)
    assert stream == Stream(True, "qwen35-4b-sglang")
    prefill = next(line for line in lines if "Prefill batch" in line and "#running-req: 1" in line)
    assert batch_counts(prefill, stream) == BatchCounts("prefill", 1, 0)
    decode = next(line for line in lines if "Decode batch, #running-req: 2" in line)
    assert batch_counts(decode, stream) == BatchCounts("decode", 2, 0)
    copy = tmp_path / "compose.log"
    shutil.copyfile(CORPUS, copy)
    batch = read_server_log(copy).last_batch
    last = next(line for line in reversed(lines) if " batch, " in line)
    assert batch is not None
    assert batch_counts(last, stream) == BatchCounts(batch.kind, batch.running, batch.queued)
    assert batch.queued == 0  # running only: the last line of any finished burst, no stall sign


T = "[2026-12-07 06:00:00]"


def _log(path: Path, *lines: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def test_the_file_reader_bounds_how_long_ago_the_last_batch_line_was_written(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    _log(log, f"{T} server_args={{'port': 30000}}", f"{T} The server is fired up and ready to roll!")
    _log(log, f"{T} Prefill batch, #new-seq: 1, #running-req: 3, #queue-req: 2, cuda graph: False")
    old = time.time() - 100
    os.utime(log, (old, old))
    reader = FileLogReader(log)
    first = reader.poll().last_batch
    # the file's last line: its mtime is its time, both ways
    assert first is not None and (first.kind, first.running, first.queued) == ("prefill", 3, 2)
    assert 99 < first.quiet_s < 120 and first.within_s is not None and 99 < first.within_s < 120
    # an access line after it moves the mtime: how long ago the batch line was written is no longer known
    # from the file, only that this reader has seen it for some time
    _log(log, 'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK')
    later = reader.poll().last_batch
    assert later is not None and later.within_s is None and later.quiet_s < 50
    # a new decode line, seen appear between two polls: written since the previous one
    _log(log, f"{T} Decode batch, #running-req: 3, #full token: 9, cuda graph: True, #queue-req: 0")
    fresh = reader.poll().last_batch
    assert fresh is not None and fresh.kind == "decode" and fresh.queued == 0
    assert fresh.within_s is not None and fresh.within_s < 50
    # a new start: its batch lines are its own
    _log(log, f"{T} server_args={{'port': 30000}}")
    assert reader.poll().last_batch is None
    reader.close()


@pytest.mark.parametrize(
    "line",
    [
        # a client's request line in uvicorn's access log: never the scheduler's
        'INFO:     127.0.0.1:5000 - "GET /x?Prefill batch, #running-req: 0, #queue-req: 9 HTTP/1.1" 404',
        # an echo of a prompt (--log-requests), a message that only holds the words
        f"{T} Receive: obj=GenerateReqInput(text='Decode batch, #running-req: 1, #queue-req: 9')",
        # counts past nine digits are not read as counts
        f"{T} Prefill batch, #new-seq: 1, #running-req: 0, #queue-req: 12345678901, cuda graph: False",
    ],
)
def test_lines_a_client_can_shape_are_no_queue(tmp_path: Path, line: str) -> None:
    log = tmp_path / "server.log"
    _log(log, f"{T} server_args={{'port': 30000}}", f"{T} Decode batch, #running-req: 1, #queue-req: 0", line)
    batch = read_server_log(log).last_batch
    assert batch is not None and not batch.queued, read_line(line)


def test_the_journal_times_each_batch_line_by_its_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """journald stamps every entry on receipt (``__REALTIME_TIMESTAMP``): a queue line received 100 s ago
    is 100 s quiet at the first poll, whatever came after it that is not a batch line."""
    from tests.test_log_follow import FakeHost

    host = FakeHost(tmp_path)
    monkeypatch.setenv("PATH", host.env()["PATH"])
    invocation = host.start()
    host.t = int((time.time() - 100) * 1e6)
    host.log(
        invocation,
        [
            f"{T} server_args={{'port': 30000}}",
            f"{T} Prefill batch, #new-seq: 1, #running-req: 0, #queue-req: 4, cuda graph: False",
            'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        ],
    )
    from validator.sources.server.log import JournalLogReader

    reader = JournalLogReader("sglang.service")
    batch = reader.poll().last_batch
    assert batch is not None and (batch.kind, batch.running, batch.queued) == ("prefill", 0, 4)
    assert 95 < batch.quiet_s < 130 and batch.within_s is not None and 95 < batch.within_s < 130
    host.t = int(time.time() * 1e6)
    host.log(invocation, [f"{T} Decode batch, #running-req: 4, cuda graph: True, #queue-req: 0"])
    fresh = reader.poll().last_batch
    assert fresh is not None and fresh.kind == "decode" and fresh.within_s is not None and fresh.within_s < 30


_FORGED = f"{T} Prefill batch, #new-seq: 1, #running-req: 0, #queue-req: 9, cuda graph: False"


def _forge(url: str) -> int:
    """As another local user, a client of the server: requests whose path, query and prompt carry a
    forged queue line (with a newline where the client can put one)."""
    answered = 0
    with httpx.Client(timeout=30) as c:
        for target in (f"/x?{_FORGED}", f"/{_FORGED}%0A{_FORGED}"):
            c.get(url + target)
            answered += 1
        body = {"text": f"x\n{_FORGED}\n", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
        answered += c.post(f"{url}/generate", json=body).status_code == 200
    return answered


def test_another_users_requests_cannot_forge_a_queue_in_the_log(tmp_path: Path, attacker: object) -> None:
    """A busy server's log (access lines, --log-requests echoes of every prompt) shaped by a client that
    is another local user: its forged queue lines are text in other lines, never the scheduler's, so the
    log never says "queued" and a quiet log is no stall."""
    from tests.support.second_user import User, call_as

    assert isinstance(attacker, User)
    with sim_process(tmp_path, "--log-style", "dataclass-ranked") as sim:
        wait_healthy(sim.url)
        assert call_as(attacker, lambda: _forge(sim.url)) == 3
        text = sim.log.read_text(encoding="utf-8")
        assert "#queue-req: 9" in text  # the forgery reached the log, as text inside other lines
        _wait_for(lambda: time.time() - sim.log.stat().st_mtime > BOUND + 0.5, "the log to stay quiet")
        run = run_check(sim.url, "--stall-after", str(BOUND), *evidence_files(sim))
    progress = run.check("server.progress")  # our own request decides, and sees the server answer
    assert progress["status"] == "pass" and progress["evidence"]["source"] == "request", run.explain()
    batch = read_server_log(sim.log).last_batch
    assert batch is None or batch.queued == 0


def test_the_sidecar_following_the_log_drops_readiness_on_a_stall_at_no_token(tmp_path: Path) -> None:
    """The sidecar under traffic, no /metrics, the log followed: 8 s after ready the scheduler completes
    nothing; a re-check (which never generates) reads the quiet queue line and drops readiness, keeping
    liveness, with no request of its own."""
    from tests.support.daemon_process import daemon_process, sim_on_port, wait_for

    log = tmp_path / "sglang.log"
    with (
        sim_on_port("healthy", log=log, extra=("--stall-after", "8")) as sim,
        traffic(sim.url, clients=2),
    ):
        sidecar = ("--interval", "1", "--probe-interval", "600", "--wait", "20", "--allow-partial",
                   "--stall-after", str(BOUND), "--log", str(log))  # fmt: skip
        with daemon_process(tmp_path, sim.url, *sidecar) as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, 40), d.log()[-3000:]
            seen: list[dict[str, object]] = []

            def stalled_from_log() -> bool:
                checks = {c["id"]: c for c in d.get("/report").json().get("checks", [])}
                progress = checks.get("server.progress", {})
                if progress.get("status") == "fail":
                    seen.append(progress)
                return progress.get("status") == "fail" and progress["evidence"]["source"] == "log"

            assert wait_for(stalled_from_log, 60), (seen[-1:], d.log()[-3000:])
            assert d.get("/readyz").status_code == 503 and d.get("/livez").status_code == 200
            assert "request_tokens" not in seen[-1]["evidence"]  # type: ignore[operator]


def test_a_log_another_user_could_rewrite_never_hides_a_stall(
    tmp_path: Path, attacker: object, shared: Path
) -> None:
    """The server logs into a directory anyone can write. While its scheduler is stalled, a second local
    user replaces the log with a copy whose last line is a fresh decode batch (a rename over it): taken
    at its word, the stall would read as progress. A log its directory or mode leaves open to others is
    no evidence of progress or stall; the check says it could not tell (no request of its own allowed)."""
    from tests.support.second_user import User, run_as

    assert isinstance(attacker, User)
    log = shared / "sglang.log"
    with sim_process(tmp_path, "--scenario", "stall", "--log", str(log)) as sim:  # the last --log wins
        wait_healthy(sim.url)
        _hold(sim.url)
        _wait_for(lambda: "#queue-req: 1," in _last_line(log), "the held request's queue line")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        forged = f"[{stamp}] Decode batch, #running-req: 1, cuda graph: True, #queue-req: 0"
        swap = f"cp {log} {shared}/x && echo '{forged}' >> {shared}/x && mv -f {shared}/x {log}"
        assert run_as(attacker, ["sh", "-c", swap]).returncode == 0
        assert _last_line(log) == forged and log.stat().st_uid == attacker.uid
        files = ("--attestation", str(sim.attestation), "--log", str(log))
        run = run_check(sim.url, "--stall-after", "600", "--no-probe", *files)
    progress = run.check("server.progress")
    assert progress["status"] == "error", run.explain()
    assert progress["evidence"].get("source") != "log", run.explain()


def test_a_stale_queue_line_cannot_hold_the_sidecars_readiness_down(tmp_path: Path) -> None:
    """A healthy, idle server whose log's last batch line says 2 queued (SGLang logs no abort of a
    waiting request), quiet past the bound, followed by the sidecar: its re-checks take the log's word and
    drop readiness; a full check then asks the server itself (it answers) and readiness comes back."""
    from tests.support.daemon_process import daemon_process, sim_on_port, wait_for

    log = tmp_path / "sglang.log"
    with sim_on_port("healthy", log=log) as sim:
        sidecar = ("--interval", "1", "--probe-interval", "600", "--wait", "20", "--allow-partial",
                   "--stall-after", str(BOUND), "--log", str(log))  # fmt: skip
        with daemon_process(tmp_path, sim.url, *sidecar) as d:
            assert wait_for(lambda: d.get("/readyz").status_code == 200, 40), d.log()[-3000:]
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            _log(
                log,
                f"[{stamp}] Prefill batch, #new-seq: 1, #running-req: 1, #queue-req: 2, cuda graph: False",
            )
            assert wait_for(lambda: d.get("/readyz").status_code == 503, 30), d.log()[-3000:]
            assert wait_for(lambda: d.get("/readyz").status_code == 200, 60), d.log()[-3000:]
            checks = {c["id"]: c for c in d.get("/report").json()["checks"]}
            assert checks["server.progress"]["status"] == "pass", checks["server.progress"]


def test_a_log_below_another_users_directory_never_hides_a_stall(tmp_path: Path, attacker: object) -> None:
    """The log's own directory is root's and private to its writers (0755), but a directory above it is a
    second local user's (their project tree, 0755): they rename the log's directory away and put theirs
    in its place, holding a copy of the log whose last line is a fresh decode batch. Only the log's own
    directory's mode was judged, so the stall read as progress; every directory on the way must be
    writable only by root, this user or the log's owner, as for every other file the verdict trusts."""
    from tests.support.second_user import User, run_as

    assert isinstance(attacker, User)
    top = Path(tempfile.mkdtemp(prefix="sv-theirs-", dir="/tmp"))
    try:
        os.chown(top, attacker.uid, attacker.gid)
        os.chmod(top, 0o755)
        logs = top / "logs"
        logs.mkdir(mode=0o755)
        log = logs / "sglang.log"
        with sim_process(tmp_path, "--scenario", "stall", "--log", str(log)) as sim:
            wait_healthy(sim.url)
            _hold(sim.url)
            _wait_for(lambda: "#queue-req: 1," in _last_line(log), "the held request's queue line")
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            forged = f"[{stamp}] Decode batch, #running-req: 1, cuda graph: True, #queue-req: 0"
            swap = (
                f"mkdir {top}/new && cp {log} {top}/new/sglang.log && echo '{forged}' >> {top}/new/sglang.log"
                f" && chmod 0755 {top}/new && mv {logs} {top}/old && mv {top}/new {logs}"
            )
            assert run_as(attacker, ["sh", "-c", swap]).returncode == 0
            assert _last_line(log) == forged and log.stat().st_uid == attacker.uid
            files = ("--attestation", str(sim.attestation), "--log", str(log))
            run = run_check(sim.url, "--stall-after", "600", "--no-probe", *files)
        progress = run.check("server.progress")
        assert progress["status"] == "error", run.explain()
        assert progress["evidence"].get("source") != "log", run.explain()
    finally:
        shutil.rmtree(top, ignore_errors=True)
