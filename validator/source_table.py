"""The preflight table, gathered from its rows, and the one gathering loop that reads a table.

Each source's row is declared beside its reader (``@preflight_source`` in ``validator.sources.gathering``,
``@live_source`` in ``validator.sources.live_gathering``): its name (the key of ``Facts.errors`` and of a
result's ``sources``), its rank, what it needs read first and when it applies. A table is every row of its
kind from the declaring modules of its reader packages, by rank: a new source is its module and nothing
else, with no list to forget. A row needs only rows read before it (``tests/test_source_table.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from types import ModuleType

import validator.sources.host
import validator.sources.launch
import validator.sources.sglang
from validator.sources.gathering import (
    G,
    Gathering,
    PreflightSource,
    R,
    Source,
    Unreadable,
    permission_denied,
    preflight_source,
)
from validator.trusted_files import read_as

__all__ = ["PREFLIGHT", "PreflightSource", "Source", "read_sources", "read_sources_now", "table"]


def declaring(package: ModuleType, decorator: str) -> Iterator[str]:
    """The modules of ``package`` (not its subpackages) whose source declares a row with ``decorator``.
    Reading the bytes is what keeps a parser beside the readers unloaded; a reader whose module this
    missed is no row, which ``tests/test_source_table.py`` fails on."""
    marker = f"@{decorator}(".encode()
    for found in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        spec = importlib.util.find_spec(found.name)
        if found.ispkg or spec is None or spec.origin is None:
            continue
        declares = True  # without a source file to read (a zip or compiled-only install): imported to see
        if spec.origin.endswith(".py"):
            try:
                with open(spec.origin, "rb") as source:
                    declares = marker in source.read()
            except OSError:
                pass
        if declares:
            yield found.name


def table(
    packages: Sequence[ModuleType], decorator: str, rows: Mapping[str, Source[G, R]]
) -> tuple[Source[G, R], ...]:
    """Every row of one kind: the declaring modules of ``packages`` imported (their rows land in
    ``rows``), in rank order."""
    for package in packages:
        for module in declaring(package, decorator):
            importlib.import_module(module)
    return tuple(sorted(rows.values(), key=lambda row: row.rank))


PREFLIGHT: tuple[PreflightSource, ...] = table(
    (validator.sources.launch, validator.sources.sglang, validator.sources.host),
    "preflight_source",
    preflight_source.rows,
)


async def read_sources(rows: Sequence[Source[G, Awaitable[None] | None]], g: G) -> None:
    """The one gathering loop: each row in order, when the sources it needs were read and it applies
    (asked only then). What a reader could not read is ``facts.errors[name]`` (``Unreadable``, or a path
    under a directory this user may not enter), and the rows that need it are passed over."""
    read: set[str] = set()
    for source in rows:
        if not read.issuperset(source.needs) or (source.applies is not None and not source.applies(g)):
            continue
        # what the launch names is read only as far as the owners of its files could (trusted_files.read_as)
        launch = g.facts.launch
        try:
            with read_as(launch.named_by if launch is not None else {}):
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
