"""Lay out the plugin's sources before setuptools reads them.

Building from the repository (``../validator`` exists), ``src/validator/`` is refreshed with the plugin
package and every module of ``validator`` it imports, found by reading the imports (``ast``), so that a
module the plugin starts to import is shipped without a list to keep. Building from the sdist, ``src/`` is
already there. Only modules of ``validator`` are followed; anything else the plugin imports must be the
standard library (tests/test_plugin_dist.py installs the wheel where nothing else exists).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
REPO_PACKAGE = HERE.parent / "validator"
SRC = HERE / "src" / "validator"


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


if (REPO_PACKAGE / "plugin" / "__init__.py").is_file():
    shutil.rmtree(SRC, ignore_errors=True)
    for source in sorted(_closure()):
        target = SRC / source.relative_to(REPO_PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (SRC / "py.typed").touch()

setup()
