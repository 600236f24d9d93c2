"""A format is one module of ``validator/outputs/``: ``formats()`` imports each, so none can be left off a
list. What can still be forgotten is the ``@output`` line: a module that registers nothing would be
invisible to ``--format`` and to the secret-redaction tests that run over the registry."""

from __future__ import annotations

import importlib
import pkgutil
import types

import validator.outputs
from tests.support.cli import run_cli
from validator.outputs import formats


def test_every_output_module_registers_a_format_or_serves_one() -> None:
    """Each module registers a format, or a module that does imports from it (``safe.py``'s
    ``safe_dict``): a module that does neither is a format whose ``@output`` was forgotten."""
    known = formats()
    names = [m.name for m in pkgutil.iter_modules(validator.outputs.__path__)]
    modules = {n: importlib.import_module(f"validator.outputs.{n}") for n in names}
    registering = {f.render.__module__.rsplit(".", 1)[1] for f in known.values()}
    used_by_formats = {
        getattr(value, "__module__", None) or getattr(value, "__name__", "")
        for n in registering
        for value in vars(modules[n]).values()
        if isinstance(value, types.FunctionType | type | types.ModuleType)
    }
    helpers = {n for n in names if f"validator.outputs.{n}" in used_by_formats} - registering
    assert registering, "no module registers a format"
    assert set(names) - registering - helpers == set()


def test_format_choices_are_the_registry_in_rank_order() -> None:
    """``--format``'s choices list every registered format, the default first."""
    proc = run_cli("preflight", "--format", "nope")
    assert proc.returncode == 2
    choices = ", ".join(f"'{name}'" for name in formats())
    assert f"invalid choice: 'nope' (choose from {choices})" in proc.stderr
    assert list(formats())[:5] == ["text", "json", "junit", "prom", "html"]
