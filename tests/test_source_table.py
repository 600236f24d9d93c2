"""The source table (``validator/source_table.py``) against the source modules: every module with a
preflight reader is a row, every row's reader resolves, each row needs only rows above it, and a
preflight run imports the modules of the sources that apply and no others (preflight runs in the server's
start-up)."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.sglang_builds import fake_interpreter, make_build
from validator import source_table
from validator.coverage import INPUT_FOR_SOURCE
from validator.facts import Facts, HostFacts
from validator.source_table import PREFLIGHT, SOURCES

REPO = Path(__file__).resolve().parents[1]
SOURCES_DIR = REPO / "validator" / "sources"


def readers_not_listed(package: Path, listed: set[str]) -> list[str]:
    """Modules of ``package`` that define a module-level ``gather`` (a preflight reader) that no row
    names: read with ``ast``, so a module that would fail to import is still seen."""
    out = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "gather" for n in tree.body):
            module = f"validator.sources.{path.stem}"
            if module not in listed:
                out.append(module)
    return out


def test_every_source_module_with_a_reader_is_a_row() -> None:
    assert readers_not_listed(SOURCES_DIR, {s.reader for s in PREFLIGHT if s.reader}) == []


def test_a_forgotten_row_is_found(tmp_path: Path) -> None:
    """The check above, on a package holding a source nobody listed (and a helper module, which is not
    a source)."""
    (tmp_path / "toy.py").write_text("def gather(g):\n    g.facts.errors['toy'] = 'read'\n")
    (tmp_path / "helper.py").write_text("def read(path):\n    return path\n")
    assert readers_not_listed(tmp_path, set()) == ["validator.sources.toy"]
    assert readers_not_listed(tmp_path, {"validator.sources.toy"}) == []


@pytest.mark.parametrize("source", PREFLIGHT, ids=lambda s: s.name)
def test_each_reader_resolves_to_a_typed_gather(source: source_table.Source) -> None:
    assert source.reader is not None
    gather = importlib.import_module(source.reader).gather
    params = list(inspect.signature(gather).parameters.values())
    assert [p.annotation for p in params] == ["Gathering"], source.reader
    assert inspect.signature(gather).return_annotation == "None", source.reader


def test_names_are_unique_and_needs_come_first() -> None:
    names = [s.name for s in SOURCES]
    assert len(names) == len(set(names))
    above: set[str] = set()
    for s in PREFLIGHT:
        assert set(s.needs) <= above, f"{s.name} needs {set(s.needs) - above}, which is not read before it"
        above.add(s.name)


def test_coverage_names_the_input_each_source_declares() -> None:
    declared = {s.name: s.proven_by for s in SOURCES if s.proven_by}
    assert declared == INPUT_FOR_SOURCE
    assert INPUT_FOR_SOURCE["checkpoint"] == "--model-dir (or a local --model-path)"


# The CLI run in a child process, which then names the validator.sources modules it imported.
_RUN = """
import sys
from validator.cli import main
try:
    main(["preflight", "--format", "json", *sys.argv[1:]])
except SystemExit:
    pass
finally:
    print(" ".join(m.rsplit(".", 1)[-1] for m in sys.modules if m.startswith("validator.sources.")))
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
    base = f"{sys.executable} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend humming"
    nextn = _imported_sources("--launch-cmd", base + " --speculative-algorithm NEXTN")
    assert {"launch", "host", "checkpoint"} <= nextn
    assert not nextn & {"dspark_draft", "flashinfer", "start_budget", "hf_cache", "docker_run"}, nextn
    dspark = _imported_sources("--launch-cmd", base + " --speculative-algorithm DSPARK")
    assert "dspark_draft" in dspark and "start_budget" not in dspark
    auto = _imported_sources("--launch-cmd", base.replace("humming", "auto"))
    assert "flashinfer" not in auto  # it applies only where the server's own install was read
    site = tmp_path / "site"
    make_build(site)
    python = fake_interpreter(tmp_path / "bin", site)
    served = f"{python} -m sglang.launch_server --model-path {tmp_path} --moe-runner-backend auto"
    assert "flashinfer" in _imported_sources("--launch-cmd", served)
    unit = tmp_path / "sglang.service"
    unit.write_text(f"[Service]\nExecStart={base}\nTimeoutStartSec=900\n")
    assert "start_budget" in _imported_sources("--unit", str(unit))


@dataclass
class _ToyRecord:
    """A record defined by its source's module, with no field on ``Facts``."""

    seen: int


def test_a_record_without_a_facts_field_is_read_by_name() -> None:
    facts = Facts()
    facts.records["toy"] = _ToyRecord(seen=3)
    assert facts.record("toy", _ToyRecord) == _ToyRecord(seen=3)
    assert facts.record("toy", HostFacts) is None and facts.record("other", _ToyRecord) is None
    assert facts.lookup("toy.seen") == 3  # a declarative rule's fact path
    with pytest.raises(KeyError):
        facts.lookup("toy.missing")
    with pytest.raises(KeyError):
        facts.lookup("records.toy")  # the store is not itself a fact
