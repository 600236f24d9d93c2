"""Count the imports of the project's own modules made inside a function (or a class body) instead of at
the top of a module, and list them.

An import at the top of a module is what a reader, mypy and ``lint-imports`` see as the module's
dependencies; one inside a function hides an edge of the graph (last time four import circles hid that
way). ``LAZY_OWN`` names the ones allowed, each file and module with its reason;
``tests/test_lazy_imports.py`` fails on any other, so a new one is either hoisted or given a reason here.

    python -m scripts.lazy_imports            # the count, per module, and each import
    python -m scripts.lazy_imports --summary  # the count only

Imports under ``if TYPE_CHECKING:`` are not imports at run time and are not counted.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "validator"

# The function-level imports of the project's own modules that are allowed: file -> {module: why}. A
# module names itself and its submodules ("validator.sources" covers "validator.sources.host"). Anything
# not listed is imported at the top. The reasons are start-up time (a module that pulls a heavy third-party
# package, on a path that may not need it) or an import that must not run where the module is imported.
_HTTPX = "it imports httpx"
_LAUNCH = "launch (on the server's start path) imports this module for recognise_simulator_processes"
_SIM_SERVER = "the simulator's server: uvicorn and starlette"
_NPD = "imported in the worker thread, so that --timeout bounds it too (httpx)"
LAZY_OWN: dict[str, dict[str, str]] = {
    "validator/cli.py": {
        "validator.build_id": "only --version works out the build's commit (test_cli_output_exits holds it)",
    },
    "validator/commands/check.py": {
        "validator.live": f"the live job: {_HTTPX}; {_LAUNCH}",
        "validator.running": f"the running-process job: {_HTTPX}; {_LAUNCH}",
        "validator.sources.server_http": f"{_HTTPX}; {_LAUNCH}",
        "validator.sources.readiness": f"{_HTTPX}; {_LAUNCH}",
        "validator.sources.server_log": f"only --log needs the log grammar (compiled at import); {_LAUNCH}",
        "validator.sim": "only a path that reads processes recognises the simulator (not `check --url`)",
    },
    "validator/commands/demo.py": {
        "validator.live": f"the demo's job: {_HTTPX}, which `--help` need not load",
        "validator.sim.runner": _SIM_SERVER,
    },
    "validator/commands/npd.py": {"validator.live": _NPD, "validator.running": _NPD},
    "validator/commands/serve.py": {
        "validator.daemon": "the daemon: uvicorn, starlette, httpx, prometheus_client",
        "validator.running": f"the running-process job: {_HTTPX}",
        "validator.sources.metrics_reading": "the daemon's /metrics watch, built with the daemon",
    },
    "validator/commands/sim.py": {"validator.sim.runner": _SIM_SERVER},
    "validator/plugin/__init__.py": {
        "validator.plugin.hooks": "SGLang imports the entry point in every process; only a scheduler "
        "installs the hooks, and a failed import there is logged, never raised into SGLang",
    },
    "validator/sim/runner.py": {"validator.sim.app": "the ASGI app (starlette), built with uvicorn"},
    "validator/preflight.py": {
        "validator.sources": "the container reader, only for a launch whose install is inside an image "
        "(preflight runs in the server's start-up; gather imports each source's module by its row)",
    },
    "validator/sources/launch.py": {
        "validator.sources": "the reader of each launch input, imported for the input that names it "
        "(docker 3 ms, Kubernetes 11 ms, Compose 15 ms with yaml, the script reader 47 ms): preflight "
        "runs in the server's start-up",
    },
    "validator/sources/checkpoint.py": {
        "validator.sources": "a container's mounts (docker_run, 3 ms) and the hub cache (hf_cache, 2 ms), "
        "only for a container or a --model-path that may be a repo id",
    },
    "validator/running.py": {
        "validator.sources": "the running-process sources, imported when a run reads one",
        "validator.attestation.location": "read only when a process names no attestation",
    },
}


def allowed(path: str, module: str) -> str | None:
    """Why ``path`` may import ``module`` inside a function; None when it may not."""
    for prefix, why in LAZY_OWN.get(path, {}).items():
        if module == prefix or module.startswith(prefix + "."):
            return why
    return None


@dataclass(frozen=True)
class LazyImport:
    path: str  # relative to the repository root
    line: int
    module: str  # the project's module imported


def _own(node: ast.Import | ast.ImportFrom, rel: Path) -> list[str]:
    """The project's modules an import statement names (a relative import resolved against ``rel``, the
    file's path from the repository root)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
    if node.level:
        parts = list(rel.with_suffix("").parts)
        if parts[-1] != "__init__":
            parts = parts[:-1]
        base = parts[: len(parts) - (node.level - 1)]
        name = ".".join([*base, *([node.module] if node.module else [])])
    else:
        name = node.module or ""
    return [name] if name.split(".")[0] == PACKAGE else []


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def lazy_imports_in(path: Path, root: Path = REPO) -> list[LazyImport]:
    """Every import of the project's own modules in ``path`` (under ``root``, the repository) that is not
    at module level: inside a ``def``, a ``class`` or a ``lambda``. Module-level ``if``/``try`` blocks
    count as the top."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel_path = path.relative_to(root)
    rel = str(rel_path)
    found: list[LazyImport] = []

    def visit(node: ast.AST, nested: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child, nested)
            return
        if isinstance(node, ast.Import | ast.ImportFrom) and nested:
            found.extend(LazyImport(rel, node.lineno, m) for m in _own(node, rel_path))
        inner = nested or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def all_lazy_imports(root: Path = REPO) -> list[LazyImport]:
    """Every function-level import of the project's own modules in the package under ``root``."""
    return [imp for path in sorted((root / PACKAGE).rglob("*.py")) for imp in lazy_imports_in(path, root)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--summary", action="store_true", help="print the count only")
    opts = ap.parse_args()
    found = all_lazy_imports()
    if not opts.summary:
        by_path: dict[str, list[LazyImport]] = {}
        for imp in found:
            by_path.setdefault(imp.path, []).append(imp)
        for path, imps in sorted(by_path.items(), key=lambda kv: -len(kv[1])):
            print(f"{len(imps):3d} {path}")
            for imp in imps:
                print(f"      {imp.line}: {imp.module} ({allowed(imp.path, imp.module) or 'NOT ALLOWED'})")
    outside = sum(1 for imp in found if allowed(imp.path, imp.module) is None)
    print(f"{len(found)} function-level imports of {PACKAGE}'s own modules; {outside} not in LAZY_OWN")


if __name__ == "__main__":
    main()
