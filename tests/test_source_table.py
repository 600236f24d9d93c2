"""The source table (``validator/source_table.py``) against the source modules: every preflight and live
reader is a row of its tuple, every row's reader resolves, each row needs only rows above it, and a
preflight run imports the modules of the sources that apply and no others (preflight runs in the server's
start-up)."""

from __future__ import annotations

import ast
import importlib
import inspect
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sglang_builds import fake_interpreter, make_build
from validator import source_table
from validator.coverage import INPUT_FOR_SOURCE
from validator.facts import Facts, HostFacts
from validator.source_table import LIVE, PREFLIGHT, SOURCES

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


def not_listed(found: dict[str, str]) -> list[str]:
    """The readers no row of their tuple names: a preflight one not in ``PREFLIGHT``, a live one not in
    ``LIVE``, one of neither kind (a ``gather`` in ``validator/sources`` given something else) always."""
    rows = {"Gathering": {s.reader for s in PREFLIGHT}, "LiveGathering": {s.reader for s in LIVE}}
    return sorted(spec for spec, kind in found.items() if spec not in rows.get(kind, set()))


def test_every_reader_is_a_row_of_its_tuple() -> None:
    found = readers_in(PACKAGE)
    assert not_listed(found) == []
    assert {s.reader for s in (*PREFLIGHT, *LIVE)} <= set(found)  # and the scan sees every row's reader


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


@pytest.mark.parametrize("source", PREFLIGHT, ids=lambda s: s.name)
def test_each_reader_resolves_to_a_typed_gather(source: source_table.Source) -> None:
    assert source.reader is not None
    gather = importlib.import_module(source.reader).gather
    params = list(inspect.signature(gather).parameters.values())
    assert [p.annotation for p in params] == ["Gathering"], source.reader
    assert inspect.signature(gather).return_annotation == "None", source.reader


@pytest.mark.parametrize("source", LIVE, ids=lambda s: s.name)
def test_each_live_reader_resolves_to_a_typed_coroutine(source: source_table.Source[object]) -> None:
    """Async, so that the sidecar's event loop is never blocked by it (its file reads go to threads)."""
    assert source.reader is not None
    module, _, name = source.reader.partition(":")
    gather = getattr(importlib.import_module(module), name or "gather")
    assert inspect.iscoroutinefunction(gather), source.reader
    params = list(inspect.signature(gather).parameters.values())
    assert [p.annotation for p in params] == ["LiveGathering"], source.reader
    assert inspect.signature(gather).return_annotation == "None", source.reader


@pytest.mark.parametrize("rows", [PREFLIGHT, LIVE], ids=["preflight", "live"])
def test_names_are_unique_and_needs_come_first(rows: tuple[source_table.Source[object], ...]) -> None:
    names = [s.name for s in SOURCES]
    assert len(names) == len(set(names))
    above: set[str] = set()
    for s in rows:
        assert set(s.needs) <= above, f"{s.name} needs {set(s.needs) - above}, which is not read before it"
        above.add(s.name)


def test_coverage_names_the_input_each_source_declares() -> None:
    declared = {s.name: s.proven_by for s in SOURCES if s.proven_by}
    assert declared == INPUT_FOR_SOURCE
    assert INPUT_FOR_SOURCE["checkpoint"] == "--model-dir (or a local --model-path)"


# The CLI run in a child process, which then names the validator.sources modules it imported
# (``host.platform``).
_RUN = """
import sys
from validator.cli import main
try:
    main(["preflight", "--format", "json", *sys.argv[1:]])
except SystemExit:
    pass
finally:
    prefix = "validator.sources."
    print(" ".join(m.removeprefix(prefix) for m in sys.modules if m.startswith(prefix)))
"""


def _imported_sources(*args: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(REPO / ".pytest-tmp")},
    )
    assert run.stdout.startswith("{"), run.stderr[-2000:]
    return set(run.stdout.strip().splitlines()[-1].split())


def test_a_run_imports_the_readers_of_the_sources_that_apply(tmp_path: Path) -> None:
    python = shlex.quote(sys.executable)  # the checkout's path may have spaces
    base = f"{python} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend humming"
    nextn = _imported_sources("--launch-cmd", base + " --speculative-algorithm NEXTN")
    assert {"launch.source", "host.platform", "host.checkpoint"} <= nextn
    assert not nextn & {
        "host.dspark_draft",
        "host.flashinfer",
        "launch.start_budget",
        "host.hf_cache",
        "launch.docker_run",
    }, nextn
    dspark = _imported_sources("--launch-cmd", base + " --speculative-algorithm DSPARK")
    assert "host.dspark_draft" in dspark and "launch.start_budget" not in dspark
    auto = _imported_sources("--launch-cmd", base.replace("humming", "auto"))
    assert "host.flashinfer" not in auto  # it applies only where the server's own install was read
    site = tmp_path / "site"
    make_build(site)
    python = fake_interpreter(tmp_path / "bin", site)
    served = f"{python} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend auto"
    assert "host.flashinfer" in _imported_sources("--launch-cmd", served)
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Service]\nExecStart={base}\nTimeoutStartSec=900\n")
    assert "launch.start_budget" in _imported_sources("--unit", str(unit))


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
