"""The sidecar's HTTP protocol, in-process on a real loopback socket: framing, keep-alive, pipelining,
methods, redaction, and that nothing but the latched state decides the answers."""

from __future__ import annotations

import asyncio
import json
import time

from validator.daemon.endpoints import Endpoints
from validator.daemon.http import SidecarServer
from validator.daemon.metrics import DaemonMetrics
from validator.daemon.state import DaemonState
from validator.report import CheckResult, Report, Severity, Status, Verdict


def _report(verdict: Verdict, status: Status = Status.PASS) -> Report:
    check = CheckResult(
        id="server.ready",
        status=status,
        severity=Severity.CRITICAL,
        message="m",
        evidence={"api_key": "sk-SECRET-123", "url": "http://x"},
    )
    return Report(
        mode="check", verdict=verdict, rule_pack="p", started_at="t", duration_s=0.5, checks=[check]
    )


async def _exchange(port: int, raw: bytes, n: int = 1) -> list[tuple[int, dict[str, str], bytes]]:
    """Send raw bytes, read ``n`` responses (Content-Length framed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    out = []
    for _ in range(n):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        length = int(headers["content-length"])
        body = await reader.readexactly(length) if length and b"HEAD" not in raw[:4] else b""
        out.append((status, headers, body))
    writer.close()
    return out


def _run(coro_fn: object) -> None:
    async def main() -> None:
        state, metrics = DaemonState(), DaemonMetrics()
        server = SidecarServer(Endpoints(state, metrics, secrets=("hf_token",), livez_stale_s=0.3))
        _, port = await server.start("127.0.0.1", 0)
        try:
            await coro_fn(state, metrics, port)  # type: ignore[operator]
        finally:
            await server.close()

    asyncio.run(main())


def test_readyz_follows_the_latch_and_report_is_redacted() -> None:
    async def body(state: DaemonState, metrics: DaemonMetrics, port: int) -> None:
        [(s, _, b)] = await _exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 503 and json.loads(b)["verdict"] == "none"
        [(s, _, b)] = await _exchange(port, b"GET /report HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 503
        state.latch(_report(Verdict.PASS), ready=True, reason="")
        [(s, h, b)] = await _exchange(port, b"GET /readyz?timeout=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200
        assert json.loads(b) == {"ready": True, "verdict": "pass", "partial": False, "phase": "starting"}
        assert h["content-type"] == "application/json" and len(b) < 200
        [(s, h, b)] = await _exchange(port, b"GET /readyz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200 and h["content-type"].startswith("text/plain")
        assert b.decode().splitlines() == ["[+]server.ready ok", "readyz check passed"]
        [(s, _, b)] = await _exchange(port, b"GET /report HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200 and b"sk-SECRET-123" not in b and json.loads(b)["checks"][0]["evidence"]["url"]
        state.drop("server /health stopped answering 200")
        [(s, _, b)] = await _exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 503 and json.loads(b)["reason"].startswith("server /health")

    _run(body)


def test_keep_alive_pipelining_head_and_errors() -> None:
    async def body(state: DaemonState, metrics: DaemonMetrics, port: int) -> None:
        paths = (b"/livez", b"/metrics", b"/nope")
        pipelined = b"".join(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % p for p in paths)
        (s1, _, _), (s2, h2, b2), (s3, _, _) = await _exchange(port, pipelined, 3)
        assert (s1, s2, s3) == (200, 200, 404)
        assert b"spark_validate_ready 0.0" in b2 and h2["content-type"].startswith("text/plain")
        [(s, h, b)] = await _exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200 and int(h["content-length"]) > 100 and b == b""
        [(s, h, _)] = await _exchange(port, b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert s == 405 and h["allow"] == "GET, HEAD"
        [(s, h, _)] = await _exchange(
            port, b"GET /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        )
        assert s == 413 and h["connection"] == "close"
        [(s, _, _)] = await _exchange(port, b"garbage\r\n\r\n")
        assert s == 400
        [(s, _, _)] = await _exchange(port, b"GET /" + b"a" * 9000)
        assert s == 431  # a head still incomplete past 8 KiB
        [(s, _, _)] = await _exchange(
            port, b"GET /livez HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 9000 + b"\r\n\r\n"
        )
        assert s == 431  # a complete head over 8 KiB, arrived in one read
        [(s, h, _)] = await _exchange(port, b"GET /readyz HTTP/1.0\r\n\r\n")
        assert s == 503 and h["connection"] == "close"

    _run(body)


def test_livez_reads_the_scheduler_heartbeat() -> None:
    async def body(state: DaemonState, metrics: DaemonMetrics, port: int) -> None:
        state.touch()
        [(s, _, _)] = await _exchange(port, b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200
        time.sleep(0.35)  # the loop "wedged": nobody touched the heartbeat
        [(s, _, b)] = await _exchange(port, b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 503 and json.loads(b) == {"alive": False}
        # /metrics stays 200 whatever readiness and liveness say (goss #992)
        [(s, _, _)] = await _exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s == 200

    _run(body)


def test_metrics_follow_reports() -> None:
    m = DaemonMetrics()
    m.observe(_report(Verdict.FAIL, Status.FAIL), end=1000.0, probed=True)
    text = m.render().decode()
    assert 'spark_validate_check_passed{check="server.ready",severity="critical"} 0.0' in text
    assert 'spark_validate_runs_total{verdict="fail"} 1.0' in text
    assert "spark_validate_last_run_timestamp_seconds 1000.0" in text
    assert "spark_validate_last_success_timestamp_seconds 0.0" in text
    m.observe(_report(Verdict.PASS), end=2000.0, probed=False)
    m.set_ready(True)
    text = m.render().decode()
    assert 'spark_validate_check_passed{check="server.ready",severity="critical"} 1.0' in text
    assert "spark_validate_last_success_timestamp_seconds 2000.0" in text
    assert "spark_validate_ready 1.0" in text
    m.set_build_info("0.5.23", "/models/Ling")
    text = m.render().decode()
    assert text.count("spark_validate_build_info{") == 1 and 'sglang_version="0.5.23"' in text
