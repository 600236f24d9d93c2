from __future__ import annotations

import asyncio
import io
import json
import sys
import time

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.loopback import free_port
from tests.support.probe_live_server import serve
from validator.commands.check import TerminalProgress
from validator.errors import UnavailableError
from validator.sources.server.client import ServerError, SGLangClient
from validator.sources.server.readiness import Phase, Progress, format_progress, wait_until_ready

KEY = "sk-ready-9c1d2e3f"


def _starting_app(not_ready_polls: int, info_status: int = 200, info_body: bytes | None = None) -> Starlette:
    """/health answers 503 for the first polls, then 200; /server_info echoes the key like SGLang."""
    state = {"health": 0}

    async def health(request: Request) -> Response:
        state["health"] += 1
        return Response(status_code=503 if state["health"] <= not_ready_polls else 200)

    async def server_info(request: Request) -> Response:
        body = info_body or json.dumps({"status": "ready", "api_key": KEY}).encode()
        return Response(body, status_code=info_status, media_type="application/json")

    return Starlette(routes=[Route("/health", health), Route("/server_info", server_info)])


def test_waits_through_503_then_ready_with_phase_lines() -> None:
    seen: list[Progress] = []
    with serve(_starting_app(not_ready_polls=3)) as url:
        client = SGLangClient(url, api_key=KEY)
        info = asyncio.run(
            wait_until_ready(
                client, wait_s=20, on_progress=seen.append, first_interval_s=0.01, max_interval_s=0.05
            )
        )
    assert info.polls == 4 and info.server_info["api_key"] == "<redacted>"
    assert [p.phase for p in seen] == [Phase.STARTING] * 3 + [Phase.READY]
    assert [p.changed for p in seen] == [True, False, False, True]
    assert seen[0].last_status == 503 and seen[-1].last_status == 200
    assert [p.elapsed_s for p in seen] == sorted(p.elapsed_s for p in seen)
    assert "starting" in format_progress(seen[0]) and "/health 503" in format_progress(seen[0])


def test_server_that_appears_late_goes_connecting_starting_ready() -> None:
    port = free_port()
    seen: list[Progress] = []

    async def go() -> None:
        client = SGLangClient(f"http://127.0.0.1:{port}", connect_timeout=0.5)
        task = asyncio.create_task(
            wait_until_ready(
                client, wait_s=20, on_progress=seen.append, first_interval_s=0.02, max_interval_s=0.1
            )
        )
        await asyncio.sleep(0.3)
        with serve(_starting_app(not_ready_polls=1), port=port):
            await asyncio.wait_for(task, 15)

    asyncio.run(go())
    phases = [p.phase for p in seen if p.changed]
    assert phases == [Phase.CONNECTING, Phase.STARTING, Phase.READY]
    assert seen[0].last_status is None and "connection failed" in seen[0].detail


def test_not_ready_in_time_names_url_and_status() -> None:
    with serve(_starting_app(not_ready_polls=10_000)) as url:
        t0 = time.monotonic()
        with pytest.raises(UnavailableError) as err:
            asyncio.run(wait_until_ready(SGLangClient(url), wait_s=0.5, first_interval_s=0.05))
        took = time.monotonic() - t0
    assert err.value.exit_code == 69 and took < 5
    assert str(err.value).startswith(f"{url}: not ready after") and "last /health status 503" in str(
        err.value
    )


def test_unreachable_reports_no_answer() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UnavailableError, match=r"phase connecting, no HTTP answer \(connection failed"):
        asyncio.run(
            wait_until_ready(SGLangClient(url, connect_timeout=0.2), wait_s=0.3, first_interval_s=0.05)
        )


def test_interval_grows_but_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        sleeps.append(delay)
        await real_sleep(0)

    monkeypatch.setattr("validator.sources.server.readiness._sleep", recording_sleep)
    with serve(_starting_app(not_ready_polls=12)) as url:
        info = asyncio.run(
            wait_until_ready(SGLangClient(url), wait_s=600, first_interval_s=0.25, max_interval_s=3.0)
        )
    assert info.polls == 13 and len(sleeps) == 12
    assert sleeps[:3] == pytest.approx([0.25, 0.375, 0.5625])
    assert max(sleeps) == pytest.approx(3.0) and sleeps[-1] == pytest.approx(3.0)


def test_malformed_server_info_fails_at_once() -> None:
    with serve(_starting_app(0, info_body=b'{"status": "ready",')) as url:
        t0 = time.monotonic()
        with pytest.raises(ServerError, match="/server_info: invalid JSON at byte"):
            asyncio.run(wait_until_ready(SGLangClient(url), wait_s=30))
        assert time.monotonic() - t0 < 5


def test_wrong_key_fails_at_once() -> None:
    with serve(_starting_app(0, info_status=401)) as url, pytest.raises(ServerError, match="HTTP 401"):
        asyncio.run(wait_until_ready(SGLangClient(url), wait_s=30))


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_status_line_is_redrawn_on_a_terminal_and_a_line_per_phase_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``check --wait`` on a terminal keeps one status line, redrawn at each poll and cleared at the end;
    into a log it writes a line only when the phase changes. The default stream is stderr as it is when
    the check starts (a terminal there: the redrawn line)."""
    polls = [
        Progress(Phase.STARTING, 0.5, 503, "", changed=True, polls=1),
        Progress(Phase.STARTING, 1.0, 503, "", changed=False, polls=2),
        Progress(Phase.READY, 1.5, 200, "", changed=True, polls=3),
    ]
    terminal = _Stream(tty=True)
    monkeypatch.setattr(sys, "stderr", terminal)
    shown = TerminalProgress()
    for p in polls:
        shown(p)
    shown.done()
    assert terminal.getvalue() == "".join("\r\x1b[2K" + format_progress(p) for p in polls) + "\r\x1b[2K"
    log = _Stream(tty=False)
    logged = TerminalProgress(log)
    for p in polls:
        logged(p)
    logged.done()
    assert log.getvalue() == format_progress(polls[0]) + "\n" + format_progress(polls[2]) + "\n"
