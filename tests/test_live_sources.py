"""The live job's loop over ``validator.live_table.LIVE``, against a real simulator and a port where no
server listens: each source is read when the sources it needs were read and it applies, in the table's
order; an unreadable one is ``facts.errors[name]``; a server that is not there still leaves the sources
that do not need it read. And the order that matters: ``/metrics`` is read before the probe, so the
probe's own tokens never count as the server's traffic."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from tests.support import web
from tests.support.loopback import free_port
from tests.support.sim_process import SimProcess, sim_process
from validator import live
from validator.facts import PROBE, SERVER, Facts
from validator.live_inputs import LiveInputs
from validator.live_table import LIVE, LiveSource
from validator.rulepack import load_pack
from validator.source_table import Source
from validator.sources.gathering import Unreadable
from validator.sources.live_gathering import LiveGathering
from validator.sources.server.metrics_reading import parse_metrics

LiveReader = Callable[[LiveGathering], Awaitable[None]]

# What the toy readers saw, in the order they ran: (row, whether the server had been read).
SEEN: list[tuple[str, bool]] = []


async def _saw(g: LiveGathering) -> None:
    SEEN.append(("saw", g.facts.server is not None))


async def _unreadable(g: LiveGathering) -> None:
    SEEN.append(("toy", g.facts.server is not None))
    raise Unreadable("the toy's evidence is not there")


async def _never(g: LiveGathering) -> None:
    SEEN.append(("never", True))


def _no(g: LiveGathering) -> bool:
    return False


def _toy(name: str, reader: LiveReader, needs: tuple[str, ...] = (), applies: bool = True) -> LiveSource:
    return Source(name, reader, needs, None if applies else _no)


TOYS = (
    _toy("before", _saw),  # needs nothing: read first, before the server is known
    _toy("toy", _unreadable),
    _toy("after_toy", _never, needs=("toy",)),  # its need was unreadable
    _toy("after_server", _saw, needs=(SERVER,)),
    _toy("not_applying", _never, applies=False),
)


@pytest.fixture
def toy_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shipped rows with the toys around the server's: one before it, the rest after."""
    SEEN.clear()
    monkeypatch.setattr(live, "LIVE", (TOYS[0], LIVE[0], *TOYS[1:], *LIVE[1:]))
    yield
    SEEN.clear()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_process(
        tmp_path_factory.mktemp("live-sources"), "--scenario", "healthy", "--enable-metrics"
    ) as sim:
        yield sim


def _gather(url: str, *, probe: bool, log: Path | None = None) -> Facts:
    return asyncio.run(
        live.gather_live(LiveInputs(url=url, log=log, wait_s=5.0), load_pack(None), probe=probe)
    )


@pytest.mark.usefixtures("toy_rows")
def test_each_row_is_read_when_its_needs_are_and_it_applies(healthy: SimProcess) -> None:
    facts = _gather(healthy.url, probe=False, log=healthy.log)
    assert SEEN == [("saw", False), ("toy", True), ("saw", True)]
    assert facts.errors["toy"] == "the toy's evidence is not there"
    assert "after_toy" not in facts.errors and "not_applying" not in facts.errors
    assert facts.server is not None and facts.log is not None  # the shipped rows around the toys ran


@pytest.mark.usefixtures("toy_rows")
def test_a_server_that_is_not_there_leaves_the_rows_that_do_not_need_it(healthy: SimProcess) -> None:
    facts = asyncio.run(
        live.gather_live(
            LiveInputs(url=f"http://127.0.0.1:{free_port()}", log=healthy.log, wait_s=0.0), load_pack(None)
        )
    )
    assert "not ready" in facts.errors[SERVER]
    assert SEEN == [("saw", False), ("toy", False)]  # after_server needs the server
    assert facts.log is not None  # the log is read without a server (it may say why it is not there)
    assert PROBE not in facts.errors and facts.probe is None


def test_metrics_are_read_before_the_probe(healthy: SimProcess) -> None:
    """A fresh server has generated nothing but the probe's tokens: the reading the checks judge was
    taken before them, and a reading taken after shows them."""
    facts = _gather(healthy.url, probe=True)
    assert facts.probe is not None and facts.probe.completion_tokens > 0, facts.errors
    assert facts.server is not None and facts.server.metrics is not None
    before = facts.server.metrics.reading
    assert before is not None and not before.generation_tokens
    after = parse_metrics(web.get(f"{healthy.url}/metrics", timeout=10).text)
    assert after.generation_tokens is not None and after.generation_tokens >= facts.probe.completion_tokens
