"""Waiting for a starting SGLang server to become ready, with visible progress.

Phases: ``connecting`` (refused), ``starting`` (``/health`` 503), ``ready`` (200 and ``/server_info``).
The poll interval grows to a cap of a few seconds; each poll gets what is left of ``wait_s`` as its total
deadline, so a server answering a byte a second ends the wait on time. ``start_failed``
(``start_watch.StartWatch``) ends it at once when the log shows the start died. As the live job's server
source (:func:`gather`), the answer becomes ``facts.server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from validator.errors import UnavailableError
from validator.facts import SERVER, ServerFacts
from validator.redact import neutralize_controls
from validator.sources.gathering import Unreadable
from validator.sources.live_gathering import live_source
from validator.sources.server.client import ServerError, SGLangClient

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering


class Phase(str, Enum):
    CONNECTING = "connecting"  # no HTTP answer yet
    STARTING = "starting"  # /health answers, but not 200 (503 while loading)
    READY = "ready"


@dataclass(frozen=True)
class Progress:
    phase: Phase
    elapsed_s: float
    last_status: int | None  # last /health status code; None before any HTTP answer
    detail: str  # the last error, or ""
    changed: bool  # the phase differs from the previous poll's (log a line)
    polls: int


@dataclass(frozen=True)
class ReadyInfo:
    polls: int
    server_info: dict[str, Any]  # redacted
    server_info_endpoint: str


ProgressCallback = Callable[[Progress], None]
MIN_POLL_S = 3.0  # the deadline of one poll when --wait has (nearly) run out: one honest try
_sleep = asyncio.sleep  # module-level so tests can observe the poll intervals


async def wait_until_ready(
    client: SGLangClient,
    *,
    wait_s: float,
    on_progress: ProgressCallback | None = None,
    first_interval_s: float = 0.25,
    max_interval_s: float = 3.0,
    start_failed: Callable[[], Awaitable[str | None]] | None = None,
) -> ReadyInfo:
    """Poll ``/health`` until 200 and ``/server_info`` is served, or ``wait_s`` runs out (UnavailableError
    naming the URL, phase and last status, exit 69); a malformed ``/server_info`` raises at once."""
    start = time.monotonic()
    deadline = start + max(0.0, wait_s)
    interval = first_interval_s
    phase: Phase | None = None
    last_status: int | None = None
    detail = ""
    polls = 0
    while True:
        polls += 1
        new_phase = Phase.CONNECTING
        try:
            last_status = await client.health(timeout=_budget(client, deadline))
            detail = ""
            new_phase = Phase.STARTING
        except ServerError as exc:
            detail = exc.reason
        if last_status is not None and 400 <= last_status < 500 and new_phase is Phase.STARTING:
            # SGLang serves /health without a key from the moment it listens (200, or 503 while loading);
            # a 4xx there is another program (or a proxy's wrong path), and waiting would not change it.
            raise ServerError(
                client.endpoint("/health"),
                f"HTTP {last_status}: not an SGLang server (SGLang answers /health with 200 or 503, "
                "without a key); check --url",
                last_status,
            )
        info: dict[str, Any] | None = None
        if last_status == 200 and new_phase is Phase.STARTING:
            try:
                info = await client.server_info(timeout=_budget(client, deadline))
                new_phase = Phase.READY
            except ServerError as exc:
                if exc.transient or (exc.status is not None and exc.status >= 500):
                    detail = exc.reason  # still coming up (or briefly gone): keep polling
                else:
                    raise
        elapsed = time.monotonic() - start
        if on_progress is not None:
            on_progress(Progress(new_phase, elapsed, last_status, detail, new_phase != phase, polls))
        phase = new_phase
        if info is not None:
            return ReadyInfo(polls, info, client.server_info_endpoint)
        died = await start_failed() if start_failed is not None else None
        if died is not None:
            raise UnavailableError(
                f"{client.url}: not ready after {elapsed:.1f} s: {died}; not waiting out --wait"
            )
        now = time.monotonic()
        if now >= deadline:
            status = f"last /health status {last_status}" if last_status is not None else "no HTTP answer"
            why = f" ({detail})" if detail else ""
            raise UnavailableError(
                f"{client.url}: not ready after {elapsed:.1f} s (phase {phase.value}, {status}{why}); "
                "raise --wait if the model is still loading"
            )
        await _sleep(min(interval, deadline - now))
        interval = min(interval * 1.5, max_interval_s)


@live_source(SERVER, 10)
async def gather(g: LiveGathering) -> None:
    """The ready server: ``/health`` and ``/server_info`` within ``--wait`` (ended early when the log shows
    the start died), then ``/model_info``, optional evidence. A server that did not become ready is
    unreadable, with what the log's last start said when the wait began."""
    try:
        ready = await wait_until_ready(
            g.client, wait_s=g.inputs.wait_s, on_progress=g.inputs.on_progress, start_failed=g.watch
        )
    except UnavailableError as exc:
        earlier = g.watch.earlier if g.watch is not None else None
        note = f"; the log's last start had failed: {earlier}" if earlier else ""
        raise Unreadable(str(exc) + note) from None
    g.facts.server = ServerFacts(
        url=g.inputs.url,
        healthy=True,
        server_info=ready.server_info,
        server_info_endpoint=ready.server_info_endpoint,
    )
    with contextlib.suppress(UnavailableError):  # optional evidence; /server_info already answered
        g.facts.server.model_info = await g.client.model_info()


def _budget(client: SGLangClient, deadline: float) -> float:
    return min(client.info_timeout, max(MIN_POLL_S, deadline - time.monotonic()))


def format_progress(p: Progress) -> str:
    """One human line: ``starting  42.1s  /health 503``."""
    status = f"/health {p.last_status}" if p.last_status is not None else "no answer"
    tail = f"  {neutralize_controls(p.detail)}" if p.detail else ""  # may quote the server's bytes
    return f"{p.phase.value:<10} {p.elapsed_s:6.1f}s  {status}{tail}"
