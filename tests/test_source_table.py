"""The source tables (``validator/source_table.py``, ``validator/live_table.py``, gathered from the rows
declared beside the readers) against the source modules: every preflight and live reader is a row of its
tuple (a reader whose row was never declared, or whose module the table never imported, is a forgotten
row), the shipped rows keep their order of reading, each row needs only rows above it, a name or rank is
declared once, and coverage names inputs of sources that exist. That each row's reader is a function of
the right type is mypy's (``@preflight_source`` takes a ``Gathering -> None``, ``@live_source`` a
``LiveGathering -> Awaitable[None]``)."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import validator.preflight
from tests.support.in_process import preflight_json_in_process
from tests.support.sglang_builds import fake_interpreter, make_build
from validator.facts import INPUT_FOR_SOURCE, SGLANG, Facts, HostFacts
from validator.live_table import LIVE
from validator.preflight_inputs import PreflightInputs
from validator.source_table import PREFLIGHT, PreflightSource, Source, declaring, read_sources_now
from validator.sources.gathering import Gathering, Rows, Unreadable

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


# The order each table read its rows in before they were declared beside their readers: the ranks keep it.
PREFLIGHT_ORDER = (
    "launch", "plugin", "humming", "host", "dspark_draft", "flashinfer", "start_budget", "checkpoint",
)  # fmt: skip
LIVE_ORDER = (
    "server", "attestation", "log", "metrics", "listener", "progress", "weights_checker", "probe",
    "log_after_probe",
)  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "order"), [(PREFLIGHT, PREFLIGHT_ORDER), (LIVE, LIVE_ORDER)], ids=["preflight", "live"]
)
def test_the_shipped_rows_keep_their_order_of_reading(
    rows: tuple[Source[Any, Any], ...], order: tuple[str, ...]
) -> None:
    """A new row may go anywhere its rank puts it; the shipped ones keep the order they were read in (the
    live one's is a contract: /metrics before the probe, the log again after it)."""
    assert [s.name for s in rows if s.name in order] == list(order)
    ranks = [s.rank for s in rows]
    assert ranks == sorted(set(ranks))  # distinct, read lowest first


def test_a_name_or_a_rank_declared_twice_is_refused() -> None:
    """Either would make the facts key, or the order of reading, depend on which module was imported
    first."""

    def reads(g: Gathering) -> None:
        pass

    toy_source: Rows[Gathering, None] = Rows()
    toy_source("a", 1)(reads)
    with pytest.raises(RuntimeError, match="'a' declared twice"):
        toy_source("a", 2)(reads)
    with pytest.raises(RuntimeError, match="rank 1 is already another row's"):
        toy_source("b", 1)(reads)
    assert list(toy_source.rows) == ["a"] and toy_source.rows["a"] == Source("a", reads, rank=1)


def test_a_table_imports_the_modules_that_declare_a_row_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``declaring`` names the modules whose source declares a row, without importing any: a parser beside
    the readers (or a subpackage) is left unloaded."""
    package = tmp_path / "toy_readers"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("@toy_source('sub', 1)\n")
    (package / "reader.py").write_text("@toy_source('toy', 10)\ndef gather(g): pass\n")
    (package / "parser.py").write_text("raise AssertionError('a parser was imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_readers

    assert list(declaring(toy_readers, "toy_source")) == ["toy_readers.reader"]
    assert "toy_readers.reader" not in sys.modules and "toy_readers.parser" not in sys.modules


def test_a_module_whose_source_cannot_be_read_is_imported_to_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package inside a zip has no source file to read: each of its modules is imported (its rows are
    then found as they register), never passed over."""
    archive = tmp_path / "readers.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_readers/__init__.py", "")
        z.writestr("zipped_readers/reader.py", "@toy_source('toy', 10)\ndef f(): ...\n")
        z.writestr("zipped_readers/parser.py", "X = 1\n")
    monkeypatch.syspath_prepend(str(archive))
    import zipped_readers

    found = sorted(declaring(zipped_readers, "toy_source"))
    assert found == ["zipped_readers.parser", "zipped_readers.reader"]


def test_the_preflight_table_leaves_the_shell_reader_and_the_live_readers_unloaded() -> None:
    """Gathering the preflight rows imports their modules only: not the launcher-script reader (its
    adapter, its path walker or tree-sitter: loaded when a --script or a container's script is read), not
    a live reader, not httpx."""
    code = (
        "import sys, validator.source_table as t; "
        "print(len(t.PREFLIGHT), sorted(m for m in sys.modules if m.startswith(("
        "'validator.sources.launch.script', 'validator.sources.launch.shell.reader', 'tree_sitter', "
        "'validator.sources.server', 'validator.live', 'validator.probe', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split(" ", 1) == [str(len(PREFLIGHT_ORDER)), "[]\n"], out.stdout + out.stderr


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


def _sources_read(monkeypatch: pytest.MonkeyPatch, *args: str) -> set[str]:
    """The preflight rows whose reader a real `preflight` run asked, recorded by a wrapper around each."""
    asked: set[str] = set()

    def spy(row: PreflightSource) -> PreflightSource:
        def reader(g: Gathering) -> None:
            asked.add(row.name)
            row.reader(g)

        return dataclasses.replace(row, reader=reader)

    monkeypatch.setattr(validator.preflight, "PREFLIGHT", tuple(spy(row) for row in PREFLIGHT))
    rc, report, err = preflight_json_in_process({"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}, *args)
    assert report, (rc, err)
    return asked


def test_a_run_reads_the_sources_that_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shipped row's ``applies``: the DSpark draft only under DSPARK, FlashInfer only where the
    server's own install was read, the start budget only from a unit that declares one."""
    base = f"{sys.executable} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend humming"
    nextn = _sources_read(monkeypatch, "--launch-cmd", base + " --speculative-algorithm NEXTN")
    assert {"launch", "host", "checkpoint", "humming"} <= nextn
    assert not nextn & {"dspark_draft", "flashinfer", "start_budget"}, nextn
    dspark = _sources_read(monkeypatch, "--launch-cmd", base + " --speculative-algorithm DSPARK")
    assert "dspark_draft" in dspark and "start_budget" not in dspark
    auto = _sources_read(monkeypatch, "--launch-cmd", base.replace("humming", "auto"))
    assert "flashinfer" not in auto
    site = tmp_path / "site"
    make_build(site)
    python = fake_interpreter(tmp_path / "bin", site)
    served = f"{python} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend auto"
    assert "flashinfer" in _sources_read(monkeypatch, "--launch-cmd", served)
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Service]\nExecStart={base}\nTimeoutStartSec=900\n")
    assert "start_budget" in _sources_read(monkeypatch, "--unit", str(unit))
