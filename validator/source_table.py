"""Every preflight source, declared once (``validator.live_table`` declares the live ones): its name (the
key of ``Facts.errors`` and of a result's ``sources``), what it needs read first, when it applies, and its
reader, a function typed for what it is given (``Gathering``; a live reader is a coroutine given a
``LiveGathering``).

``preflight.gather`` loops over ``PREFLIGHT`` in order: a source needs only sources above it
(``tests/test_source_table.py``). The input that would prove a source's checks is coverage's
(``validator.facts.INPUT_FOR_SOURCE``), which outputs read without importing any reader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from validator import facts as f
from validator.facts import Facts
from validator.sources.gathering import Gathering, Unreadable, permission_denied
from validator.sources.host import checkpoint, dspark_draft, flashinfer, humming, platform
from validator.sources.launch import source as launch_source
from validator.sources.launch import start_budget
from validator.sources.sglang import plugin_env


class _Given(Protocol):  # what every reader is given holds the facts (Gathering, LiveGathering)
    @property
    def facts(self) -> Facts: ...


G = TypeVar("G", bound=_Given)  # what the reader is given: ``Gathering`` (preflight) or ``LiveGathering``
R = TypeVar("R", covariant=True)  # what it returns: None (preflight), an awaitable of None (live)


@dataclass(frozen=True)
class Source(Generic[G, R]):
    name: str  # the facts key: ``facts.errors[name]``, a check result's ``sources``
    reader: Callable[[G], R]  # reads it and puts its record on ``g.facts``; ``Unreadable``: why not
    needs: tuple[str, ...] = ()  # sources that must have been read before it (their records are set)
    applies: Callable[[G], bool] | None = None  # None: whenever its needs are read


PreflightSource = Source[Gathering, None]


def _installed(g: Gathering) -> bool:
    """The server's own SGLang was read (its site directories are the server's)."""
    return g.sglang.root is not None


def _dspark(g: Gathering) -> bool:
    return str(g.launch.args.get("speculative_algorithm") or "").upper() == "DSPARK"


def _flashinfer_path(g: Gathering) -> bool:
    """FlashInfer's MoE kernels matter only on the flashinfer_mxfp4 path ('auto' resolves to it here)."""
    return _installed(g) and g.launch.args.get("moe_runner_backend") in ("flashinfer_mxfp4", "auto")


def _supervised(g: Gathering) -> bool:
    return g.inputs.kube_manifest is not None or g.inputs.unit is not None


PREFLIGHT: tuple[PreflightSource, ...] = (
    Source(f.LAUNCH, launch_source.gather),
    Source("plugin", plugin_env.gather, needs=(f.LAUNCH,), applies=_installed),  # cites launch and install
    Source(f.HUMMING, humming.gather, needs=(f.LAUNCH,)),
    Source(f.HOST, platform.gather),
    Source(f.DSPARK_DRAFT, dspark_draft.gather, needs=(f.LAUNCH,), applies=_dspark),
    Source(f.FLASHINFER, flashinfer.gather, needs=(f.LAUNCH, f.HOST), applies=_flashinfer_path),
    Source("start_budget", start_budget.gather, needs=(f.LAUNCH,), applies=_supervised),  # cites the launch
    Source(f.CHECKPOINT, checkpoint.gather, needs=(f.LAUNCH, f.HOST)),
)


async def read_sources(rows: Sequence[Source[G, Awaitable[None] | None]], g: G) -> None:
    """The one gathering loop: each row in order, when the sources it needs were read and it applies
    (asked only then). What a reader could not read is ``facts.errors[name]`` (``Unreadable``, or a path
    under a directory this user may not enter), and the rows that need it are passed over."""
    read: set[str] = set()
    for source in rows:
        if not read.issuperset(source.needs) or (source.applies is not None and not source.applies(g)):
            continue
        try:
            pending = source.reader(g)
            if pending is not None:
                await pending
        except Unreadable as exc:
            g.facts.errors[source.name] = str(exc)
            continue
        except PermissionError as exc:
            g.facts.errors[source.name] = permission_denied(exc)
            continue
        read.add(source.name)


def read_sources_now(rows: Sequence[PreflightSource], g: Gathering) -> None:
    """Preflight's entry to the loop: its readers are plain functions, so the loop never waits, and it is
    run to its end here without an event loop (preflight is also called from inside one: ``serve``'s
    running job)."""
    loop = read_sources(rows, g)
    try:
        loop.send(None)
    except StopIteration:
        return
    loop.close()
    raise RuntimeError("a preflight reader waited: preflight readers are plain functions")
