"""The builtin checks' registry catches a forgotten registration: a family is one module, discovered, so
what can be forgotten is the ``@check.builtin`` line or the pack entry.

- a check function nobody registers (its ``@check.builtin`` left out): never runs, whatever the pack says;
- a registered form that no shipped pack lists for its mode: never runs either;
- a pack listing a check nobody registered: ``rules lint`` refuses it (``test_rulepack_lint.py``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import validator.checks
from tests.support.private_dir import trusted_copy
from validator.checks.registry import builtins
from validator.rulepack import is_builtin_path, list_builtin_packs, parse_pack

REPO = Path(__file__).resolve().parents[1]


def _is_pack(text: str) -> bool:
    return "\nkind: RulePack" in text or "\nextends: " in text


# Every pack the project ships: the built-in ones, and the cluster pack of deploy/cluster/.
SHIPPED_PACKS = [
    *list_builtin_packs(),
    *(p for p in sorted((REPO / "deploy").rglob("*.yaml")) if _is_pack(p.read_text())),
]


def _families() -> dict[str, ModuleType]:
    return {
        m.name: importlib.import_module(f"validator.checks.{m.name}")
        for m in pkgutil.iter_modules(validator.checks.__path__)
    }


def _is_check_function(fn: object) -> bool:
    """``(facts: Facts, ctx: CheckContext) -> Outcome``, as written (annotations are strings here)."""
    if not inspect.isfunction(fn):
        return False
    sig = inspect.signature(fn)
    names = [str(p.annotation).rsplit(".", 1)[-1] for p in sig.parameters.values()]
    return names == ["Facts", "CheckContext"] and str(sig.return_annotation).rsplit(".", 1)[-1] == "Outcome"


def test_every_check_function_is_registered_or_delegated_to() -> None:
    """A function of a check module with a check's signature is a registered form, or another check
    module imports it to delegate to (spec.lm_head_shared hands a DSPARK pack to spec_dspark's form)."""
    families = _families()
    forms = {fn for b in builtins().values() for fn in b.forms.values()}
    found = 0
    for name, module in families.items():
        for fn_name, fn in vars(module).items():
            if not _is_check_function(fn) or fn.__module__ != module.__name__:
                continue
            found += 1
            delegated = any(vars(other).get(fn_name) is fn for n, other in families.items() if n != name)
            assert fn in forms or delegated, f"validator/checks/{name}.py: {fn_name} is not registered"
    assert found >= len(builtins())


def test_every_registered_form_is_listed_by_a_shipped_pack(tmp_path: Path) -> None:
    """A form that no shipped pack lists for its mode never runs: a pack entry was forgotten. The packs of
    deploy/ are read from copies in tmp_path: the checkout may be where no pack is trusted (under /tmp)."""
    listed: dict[str, set[str]] = {}
    for i, path in enumerate(SHIPPED_PACKS):
        readable = path if is_builtin_path(path) else trusted_copy(path, tmp_path / str(i))
        for spec in parse_pack(readable).checks:
            listed.setdefault(spec.id, set()).update(spec.modes)
    unlisted = {
        (check_id, mode)
        for check_id, b in builtins().items()
        for mode in b.forms
        if mode not in listed.get(check_id, set())
    }
    assert len(SHIPPED_PACKS) >= 5 and len(builtins()) >= 20
    assert unlisted == set(), "registered, but no shipped pack lists it for that mode"
