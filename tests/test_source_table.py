"""The source tables (``validator/source_table.py``, ``validator/live_table.py``) against the source
modules: every preflight and live reader is a row of its tuple (a reader nobody reads is a forgotten row),
each row needs only rows above it, and coverage names inputs of sources that exist. That each row's
reader is a function of the right type is mypy's (``Source[Gathering, None]``, and a coroutine function
for ``Source[LiveGathering, Awaitable[None]]``)."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from validator.facts import INPUT_FOR_SOURCE, SGLANG, Facts, HostFacts
from validator.live_table import LIVE
from validator.preflight_inputs import PreflightInputs
from validator.source_table import PREFLIGHT, PreflightSource, Source, read_sources_now
from validator.sources.gathering import Gathering, Unreadable

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "validator"
_KINDS = ("Gathering", "LiveGathering")  # what a preflight reader is given, what a live one is


def readers_in(package: Path, name: str = "validator") -> dict[str, str]:
    """Every reader under ``package``, read with ``ast`` (so a module that would fail to import is still
    seen): a public module-level function, plain or async, whose first parameter is a ``Gathering`` or a
    ``LiveGathering``, or any module-level ``gather``. Named as a row names it (``module``, its
    ``gather``; ``module:function``), mapped to the type its first parameter is given ("" if none)."""
    out: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        module = ".".join((name, *parts[: -1 if parts[-1] == "__init__" else None]))
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            first = node.args.args[0].annotation if node.args.args else None
            kind = first.id if isinstance(first, ast.Name) else ""
            if node.name == "gather" or kind in _KINDS:
                if node.name == "gather" and kind not in _KINDS and "sources" not in parts[:-1]:
                    continue  # a job's own gather (``preflight.gather(inputs)``), not a source's reader
                out[module if node.name == "gather" else f"{module}:{node.name}"] = kind
    return out


def _spec(reader: Callable[..., object]) -> str:
    """A row's reader named as ``readers_in`` names it: ``module`` (its ``gather``), else ``module:name``."""
    return reader.__module__ if reader.__name__ == "gather" else f"{reader.__module__}:{reader.__name__}"


def not_listed(found: dict[str, str]) -> list[str]:
    """The readers no row of their tuple names: a preflight one not in ``PREFLIGHT``, a live one not in
    ``LIVE``, one of neither kind (a ``gather`` in ``validator/sources`` given something else) always."""
    rows = {
        "Gathering": {_spec(s.reader) for s in PREFLIGHT},
        "LiveGathering": {_spec(s.reader) for s in LIVE},
    }
    return sorted(spec for spec, kind in found.items() if spec not in rows.get(kind, set()))


def test_every_reader_is_a_row_of_its_tuple() -> None:
    found = readers_in(PACKAGE)
    assert not_listed(found) == []
    assert {_spec(s.reader) for s in (*PREFLIGHT, *LIVE)} <= set(
        found
    )  # and the scan sees every row's reader


def test_a_forgotten_row_is_found(tmp_path: Path) -> None:
    """The check above, on a package holding sources nobody listed, preflight and live (and a helper
    module, which is not a source)."""
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "toy.py").write_text("def gather(g: Gathering) -> None:\n    g.facts.errors['toy'] = 'read'\n")
    (sources / "live_toy.py").write_text(
        "async def gather(g: LiveGathering) -> None:\n    pass\n\n\n"
        "async def gather_again(g: LiveGathering) -> None:\n    pass\n"
    )
    (sources / "untyped.py").write_text("def gather(g):\n    pass\n")
    (sources / "helper.py").write_text(
        "def read(path):\n    return path\n\n\ndef _ok(g: Gathering) -> bool:\n    return True\n"
    )
    found = readers_in(tmp_path, "validator")
    assert found == {
        "validator.sources.toy": "Gathering",
        "validator.sources.live_toy": "LiveGathering",
        "validator.sources.live_toy:gather_again": "LiveGathering",
        "validator.sources.untyped": "",
    }
    assert not_listed(found) == sorted(found)
    assert not_listed({"validator.sources.server.readiness": "LiveGathering"}) == []  # the server's row
    assert not_listed({"validator.sources.server.readiness": "Gathering"}) == [
        "validator.sources.server.readiness"
    ]


@pytest.mark.parametrize("rows", [PREFLIGHT, LIVE], ids=["preflight", "live"])
def test_names_are_unique_and_needs_come_first(rows: tuple[Source[Any, Any], ...]) -> None:
    names = [s.name for s in (*PREFLIGHT, *LIVE)]
    assert len(names) == len(set(names))
    above: set[str] = set()
    for s in rows:
        assert set(s.needs) <= above, f"{s.name} needs {set(s.needs) - above}, which is not read before it"
        above.add(s.name)


def test_coverage_names_inputs_of_sources_that_exist() -> None:
    """A misspelt key would leave its source's unproven checks without the input that proves them."""
    names = {s.name for s in (*PREFLIGHT, *LIVE)} | {SGLANG}  # the install is read with the launch
    assert set(INPUT_FOR_SOURCE) <= names, set(INPUT_FOR_SOURCE) - names
    assert INPUT_FOR_SOURCE["checkpoint"] == "--model-dir (or a local --model-path)"


def test_a_declarative_fact_path_reads_a_typed_field_only() -> None:
    """A source's record is a typed field of ``Facts``; a rule's path resolves through the fields, and
    there is no untyped slot a path could name instead (``records`` was one)."""
    host = HostFacts(
        machine="aarch64", mem_total_bytes=128 << 30, gpu_name="NVIDIA GB10", is_dgx_spark=True,
        service_user=None, home=None,
    )  # fmt: skip
    facts = Facts(host=host)
    assert facts.lookup("host.gpu_name") == "NVIDIA GB10"
    for path in ("records", "records.host", "host.missing", "nothing.here"):
        with pytest.raises(KeyError):
            facts.lookup(path)


def _rows_seen(seen: list[str]) -> tuple[PreflightSource, ...]:
    """Toy preflight rows: one unreadable, one that needs it, one under a directory it may not enter, one
    that does not apply, and one that reads."""

    def unreadable(g: Gathering) -> None:
        seen.append("unreadable")
        raise Unreadable("not there")

    def needs_it(g: Gathering) -> None:
        seen.append("needs_it")

    def denied(g: Gathering) -> None:
        seen.append("denied")
        raise PermissionError(13, "Permission denied", "/root/secret")

    def reads(g: Gathering) -> None:
        seen.append("reads")

    return (
        Source("a", unreadable),
        Source("b", needs_it, needs=("a",)),
        Source("c", denied),
        Source("d", needs_it, applies=lambda g: False),
        Source("e", reads),
    )


def test_the_sync_entry_runs_the_one_loop_also_inside_an_event_loop() -> None:
    """Preflight's entry needs no event loop and works inside one (``serve``'s running job calls
    preflight's gather there): asyncio.run would refuse that. Errors land in ``facts.errors``; a row
    whose need failed, or that does not apply, is never asked."""
    for inside_a_loop in (False, True):
        seen: list[str] = []
        g = Gathering(PreflightInputs(), Facts(mode="preflight"))
        if inside_a_loop:
            asyncio.run(_in_a_loop(_rows_seen(seen), g))
        else:
            read_sources_now(_rows_seen(seen), g)
        assert seen == ["unreadable", "denied", "reads"]
        assert g.facts.errors == {
            "a": "not there",
            "c": "cannot read /root/secret: permission denied (run as root or as a user who may read it)",
        }


async def _in_a_loop(rows: tuple[PreflightSource, ...], g: Gathering) -> None:
    read_sources_now(rows, g)
