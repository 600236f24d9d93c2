"""`spark-validate preflight`: static checks before the server starts (exit 78 refuses the start)."""

from __future__ import annotations

import argparse

from validator.commands.common import add_common, add_preflight_inputs


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_preflight_inputs(p)
    add_common(p)


def inputs_from(args: argparse.Namespace, argv: list[str] | None = None) -> object:
    from validator.preflight import PreflightInputs

    return PreflightInputs(
        launch_cmd=getattr(args, "launch_cmd", None),
        launch_args_file=getattr(args, "launch_args_file", None),
        unit=getattr(args, "unit", None),
        script=getattr(args, "script", None),
        script_args=list(getattr(args, "script_arg", None) or []),
        docker_cmd=getattr(args, "docker_cmd", None),
        compose=getattr(args, "compose", None),
        service=getattr(args, "service", None),
        argv=argv,
        env_files=list(args.env_file),
        model_dir=args.model_dir,
        sglang_root=args.sglang_root,
        service_user=args.service_user,
        kube_manifest=getattr(args, "kube_manifest", None),
        kube_container=getattr(args, "kube_container", None),
    )


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from validator.commands.common import emit, pack_from, selection_of
    from validator.preflight import PreflightInputs, run_preflight

    loaded = pack_from(args)
    inputs = inputs_from(args)
    assert isinstance(inputs, PreflightInputs)
    inputs = replace(inputs, selection=selection_of(args, loaded))
    run = run_preflight(inputs, loaded, strict=args.strict, allow_partial=args.allow_partial)
    assert run.pack is not None
    code = emit(run.report, args, run.pack)
    if run.malformed is not None:  # the report is out; the malformed file still decides the exit code
        raise run.malformed
    return code
