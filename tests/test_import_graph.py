"""No import circle among validator's modules, counting every import a reader or a tool sees: those at the
top of a module, those under ``if TYPE_CHECKING:`` (no edge at run time, but an edge of the design: mypy,
a reader and an editor follow it) and those inside a function.

``lint-imports`` holds the layers, but it is told to leave type-only imports out (a layers contract needs
that, since a record may name a type of a layer above it for its annotations only) and it checks the
listed layers only. This test holds the whole package to one plain rule instead: the graph is acyclic. It
reads the sources with ``ast`` (standard library only, no import of the package) and, on a circle, names
its modules and each edge with the kind of import that makes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "validator"

Graph = Mapping[str, Mapping[str, str]]  # module -> {module it imports: how ("runtime", "type-only", ...)}


def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with how it runs: ``runtime`` (at the top, or in a module-level ``try``,
    ``if`` or class body), ``type-only`` (under ``if TYPE_CHECKING:``) or ``in a function``."""

    def walk(body: list[ast.stmt], kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node, kind
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, "type-only")
                yield from walk(node.orelse, kind)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(node.body, "type-only" if kind == "type-only" else "in a function")
            else:  # a block: its statements run as the block does (try, if, with, for, class, match)
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        yield from walk([child], kind)
                    elif isinstance(child, ast.excepthandler | ast.match_case):
                        yield from walk(child.body, kind)

    yield from walk(tree.body, "runtime")


def import_graph(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """Each module's imports of the package's other modules, each with the strongest kind seen (an import
    at run time outranks one inside a function, which outranks a type-only one)."""
    mods = _modules(root)
    rank = {"runtime": 0, "in a function": 1, "type-only": 2}
    graph: dict[str, dict[str, str]] = {m: {} for m in mods}
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        for node, kind in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    pkg = module.split(".") if is_package else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                # a module's own package (its __init__) runs before it whatever it imports: no edge
                if not target or target == module or module.startswith(target + "."):
                    continue
                seen = graph[module].get(target)
                if seen is None or rank[kind] < rank[seen]:
                    graph[module][target] = kind
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_circle(graph: Graph, component: list[str]) -> list[str]:
    """One shortest circle through the component's first module (breadth first, inside the component)."""
    members, start = set(component), component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in members and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in no circle")


def describe(graph: Graph, component: list[str]) -> str:
    members = set(component)
    path = shortest_circle(graph, component)
    edges = [f"  {a} -> {b} ({graph[a][b]})" for a in component for b in sorted(graph[a]) if b in members]
    return (
        f"{len(component)} modules in a circle, for instance "
        + " -> ".join(path)
        + "; their edges:\n"
        + "\n".join(edges)
    )


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"__init__.py": "", **files}.items():
        (root / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (root / PACKAGE / name).write_text(text)
    return root


def test_a_type_only_edge_closes_a_circle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from validator.high import High\n",
            "high.py": "from validator import low\n",
            "other.py": "import validator.low\n",
        },
    )
    graph = import_graph(root)
    assert graph["validator.high"] == {"validator.low": "runtime"}
    assert graph["validator.low"] == {"validator.high": "type-only"}
    found = circles(graph)
    assert found == [["validator.high", "validator.low"]]
    text = describe(graph, found[0])
    assert "validator.low -> validator.high (type-only)" in text
    assert "validator.high -> validator.low (runtime)" in text


def test_imports_in_functions_try_blocks_and_relative_imports_are_edges(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "sub/__init__.py": "",
            "sub/a.py": "def f() -> None:\n    from . import b\n",
            "sub/b.py": "try:\n    from ..sub.c import x\nexcept ImportError:\n    pass\n",
            "sub/c.py": "class C:\n    from validator.sub import a\nx = 1\n",
            "sub/d.py": "from validator.sub import c\n",
        },
    )
    graph = import_graph(root)
    assert graph["validator.sub.a"] == {"validator.sub.b": "in a function"}
    assert graph["validator.sub.b"] == {"validator.sub.c": "runtime"}
    assert graph["validator.sub.c"] == {"validator.sub.a": "runtime"}
    found = circles(graph)
    assert found == [["validator.sub.a", "validator.sub.b", "validator.sub.c"]]
    assert shortest_circle(graph, found[0]) == [
        "validator.sub.a", "validator.sub.b", "validator.sub.c", "validator.sub.a"
    ]  # fmt: skip
    assert not circles({**graph, "validator.sub.c": {}})


def test_validator_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the scan read the package
    found = circles(graph)
    assert not found, "import circles (a type-only edge counts too):\n" + "\n\n".join(
        describe(graph, c) for c in found
    )
