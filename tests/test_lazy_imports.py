"""The project's own modules are imported at the top of a module; a function-level import of one is
allowed only where ``scripts/lazy_imports.py`` gives the file and the module a reason (``LAZY_OWN``)."""

from __future__ import annotations

from pathlib import Path

from scripts.lazy_imports import LAZY_OWN, all_lazy_imports, allowed, lazy_imports_in


def test_every_function_level_import_of_our_modules_has_a_reason() -> None:
    found = all_lazy_imports()
    unexplained = [f"{i.path}:{i.line}: {i.module}" for i in found if allowed(i.path, i.module) is None]
    assert not unexplained, (
        "import these at the top of the module, or give the file and module a reason in "
        "scripts/lazy_imports.py's LAZY_OWN:\n" + "\n".join(unexplained)
    )


def test_every_reason_in_the_allowlist_is_still_used() -> None:
    # a stale entry would let a new lazy import of that module in unnoticed
    used: set[tuple[str, str]] = set()
    for i in all_lazy_imports():
        for prefix in LAZY_OWN.get(i.path, {}):
            if i.module == prefix or i.module.startswith(prefix + "."):
                used.add((i.path, prefix))
    stale = [
        f"{path}: {module}"
        for path, mods in LAZY_OWN.items()
        for module in mods
        if (path, module) not in used
    ]
    assert not stale, "LAZY_OWN entries no import needs any more:\n" + "\n".join(stale)


def test_the_scanner_finds_nested_imports_and_only_those(tmp_path: Path) -> None:
    pkg = tmp_path / "validator" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "validator" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    module = pkg / "mod.py"
    module.write_text(
        "from __future__ import annotations\n"
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "from validator import errors\n"  # top: fine
        "try:\n"
        "    import validator.facts\n"  # module-level try: the top
        "except ImportError:\n"
        "    pass\n"
        "if TYPE_CHECKING:\n"
        "    from validator.report import Report\n"
        "def f() -> None:\n"
        "    import yaml\n"  # third-party: not counted
        "    from validator.sources import host\n"  # line 13
        "    if TYPE_CHECKING:\n"
        "        from validator.live import LiveInputs\n"  # never runs
        "    from . import sibling\n"  # line 16: relative, validator.sub.sibling
        "class C:\n"
        "    def m(self) -> None:\n"
        "        from ..engine import run_checks\n"  # line 19: validator.engine
        "g = lambda: __import__('json')\n"
    )
    found = [(i.path, i.line, i.module) for i in lazy_imports_in(module, tmp_path)]
    rel = str(Path("validator/sub/mod.py"))
    assert found == [
        (rel, 13, "validator.sources"),
        (rel, 16, "validator.sub"),
        (rel, 19, "validator.engine"),
    ]
    assert allowed("validator/preflight.py", "validator.sources.host") is not None
    assert allowed("validator/preflight.py", "validator.engine") is None
    assert allowed("validator/preflight.py", "validator.sourcesx") is None
