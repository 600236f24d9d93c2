"""The live job in-process against the simulator's ASGI app, through ``LiveInputs.transport``
(``httpx.ASGITransport``): for tests whose subject is the verdict, not the process (exit codes, stderr,
signals and sockets keep real processes). ``tests/test_live_in_process.py`` holds it to the real CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from validator.live import run_live
from validator.live_inputs import LiveInputs
from validator.rulepack import load_pack
from validator.sim import scenarios
from validator.sim.app import create_app
from validator.sim.engine import SimConfig, SimEngine


async def statuses_in_process(scenario: str, tmp: Path) -> dict[str, str]:
    """Each check's status and the verdict of one live check (default pack, HTTP alone) of ``scenario``,
    judged in this process against the simulator's ASGI app: no socket, no child process. The simulator's
    log and attestation go to ``tmp`` (never a default location another test or worker shares)."""
    config = SimConfig(
        scenario=scenarios.resolve(scenario),
        speed=1000.0,
        startup_seconds=0.3,
        log_path=tmp / "sglang.log",
        attestation_path=tmp / "attestation.json",
    )
    engine = SimEngine(config)
    engine.bind(30000)
    assert await engine.load()
    warm = asyncio.create_task(engine.warm_up())
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        inputs = LiveInputs(url="http://127.0.0.1:30000", wait_s=20.0, transport=transport)
        result = await run_live(inputs, load_pack(None))
    finally:
        warm.cancel()
        engine.close()
    return {r.id: r.status.value for r in result.report.checks} | {"verdict": result.report.verdict.value}
