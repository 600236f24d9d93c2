"""`spark-validate rules list|show ID|lint PATH`: read and vet rule packs."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("rules", help="list, show and lint rule packs")
    p.add_argument("--rules", metavar="NAME|PATH", default=None, help="rule pack (default: the built-in one)")
    rs = p.add_subparsers(dest="rules_command", metavar="ACTION")
    rs.required = True
    rs.add_parser("list", help="the checks of the pack, and the built-in packs")
    show = rs.add_parser("show", help="one check: severity, modes, why, remedy, waiver")
    show.add_argument("check_id", metavar="ID")
    lint = rs.add_parser("lint", help="validate a pack file (exit 65 with file, line and reason)")
    lint.add_argument("path", metavar="PATH")


def run(args: argparse.Namespace) -> int:
    from validator.errors import UsageError
    from validator.rulepack import builtin_packs_dir, list_builtin_packs, load_pack, parse_pack

    out = sys.stdout
    if args.rules_command == "lint":
        from pathlib import Path

        path = Path(args.path)
        pack = parse_pack(path)
        from validator.checks.base import registry

        unknown = [c.id for c in pack.checks if c.expect is None and c.id not in registry()]
        if unknown:
            from validator.errors import InputError

            raise InputError(
                str(path), f"checks without 'expect' must be builtin; unknown: {', '.join(unknown)}"
            )
        out.write(
            f"{path}: ok ({pack.metadata.name} v{pack.metadata.version}, {len(pack.checks)} checks, "
            f"{len(pack.waivers)} waivers)\n"
        )
        return 0
    loaded = load_pack(args.rules)
    pack = loaded.pack
    if args.rules_command == "list":
        out.write(f"{pack.metadata.name} v{pack.metadata.version} ({loaded.path})\n")
        width = max(len(c.id) for c in pack.checks)
        for c in pack.checks:
            modes = ",".join(c.modes)
            waived = " [waived]" if pack.waiver_for(c.id) else ""
            out.write(f"  {c.id:<{width}}  {c.severity.value:<8}  {modes:<15}  {c.title}{waived}\n")
        others = [p.stem for p in list_builtin_packs()]
        out.write(f"built-in packs in {builtin_packs_dir()}: {', '.join(others)}\n")
        return 0
    try:
        c = pack.check(args.check_id)
    except KeyError:
        raise UsageError(f"no check {args.check_id!r} in {pack.metadata.name}") from None
    out.write(
        f"{c.id}: {c.title}\n  severity: {c.severity.value}\n  modes:    {', '.join(c.modes)}\n"
        f"  why:      {c.why}\n  remedy:   {c.remedy}\n"
    )
    if c.expect is not None:
        out.write(f"  expect:   {c.expect.fact} {c.expect.op} {c.expect.value!r}\n")
    w = pack.waiver_for(c.id)
    if w is not None:
        out.write(f"  waived until {w.expires}: {w.justification}\n")
    return 0
