"""`spark-validate rules list|show ID|lint PATH`: read and vet rule packs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from validator.engine import waiver_for
from validator.errors import ExitCode, InputError, UsageError
from validator.pack_figures import literal_figures
from validator.pack_lint import expired_waivers
from validator.pack_templates import expect_fields, expect_value, render_template
from validator.probe import load_prompts
from validator.rulepack import (
    LoadedPack,
    PackError,
    builtin_packs_dir,
    extended_pack,
    list_builtin_packs,
    load_pack,
    parse_pack,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", metavar="NAME|PATH", default=None, help="rule pack (default: the built-in one)")
    rs = p.add_subparsers(dest="rules_command", metavar="ACTION")
    rs.required = True
    rs.add_parser("list", help="the checks of the pack, and the built-in packs")
    show = rs.add_parser("show", help="one check: severity, modes, why, remedy, waiver")
    show.add_argument("check_id", metavar="ID")
    lint = rs.add_parser(
        "lint", help="validate a pack file: every problem with file and line, expired waivers (exit 65)"
    )
    lint.add_argument("path", metavar="PATH")


def lint(path_arg: str) -> int:
    """Every problem of the pack, one line each (file:line: what), then expired waivers; exit 65 if any."""
    path = Path(path_arg)
    try:
        pack = parse_pack(path)
        base = extended_pack(path)
    except PackError as exc:
        for line in exc.lines():
            sys.stderr.write(f"spark-validate: {line}\n")
        return int(ExitCode.DATAERR)
    files_ok = _files_named(LoadedPack(pack, path.absolute()), path)
    expired = expired_waivers(pack)
    for w in expired:
        sys.stderr.write(
            f"spark-validate: {path}: waiver for {w.check} expired on {w.expires}: "
            "it no longer applies (renew it with a new justification, or remove it)\n"
        )
    figures = literal_figures(pack, base)
    for f in figures:
        if f.disagrees:
            sys.stderr.write(
                f"spark-validate: {path}: {f.check}.{f.key} says {f.literal}, the extended pack's {f.field}, "
                f"but this pack's is {f.value}: write {{{f.field}}}\n"
            )
        else:
            sys.stderr.write(
                f"spark-validate: note: {path}: {f.check}.{f.key} writes {f.field} ({f.literal}) as a "
                f"number: {{{f.field}}} follows the pack\n"
            )
    if not files_ok or expired or any(f.disagrees for f in figures):
        return int(ExitCode.DATAERR)
    sys.stdout.write(
        f"{path}: ok ({pack.metadata.name} v{pack.metadata.version}, {len(pack.checks)} checks, "
        f"{len(pack.waivers)} waivers)\n"
    )
    return 0


def _files_named(loaded: LoadedPack, path: Path) -> bool:
    """Read every file the pack names (through ``extends:``, each resolved against the pack that names
    it), as the probe will read it: a prompt file a check would miss is a lint problem, not a probe error
    on the first live check. Each problem is one line on stderr; False when there was one."""
    if loaded.probe_prompts is None:
        return True
    try:
        load_prompts(loaded.probe_prompts)
    except InputError as exc:
        sys.stderr.write(f"spark-validate: {path}: probe.prompts: {exc}\n")
        return False
    return True


def run(args: argparse.Namespace) -> int:
    if args.rules_command == "lint":
        return lint(args.path)
    out = sys.stdout
    loaded = load_pack(args.rules)
    pack = loaded.pack
    fields = expect_fields(pack.expect)

    def render(text: str) -> str:
        return render_template(text, fields)

    if args.rules_command == "list":
        out.write(f"{pack.metadata.name} v{pack.metadata.version} ({loaded.path})\n")
        width = max(len(c.id) for c in pack.checks)
        for c in pack.checks:
            modes = ",".join(c.modes)
            waived = " [waived]" if waiver_for(pack.waivers, c.id) else ""
            out.write(f"  {c.id:<{width}}  {c.severity.value:<8}  {modes:<15}  {render(c.title)}{waived}\n")
        others = [p.stem for p in list_builtin_packs()]
        out.write(f"built-in packs in {builtin_packs_dir()}: {', '.join(others)}\n")
        return 0
    found = next((spec for spec in pack.checks if spec.id == args.check_id), None)
    if found is None:
        raise UsageError(f"no check {args.check_id!r} in {pack.metadata.name}")
    c = found
    out.write(
        f"{c.id}: {render(c.title)}\n  severity: {c.severity.value}\n  modes:    {', '.join(c.modes)}\n"
        f"  why:      {render(c.why)}\n  remedy:   {render(c.remedy)}\n"
    )
    for name, text in c.remedies.items():
        out.write(f"  remedy ({name}): {render(text)}\n")
    if c.expect is not None:
        out.write(f"  expect:   {c.expect.fact} {c.expect.op} {expect_value(c.expect, fields)!r}\n")
    w = waiver_for(pack.waivers, c.id)
    if w is not None:
        out.write(f"  waived until {w.expires}: {w.justification}\n")
    return 0
