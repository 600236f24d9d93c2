"""Lay out the plugin's sources before setuptools reads them.

Building from the repository (``../validator`` exists), ``src/spark_validate_plugin/`` is refreshed with
the plugin package and every module of ``validator`` it imports, found by reading the imports (``ast``), so
that a module the plugin starts to import is shipped without a list to keep. Building from the sdist,
``src/`` is already there. Only modules of ``validator`` are followed; anything else the plugin imports must
be the standard library (tests/test_plugin_dist.py installs the wheel where nothing else exists).

The copy is renamed: SGLang's environment gets a top-level package of this distribution's own name,
``spark_validate_plugin`` (``validator/plugin`` is ``spark_validate_plugin/plugin``), never ``validator``,
a name an unrelated distribution on the package index already uses. Each copied import statement of
``validator`` is rewritten to the new name (found by ``ast``, so text that merely mentions it is left).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
REPO_PACKAGE = HERE.parent / "validator"
PACKAGE = "spark_validate_plugin"  # the import name in SGLang's environment (the entry point's module)
SRC = HERE / "src" / PACKAGE


def _ours(dotted: str) -> bool:
    return dotted.split(".")[0] == "validator"


def _imported_validator_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if _ours(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            found.add(str(node.module))
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _module_file(dotted: str) -> Path | None:
    rel = Path(*dotted.split(".")[1:])
    if not rel.parts:
        return REPO_PACKAGE / "__init__.py"
    for candidate in (REPO_PACKAGE / rel.with_suffix(".py"), REPO_PACKAGE / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None  # a name imported from a module, not a module


def _closure() -> set[Path]:
    todo = [*sorted((REPO_PACKAGE / "plugin").glob("*.py")), REPO_PACKAGE / "__init__.py"]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for dotted in _imported_validator_modules(path):
            found = _module_file(dotted)
            if found is not None:
                todo.append(found)
                parents = found.relative_to(REPO_PACKAGE).parents
                todo.extend(REPO_PACKAGE / p / "__init__.py" for p in parents if p.parts)
    return seen


def _renamed(path: Path) -> str:
    """The module's text with every ``import validator...`` / ``from validator... import`` naming
    ``PACKAGE`` instead (each statement's own first line, where its module name is)."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            if any(_ours(n) for n in names):
                i = node.lineno - 1
                lines[i] = re.sub(r"\b(from|import)(\s+)validator\b", rf"\1\2{PACKAGE}", lines[i], count=1)
    return "".join(lines)


if (REPO_PACKAGE / "plugin" / "__init__.py").is_file():
    shutil.rmtree(HERE / "src", ignore_errors=True)
    for source in sorted(_closure()):
        target = SRC / source.relative_to(REPO_PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_renamed(source))
        shutil.copystat(source, target)
    (SRC / "py.typed").touch()

setup()
