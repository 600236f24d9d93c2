"""The sidecar with no ``--url`` follows its server, not a name, and never shows a previous process's
verdict as current (issue 28, items 3 and 7).

A real simulator is the server, a real ``serve`` process the sidecar, and the decoy a process of a real
second local user (``tests/support/second_user.py``) whose argv is a healthy server's on the same
``--port``, with the FP8 head's variable set, started before each restart (so its PID is below the new
server's: the old rule took the lowest PID whose argv named the port). Through each restart the test polls
``/readyz``, ``/report`` and ``/``: once the restart is noticed, they say "restarted at T, not yet judged"
until the new process is judged, and the decoy is never the process judged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support import web
from tests.support.cli import REPO
from tests.support.decoys import FP8, remove, start_decoy, stub_dir
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.second_user import User, ensure_user

SIM = ["--speed", "1000"]


class Node:
    """One server port, the simulator restarted on it, and the sidecar following it."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.listen = free_port()
        self.log = tmp / "sidecar.out"
        self.server: subprocess.Popen[bytes] | None = None
        self.sidecar: subprocess.Popen[bytes] | None = None

    def start_server(
        self, *, healthy: bool, startup: float = 0.2, scenario: str = "healthy"
    ) -> subprocess.Popen[bytes]:
        """The simulator on the node's port: healthy with the FP8 head's variable, broken without it."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for name in FP8:
            env.pop(name, None)
        if healthy:
            env.update(FP8)
        cmd = [sys.executable, "-m", "validator", "sim", "--port", str(self.port), *SIM]
        cmd += ["--startup-seconds", str(startup), "--scenario", scenario]
        self.server = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return self.server

    def start_sidecar(self, pid: int | None, *, url: bool = False) -> None:
        """``serve --pid PID`` (the process followed), or ``serve --url`` the node's port (``url``)."""
        where = ["--url", f"http://127.0.0.1:{self.port}"] if url else ["--pid", str(pid)]
        argv = [sys.executable, "-m", "validator", "serve", *where, "--listen"]
        argv += [f"127.0.0.1:{self.listen}", "--allow-partial", "--no-probe", "--interval", "1"]
        argv += ["--health-interval", "0.5", "--wait", "60"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with self.log.open("wb") as fh:
            self.sidecar = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)

    def get(self, path: str) -> httpx.Response:
        return web.get(f"http://127.0.0.1:{self.listen}{path}", timeout=5)

    def wait(self, pred: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if pred():
                    return
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; sidecar log: {self.log.read_text()[-3000:]}")

    def judged(self, pid: int) -> bool:
        r = self.get("/report")
        return r.status_code == 200 and str(r.json()["target"]).startswith(f"PID {pid} ")

    def observe_until_judged(self, target_prefix: str, decoys: list[int]) -> list[dict[str, Any]]:
        """Poll the three endpoints until a report whose target starts with ``target`` is served; every
        observation, for the assertions."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                ready, report, page = self.get("/readyz"), self.get("/report"), self.get("/")
                metrics = self.get("/metrics").text
            except httpx.HTTPError:
                time.sleep(0.1)
                continue
            body = report.json()
            seen.append(
                {"readyz": ready.status_code, "ready": ready.json(), "report": report.status_code,
                 "body": body, "page": page.text, "failing": _failing(metrics)}
            )  # fmt: skip
            target = str(body.get("target", ""))
            assert not any(target.startswith(f"PID {d} ") for d in decoys), body  # a decoy is never judged
            if report.status_code == 200 and target.startswith(target_prefix):
                return seen
            time.sleep(0.1)
        raise AssertionError(f"{target_prefix} never judged; sidecar log: {self.log.read_text()[-3000:]}")

    def restart(
        self, *, healthy: bool, old: int, startup: float = 0.2, url: bool = False
    ) -> tuple[int, list[dict[str, Any]]]:
        """Stop the server, wait until the sidecar says it restarted, start the next one on the same port;
        returns its PID and what the endpoints said until it was judged."""
        assert self.server is not None
        stop(self.server)
        # a stopping server may stop answering /health before it exits ("server lost at T"); over /proc
        # its exit is seen next, and said: the time stays the first sign's
        gone = "not yet judged" if url else f"PID {old} exited"
        self.wait(lambda: gone in self.get("/readyz").json()["reason"], "the restart noticed")
        unjudged = self.get("/report")
        error = unjudged.json()["error"]
        assert unjudged.status_code == 503 and "not yet judged" in error, unjudged.text
        at = unjudged.json()["restarted_at"]
        assert (
            f"restarted at {at}, not yet judged" in error or f"server lost at {at}, not yet judged" in error
        )
        server = self.start_server(healthy=healthy, startup=startup)
        seen = self.observe_until_judged(f"http://127.0.0.1:{self.port}" if url else f"PID {server.pid} ", [])
        return server.pid, seen


@contextmanager
def node(tmp: Path) -> Iterator[Node]:
    n = Node(tmp)
    try:
        yield n
    finally:
        for proc in (n.sidecar, n.server):
            if proc is not None:
                stop(proc)


@contextmanager
def decoy(user: User, port: int, *, listen: bool) -> Iterator[subprocess.Popen[bytes]]:
    top = stub_dir(listen=listen)
    proc = start_decoy(top, port, user=user)
    try:
        if listen:
            wait_listening(port, proc, what="decoy", timeout=30)
        yield proc
    finally:
        stop(proc, kill=True)
        remove(top)


def _failing(metrics: str) -> list[str]:
    """The checks /metrics says fail now (``spark_validate_check_status{...,status="fail"} 1.0``)."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        s.labels["check"]
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "spark_validate_check_status" and s.labels.get("status") == "fail" and s.value == 1
    ]


def _before_judged(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return seen[:-1]


def test_restarts_with_a_second_users_decoy_present(tmp_path: Path) -> None:
    """healthy -> broken -> (the port taken by the decoy) -> broken -> healthy, with a decoy of a second
    user present throughout: the broken server stays fail and 503 through each restart, the decoy is never
    judged, and between a restart and the new judgement no endpoint shows the previous verdict."""
    attacker = ensure_user()
    with node(tmp_path) as n:
        first = n.start_server(healthy=True)
        wait_listening(n.port, first, what="simulator", timeout=30)
        n.start_sidecar(first.pid)
        n.wait(lambda: n.get("/readyz").status_code == 200, "the healthy server passing (control)")
        with decoy(attacker, n.port, listen=False) as sleeper:
            # 1. healthy -> broken: the new process (PID above the decoy's) is followed, and it fails
            broken, seen = n.restart(healthy=False, old=first.pid)
            assert sleeper.pid < broken
            n.wait(lambda: n.judged(broken), "the broken server judged")
            assert all(s["readyz"] == 503 for s in seen), [s["readyz"] for s in seen]
            final = n.get("/report").json()
            assert final["verdict"] == "fail", final["verdict"]
            assert {c["id"]: c for c in final["checks"]}["lm_head.fp8"]["status"] == "fail"
            for s in _before_judged(seen):  # until judged: the restart, never the healthy server's pass
                assert s["report"] == 503 and "not yet judged" in s["body"]["error"], s["body"]
                assert s["ready"]["verdict"] == "none" and "restarted_at" in s["ready"], s["ready"]
                # fetched a moment later than /report: the restart, or already the new process's page
                page = s["page"]
                assert ("RESTARTED" in page and "not yet judged" in page) or f"PID {broken} " in page, page
                assert f"PID {first.pid} (http" not in page, page[-800:]  # never its report
            # 2. the second user takes the port in the gap: a listening decoy of theirs is passed over
            assert n.server is not None
            stop(n.server)
            n.wait(lambda: "not yet judged" in n.get("/readyz").json()["reason"], "the restart noticed")
            with decoy(attacker, n.port, listen=True) as squatter:
                n.wait(
                    lambda: (
                        f"PID {squatter.pid} ({attacker.name}, --port {n.port}): another user's process"
                        in n.get("/readyz").json()["reason"]
                    ),
                    "the squatter passed over",
                )
                assert n.get("/readyz").status_code == 503
                assert n.get("/report").status_code == 503
            broken2 = n.start_server(healthy=False).pid
            seen = n.observe_until_judged(f"PID {broken2} ", [sleeper.pid])
            assert all(s["readyz"] == 503 for s in seen)
            # 3. broken -> healthy: "not yet judged" while it loads, then judged and ready
            healthy, seen = n.restart(healthy=True, old=broken2, startup=2.0)
            n.wait(lambda: n.get("/readyz").status_code == 200, "the healthy server ready")
            assert any(s["report"] == 503 for s in seen)  # it loaded for 2 s: seen as not yet judged
            for s in _before_judged(seen):
                assert s["readyz"] == 503 and s["report"] == 503, s
                assert "fail" not in s["ready"]["verdict"] and not s["ready"].get("failed"), s["ready"]
                assert s["failing"] == [], s["failing"]  # nor the metrics: no alert on the old process
            report = n.get("/report").json()
            assert report["verdict"] == "pass" and report["target"].startswith(f"PID {healthy} ")
    assert sleeper.pid not in (first.pid, broken, broken2, healthy)


def test_a_restart_seen_over_url_is_not_yet_judged_either() -> None:
    """``serve --url``: the same defect on the HTTP path (a restart seen by /health or the server's
    identity): between the restart and the new judgement the previous fail is not served as current."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, node(Path(tmp)) as n:
        # over HTTP the process's environment is not read: the broken server is backend-auto
        broken = n.start_server(healthy=True, scenario="backend-auto")
        wait_listening(n.port, broken, what="simulator", timeout=30)
        n.start_sidecar(None, url=True)
        n.wait(
            lambda: n.get("/readyz").json().get("verdict") == "fail", "the broken server failing (control)"
        )
        _, seen = n.restart(healthy=True, old=broken.pid, startup=2.0, url=True)
        n.wait(lambda: n.get("/readyz").status_code == 200, "the healthy server ready")
        assert any(s["report"] == 503 for s in seen)
        for s in _before_judged(seen):
            assert s["report"] == 503 and "not yet judged" in s["body"]["error"], s["body"]
            assert s["ready"]["verdict"] == "none" and not s["ready"].get("failed"), s["ready"]
