"""`spark-validate preflight`: static checks before the server starts (exit 78 refuses the start)."""

from __future__ import annotations

import argparse

from validator.commands.common import add_common, add_preflight_inputs, emit, pack_from, selection_of
from validator.preflight import run_preflight
from validator.preflight_inputs import inputs_from


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_preflight_inputs(p)
    add_common(p)


def run(args: argparse.Namespace) -> int:
    loaded = pack_from(args)
    inputs = inputs_from(args, selection=selection_of(args, loaded))
    run = run_preflight(
        inputs, loaded, strict=args.strict, allow_partial=args.allow_partial, pack_dirs=args.rules_dir
    )
    code = emit(run.report, args, run.pack)
    if run.malformed is not None:  # the report is out; the malformed file still decides the exit code
        raise run.malformed
    return code
