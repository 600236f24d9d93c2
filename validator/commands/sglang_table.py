"""`spark-validate sglang-table --python PY`: generate the flag table of the SGLang build PY runs, and cache
it so that preflight parses launch commands exactly as that build will (see ``sources/sglang/tables``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from validator.commands.common import output_file
from validator.errors import InputError, UnavailableError
from validator.sources.run_as import of_files
from validator.sources.sglang.cli_table import table_from_json
from validator.sources.sglang.install import read_sglang_install
from validator.sources.sglang.interpreter import probe_interpreter
from validator.sources.sglang.tables import generate, store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", required=True, metavar="PY", help="the server's Python interpreter")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="generator time limit (300)")
    p.add_argument(
        "--output", metavar="FILE", type=output_file, default=None, help="also write the table to FILE"
    )


def run(args: argparse.Namespace) -> int:
    # the interpreter runs as whoever controls its files (this user, or the one other owner), never more
    who = of_files([args.python], os.environ)
    if isinstance(who, str):
        raise UnavailableError(f"{args.python} was not run: {who}")
    probe = probe_interpreter(args.python, timeout=30.0, run_as=who)
    if probe.error or probe.sglang_root is None:
        raise UnavailableError(probe.error or f"{args.python}: sglang is not importable")
    install = read_sglang_install(probe.sglang_root, f"interpreter {args.python}")
    text = generate(args.python, timeout=args.timeout, run_as=who)
    try:
        table = table_from_json(json.loads(text), allow_unknown_types=True)
    except ValueError as exc:
        raise InputError(args.python, f"the generator printed no valid table: {exc}") from None
    if install.version and table.sglang_version != install.version:
        raise InputError(
            args.python,
            f"the table says SGLang {table.sglang_version} but {probe.sglang_root} is {install.version}",
        )
    path = store(text, probe.sglang_root, install.version)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    sys.stdout.write(
        f"SGLang {table.sglang_version} ({probe.sglang_root}): {len(table.actions)} flags; cached as {path}\n"
    )
    return 0
