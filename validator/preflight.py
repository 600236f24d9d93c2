"""The preflight job: gather static evidence (launch command, environment, installed SGLang,
humming-kernels, checkpoint, host) and run the pack's preflight checks.

No server, no GPU, and no torch or sglang import: this runs as a systemd ExecStartPre, where every
tenth of a second delays the server. Malformed input (a unit file, env file, config.json or safetensors
header) raises ``InputError`` (exit 65) instead of becoming a check result: the operator must fix the
file before any verdict means something.

The evidence sources are imported where ``gather`` needs them, not at the top: which ones a run reads
depends on its inputs (a unit needs no Compose or docker reader, a NEXTN launch no DSpark draft reader, a
humming launch no FlashInfer reader), and every module imported is start-up time of the server.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from validator.engine import build_report, run_checks
from validator.errors import InputError, UnresolvedLaunch, UsageError
from validator.facts import (
    CHECKPOINT,
    FLASHINFER,
    HUMMING,
    LAUNCH,
    SGLANG,
    Facts,
    LaunchFacts,
    ProgramFacts,
    SGLangInstallFacts,
)
from validator.preflight_inputs import PreflightInputs
from validator.recipe_match import NO_PACK, choose_pack
from validator.report import CheckResult, Report, Status, utc_now_iso
from validator.rulepack import LoadedPack, load_pack
from validator.sources.sglang_cli import TableChoice, load_table, parsing_with

if TYPE_CHECKING:
    from validator.sources.docker_run import ContainerSpec
    from validator.sources.server_processes import ServerProcess

DSPARK = "DSPARK"


def server_environment(inputs: PreflightInputs) -> tuple[dict[str, str], dict[str, str]]:
    """The environment the server will see: this process's environment (systemd runs ExecStartPre with
    the unit's environment), then each --env-file in order. For a running server, the environment it was
    exec'd with, and nothing else."""
    from validator.sources.env_file import read_env_file

    if inputs.running is not None:
        seen = inputs.running.process.env or {}
        where = f"/proc/{inputs.running.process.pid}/environ"
        return dict(seen), dict.fromkeys(seen, where)
    env = dict(os.environ if inputs.base_env is None else inputs.base_env)
    origin = {k: "process environment" for k in env}
    for path in inputs.env_files:
        for k, v in read_env_file(path).items():
            env[k] = v
            origin[k] = f"env-file:{path}"
    return env, origin


def read_launch(inputs: PreflightInputs) -> LaunchFacts:
    from validator.sources import launch_command, systemd_unit

    env, origin = server_environment(inputs)
    if inputs.running is not None:
        return launch_of_process(inputs.running, env, origin)
    given = [x for x in _launch_sources(inputs) if x is not None]
    if not given and inputs.kube_manifest is not None:
        given = [inputs.kube_manifest]  # the manifest's SGLang container is the launch
    if len(given) != 1:
        raise UsageError(
            "give exactly one of --launch-cmd, --launch-args-file, --unit, --script, --docker-cmd, "
            "--compose, --kube-manifest (or `launch -- CMD...`)"
        )
    if inputs.script_args and inputs.script is None:
        raise UsageError("--script-arg gives the arguments of --script")
    if inputs.service is not None and inputs.compose is None:
        raise UsageError("--service names a service of the --compose file")
    container = container_spec(inputs, env) if inputs.script is None else None
    if container is not None:
        from validator.sources.docker_run import launch_from_container

        facts = launch_from_container(container)
    elif inputs.script is not None:
        from validator.sources.launch_script import launch_from_script

        facts = launch_from_script(inputs.script, env=env, env_origin=origin, args=inputs.script_args)
    elif inputs.argv is not None:
        # exec keeps the working directory: the server starts where `launch` runs
        facts = launch_command.launch_from_argv(
            list(inputs.argv), origin="launch", env=env, working_directory=Path.cwd()
        )
    elif inputs.launch_cmd is not None:
        facts = launch_command.launch_from_string(inputs.launch_cmd, origin="--launch-cmd", env=env)
    elif inputs.launch_args_file is not None:
        facts = launch_command.launch_from_args_file(inputs.launch_args_file, env=env)
    else:
        assert inputs.unit is not None
        # with --unit, --env-file stands in for the unit's EnvironmentFile= (checked before installing it)
        process = dict(os.environ if inputs.base_env is None else inputs.base_env)
        files = list(inputs.env_files) or None
        facts = systemd_unit.launch_from_unit(inputs.unit, base_env=process, env_files=files)
    for k, v in origin.items():
        facts.env_origin.setdefault(k, v)
    return facts


def launch_of_process(server: ServerProcess, env: dict[str, str], origin: dict[str, str]) -> LaunchFacts:
    """A running server's launch command: its argv (for the simulator, the SGLang command it stands in
    for) with the environment and working directory the kernel shows. An environment that could not be
    read leaves every variable the checks read unresolved: they are then not proven, never judged on an
    empty environment."""
    from validator.sources import launch_command

    proc = server.process
    facts = launch_command.launch_from_argv(
        # the simulator's own argv (it is recognised as such); a server's command without the #! python
        list(server.process.argv if server.kind in ("sim", "launch") else server.command),
        origin=f"process {proc.pid}",
        env=env,
        env_origin=origin,
        working_directory=proc.cwd,
    )
    facts.user = proc.user
    if proc.env is None:
        why = proc.env_error or "its environment could not be read"
        for name in ENV_READ_BY_CHECKS:
            facts.unresolved[name] = why
    return facts


# The variables builtin checks read from a launch environment (lm_head, spec, moe): with a running
# server's environment unreadable, these are not known.
ENV_READ_BY_CHECKS = (
    "SGLANG_ENABLE_FP8_LM_HEAD",
    "SPARK_VALIDATE_SHARE_LM_HEAD",
    "SGLANG_CACHE_DIR",
    "HUMMING_CACHE_DIR",
    "HUMMING_TMP_DIR",
)


def _launch_sources(inputs: PreflightInputs) -> tuple[object, ...]:
    return (
        inputs.launch_cmd,
        inputs.launch_args_file,
        inputs.unit,
        inputs.script,
        inputs.argv,
        inputs.docker_cmd,
        inputs.compose,
    )


def kube_is_launch(inputs: PreflightInputs) -> bool:
    """``--kube-manifest`` given alone is the launch (its SGLang container's command, args and env);
    beside another launch input it only bounds the start (``host.start_budget``)."""
    return (
        inputs.kube_manifest is not None
        and inputs.running is None
        and all(x is None for x in _launch_sources(inputs))
    )


def container_spec(inputs: PreflightInputs, env: Mapping[str, str]) -> ContainerSpec | None:
    """The container a --docker-cmd, --compose or lone --kube-manifest input describes (None for the
    other inputs)."""
    if kube_is_launch(inputs):
        from validator.sources.kube_manifest import load_kube_container

        assert inputs.kube_manifest is not None
        return load_kube_container(inputs.kube_manifest, inputs.kube_container)
    if inputs.docker_cmd is not None:
        from validator.sources.docker_run import parse_docker_cmd

        return parse_docker_cmd(inputs.docker_cmd, env)
    if inputs.compose is not None:
        from validator.sources.compose import load_compose

        return load_compose(inputs.compose, inputs.service, env)
    if inputs.script is not None:  # a script whose server command is `docker run ...`
        from validator.sources.launch_script import container_of_script

        return container_of_script(inputs.script, env=env, args=inputs.script_args)
    return None


def _container_evidence(facts: Facts, container: ContainerSpec) -> None:
    """What a container hides: the install inside the image (not proven, never read from this host's
    Python), and where the model path is on the host (through the mounts)."""
    from validator.sources.docker_run import host_path, image_note

    launch = facts.launch
    assert launch is not None
    note = image_note(container)
    launch.unresolved[SGLANG] = note
    facts.errors[HUMMING] = note
    model = launch.args.get("model_path")
    if isinstance(model, str) and model.startswith("/"):
        found, why = host_path(model, container.mounts)
        if found is None:
            facts.errors[CHECKPOINT] = f"--model-path {why}; give --model-dir with its host path"
        elif not (found / "config.json").is_file():
            facts.errors[CHECKPOINT] = f"--model-path {model} is {why}: {found} holds no config.json"


def _locate(inputs: PreflightInputs, launch: LaunchFacts) -> tuple[SGLangInstallFacts, ProgramFacts]:
    """The install to read, and ``launch.program``'s evidence: the program resolved as exec would, its
    interpreter asked with the server's flags, environment and working directory. There is no fallback
    to this process's own packages: they prove nothing about the server's."""
    from validator.sources.sglang_install import inspect_program, install_from_probe, read_sglang_install

    container = (
        None if inputs.sglang_root is not None else container_spec(inputs, server_environment(inputs)[0])
    )
    if container is not None:  # the program and the install are inside the image: not visible here
        from validator.sources.docker_run import image_note

        note = image_note(container)
        hidden = ProgramFacts(
            written=launch.program,
            path=None,
            problem=f"is inside the container ({note})",
            interpreter=launch.interpreter,
            interpreter_options=list(launch.interpreter_options),
        )
        return SGLangInstallFacts(root=None, located_by=f"image {container.image}", note=note), hidden

    dspark = str(launch.args.get("speculative_algorithm") or "").upper() == DSPARK
    if launch.simulated:
        note = "spark-validate's simulator stands in for SGLang here: no SGLang install runs it"
        from validator.sources.launch_command import resolve_program

        # resolved as exec would (``launch`` execs it), never asked what it imports
        path, _ = resolve_program(launch.program or "", launch.env, launch.working_directory)
        hidden = ProgramFacts(
            written=launch.program, path=path, problem=f"is the simulator ({note})", interpreter=None
        )
        if inputs.sglang_root is not None:
            where = f"--sglang-root {inputs.sglang_root}"
            return read_sglang_install(inputs.sglang_root, where, dspark=dspark), hidden
        return SGLangInstallFacts(root=None, located_by="simulator", note=note), hidden
    on_host = inputs.argv is not None or inputs.unit is not None or inputs.running is not None
    program, probe = inspect_program(launch, on_server_host=on_host)
    if inputs.sglang_root is not None:
        where = f"--sglang-root {inputs.sglang_root}"
        imported = program.sglang_root
        if imported is not None and imported.resolve() != inputs.sglang_root.resolve():
            # two sources disagree on which SGLang runs: the interpreter, asked, wins as the fact; the
            # named tree is not evidence for the checks that read an install (they are error, not pass)
            note = (
                f"{where} is not the SGLang the launch command imports ({program.interpreter} imports "
                f"sglang from {imported}): its files prove nothing about this server"
            )
            return (
                SGLangInstallFacts(root=None, located_by=where, note=note, disputed_root=inputs.sglang_root),
                program,
            )
        return read_sglang_install(inputs.sglang_root, where, dspark=dspark), program
    if probe is not None:
        return install_from_probe(probe, dspark=dspark), program
    named = f"the program {launch.program} " if launch.program else ""
    note = named + (program.problem or "names no interpreter")
    return SGLangInstallFacts(root=None, located_by="launch command", note=note), program


def launch_and_install(
    inputs: PreflightInputs,
) -> tuple[LaunchFacts, SGLangInstallFacts, ProgramFacts]:
    """The launch command parsed with the flag table of the SGLang build that will run it.

    The build is found through the command's own interpreter, so the command is first parsed with the
    shipped table (leniently when that refuses it); then, for a build with a generated table
    (``spark-validate sglang-table``), it is parsed again with that table, and for another build with
    none, leniently with the shipped one, reporting what that table does not know instead of failing."""
    from validator.sources.sglang_tables import table_for

    refused: InputError | None = None
    try:
        launch = read_launch(inputs)
    except InputError as exc:
        with parsing_with(TableChoice(load_table(), "the shipped table", lenient=True)):
            try:
                launch = read_launch(inputs)
            except InputError:
                raise exc from None
        refused = exc
    sg, program = _locate(inputs, launch)
    choice = table_for(sg, launch.interpreter)
    if choice is None:
        if refused is not None:
            raise refused
        return launch, sg, program
    with parsing_with(choice):
        launch = read_launch(inputs)
    launch.warnings.insert(0, f"launch command parsed with {choice.described}")
    return launch, sg, program


@dataclass
class PreflightRun:
    """The report, and the malformed evidence file that made part of it ``error`` (exit 65 after the
    report is written: a CI job asking for ``--format junit --output F`` still gets F)."""

    report: Report
    facts: Facts
    malformed: InputError | None = None
    pack: LoadedPack | None = None  # the pack the report was judged by (``--rules auto`` picks it)


def gather(inputs: PreflightInputs, malformed: list[InputError] | None = None) -> Facts:
    """The static evidence. A malformed checkpoint file is recorded in ``malformed`` (and as the
    checkpoint source's error) instead of aborting, so the other checks still run and report."""
    from validator.sources.host import read_host
    from validator.sources.humming import UnknownUser, read_humming
    from validator.sources.sglang_install import referenced_env

    facts = Facts(mode="preflight")
    try:
        facts.launch, facts.sglang, facts.program = launch_and_install(inputs)
    except UnresolvedLaunch as exc:  # the script computes the command at run time: nothing to check
        facts.errors[LAUNCH] = str(exc)
        facts.host = read_host(service_user=inputs.service_user)
        return facts
    launch = facts.launch
    sg = facts.sglang
    env, _ = server_environment(inputs)
    container = container_spec(inputs, env)
    if container is not None and inputs.sglang_root is None:
        _container_evidence(facts, container)
    site_dirs = sg.site_dirs or None
    if sg.root is not None and sg.declared_env:
        unknown = {k for k in launch.env if k.startswith("SGLANG_") and k not in sg.declared_env}
        if unknown:
            sg.referenced_env = referenced_env(sg.root, unknown)
    if sg.root is not None:
        from validator.sources.plugin_env import plugin_state

        facts.plugin = plugin_state(launch.env, sg.plugins)
    # the account the server runs as: --service-user, else the unit's User= (systemd runs it so)
    service_user = inputs.service_user or launch.user
    user_from = "--service-user" if inputs.service_user else "the unit's User="
    if sg.root is not None:  # without the server's environment, this one's packages prove nothing
        try:
            facts.humming = read_humming(
                launch.env, site_dirs=site_dirs, service_user=service_user, user_from=user_from
            )
        except (OSError, UnknownUser) as exc:
            facts.errors[HUMMING] = str(exc)
    facts.host = read_host(service_user=service_user)
    _gather_recipe_sources(facts, inputs)
    model_dir = inputs.model_dir or _local_model_path(launch, container)
    model_path = launch.args.get("model_path")
    if model_dir is None and launch.origin.startswith("unit:") and str(model_path).startswith("~"):
        facts.errors[CHECKPOINT] = (
            f"--model-path {model_path}: systemd does not expand '~' in ExecStart= (the server would look "
            "for a directory literally named '~'); write the absolute path"
        )
    if model_dir is None and "model_path" in launch.unresolved:
        facts.errors[CHECKPOINT] = f"--model-path is set at run time: {launch.unresolved['model_path']}"
    elif model_dir is None and container is None and isinstance(model_path, str):
        model_dir = _hub_snapshot(facts, launch, model_path, inputs)
    if model_dir is not None:
        from validator.sources.checkpoint import read_checkpoint

        if not model_dir.is_dir():
            facts.errors[CHECKPOINT] = f"{model_dir}: model directory not found"
        else:
            try:
                facts.checkpoint = read_checkpoint(model_dir)
            except InputError as exc:
                facts.errors[CHECKPOINT] = str(exc)
                if malformed is None:
                    raise
                malformed.append(exc)
    if facts.launch is None:
        facts.errors[LAUNCH] = "no launch command"
    return facts


def _gather_recipe_sources(facts: Facts, inputs: PreflightInputs) -> None:
    """The evidence only some recipes need: the DSpark draft checkpoint, FlashInfer's kernels (for the
    flashinfer_mxfp4 path) and the supervisor's start budget (a unit file)."""
    launch, sg, host = facts.launch, facts.sglang, facts.host
    assert launch is not None and sg is not None and host is not None
    args = launch.args
    if str(args.get("speculative_algorithm") or "").upper() == DSPARK:
        from validator.sources.dspark_draft import read_dspark_draft

        draft = args.get("speculative_draft_model_path")
        revision = args.get("speculative_draft_model_revision")
        model_path = args.get("model_path")
        facts.dspark_draft = read_dspark_draft(
            draft if isinstance(draft, str) else None,
            model_path if isinstance(model_path, str) else None,
            revision=revision if isinstance(revision, str) else None,
            env=launch.env,
        )
    # FlashInfer's MoE kernels matter only on the flashinfer_mxfp4 path ('auto' resolves to it here)
    if sg.root is not None and args.get("moe_runner_backend") in ("flashinfer_mxfp4", "auto"):
        from validator.sources.flashinfer import read_flashinfer

        named_user = inputs.service_user or launch.user
        home = host.home if named_user or not launch.env.get("HOME") else Path(launch.env["HOME"])
        try:
            facts.flashinfer = read_flashinfer(
                launch.env,
                site_dirs=sg.site_dirs,
                home=home or Path("/nonexistent"),
                sglang_redirects=sg.redirects_flashinfer_cache,
            )
        except OSError as exc:
            facts.errors[FLASHINFER] = str(exc)
    if inputs.kube_manifest is not None:
        from validator.sources.start_budget import from_kubernetes

        facts.start_budget = from_kubernetes(inputs.kube_manifest, inputs.kube_container)
    elif inputs.unit is not None:
        from validator.sources.start_budget import from_unit
        from validator.sources.systemd_unit import load_unit

        files = list(inputs.env_files) or None
        facts.start_budget = from_unit(load_unit(inputs.unit, base_env=dict(launch.env), env_files=files))


def _hub_snapshot(facts: Facts, launch: LaunchFacts, model_path: str, inputs: PreflightInputs) -> Path | None:
    """A ``--model-path`` that is a Hugging Face repo id (not a directory where the server starts): the
    snapshot the server would load from its hub cache (``sources/hf_cache``), or, not cached, why there is
    nothing here to check (recorded as the checkpoint's error)."""
    from validator.sources import hf_cache

    cwd = launch.working_directory
    if Path(model_path).is_absolute() or (cwd is not None and (cwd / model_path).is_dir()):
        return None
    if not hf_cache.looks_like_repo_id(model_path) or Path(model_path).is_dir():
        return None
    named_user = inputs.service_user or launch.user
    host_home = facts.host.home if facts.host is not None else None
    home = launch.env.get("HOME") if not named_user and launch.env.get("HOME") else host_home
    revision, download_dir = launch.args.get("revision"), launch.args.get("download_dir")
    found = hf_cache.lookup(
        model_path,
        revision if isinstance(revision, str) else None,
        launch.env,
        str(home) if home else None,
        download_dir if isinstance(download_dir, str) else None,
    )
    if found.snapshot is not None:
        return found.snapshot
    then = (
        "the server would fail at start (HF_HUB_OFFLINE is set)"
        if hf_cache.offline(launch.env)
        else "the server would download it from the Hugging Face Hub when it starts (every weight file)"
    )
    facts.errors[CHECKPOINT] = (
        f"--model-path {model_path} is a Hugging Face repo id, {found.describe()}: {then}, so there is no "
        f"checkpoint here to check; download it first as the server's user (`hf download {model_path}"
        f"{' --revision ' + found.revision if found.revision != 'main' else ''}`) or give --model-dir"
    )
    return None


def _local_model_path(launch: LaunchFacts, container: ContainerSpec | None = None) -> Path | None:
    """Without --model-dir, the launch command's --model-path when it names a local directory (for a
    container, the host directory mounted there)."""
    value = launch.args.get("model_path")
    if isinstance(value, str) and value.startswith(("/", ".")):
        path: Path | None = Path(value)
        if container is not None:
            from validator.sources.docker_run import host_path

            path, _ = host_path(value, container.mounts)
        if path is not None and (path / "config.json").is_file():
            return path
    return None


_UNRESOLVED_REMEDY = (
    "Validate what really runs: put `exec spark-validate launch -- ...` in place of the script's `exec`, "
    "or give the value literally."
)


_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


def unproven_by_unresolved(results: list[CheckResult], unresolved: Mapping[str, str]) -> list[CheckResult]:
    """Checks that read a value known only at run time become ``error``: they could not be proven.

    A check is taken to read a value when its message or evidence names it (the argparse dest, its flag,
    or the variable) or names its family (``speculative``, ``moe``): deliberately broad, since a check
    wrongly marked unproven costs an inconclusive verdict, and one wrongly kept costs a false verdict."""

    keys: dict[str, list[str]] = {}
    by_source = {n: why for n, why in unresolved.items() if n in (SGLANG, HUMMING)}
    for name in unresolved:
        if name in by_source or name == "*":
            continue
        action = load_table().action_for_dest(name)
        words = [name, *(action.option_strings if action is not None else ())]
        family = name.split("_")[0].lower()
        if action is not None and family not in ("model", "enable", "disable"):
            words.append(family)
        keys[name] = [w.lower() for w in words]
    out = []
    for r in results:
        hidden = [n for n in by_source if n in r.sources]
        if hidden and r.status in (Status.PASS, Status.SKIP, Status.WARN, Status.ERROR):
            why = "; ".join(by_source[n] for n in hidden)
            from validator.sources.docker_run import IMAGE_REMEDY

            message = f"not proven: {why}"
            out.append(replace(r, status=Status.ERROR, message=message, remedy=IMAGE_REMEDY, why=None))
            continue
        if LAUNCH not in r.sources or r.status not in (Status.PASS, Status.FAIL, Status.WARN, Status.SKIP):
            out.append(r)
            continue
        raw = r.message + " " + json.dumps(r.evidence, default=str)
        text = raw.lower()
        hit = [n for n, words in keys.items() if any(w in text for w in words)]
        # "*": a sourced file missing here would have set variables nobody knows: every check that names
        # an environment variable, the program or the interpreter reads what it could have changed
        if "*" in unresolved and (_ENV_NAME.search(raw) or "interpreter" in text or "program" in text):
            hit.append("*")
        if not hit:
            out.append(r)
            continue
        why = "; ".join(f"{n}: {unresolved[n]}" for n in hit)
        out.append(
            replace(
                r,
                status=Status.ERROR,
                message=f"not provable statically: {why} (the check read: {r.message})",
                remedy=_UNRESOLVED_REMEDY,
                why=None,
                evidence={**r.evidence, "unresolved": {n: unresolved[n] for n in hit}},
            )
        )
    return out


def run_preflight(
    inputs: PreflightInputs,
    loaded: LoadedPack | None,
    *,
    strict: bool = False,
    allow_partial: bool = False,
    pack_dirs: Sequence[Path] = (),
) -> PreflightRun:
    """``loaded`` None: ``--rules auto``, the shipped pack (or pack in ``pack_dirs``) whose recipe the
    launch command follows."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    malformed: list[InputError] = []
    facts = gather(inputs, malformed)
    auto = None
    no_pack = False
    if loaded is None:
        chosen, auto = choose_pack(facts, pack_dirs)
        no_pack = chosen is None  # no shipped pack is written for the model: nothing is judged
        loaded = chosen or load_pack(None)
    results = (
        []
        if no_pack
        else run_checks(facts, loaded, mode="preflight", strict=strict, selection=inputs.selection)
    )
    if auto is not None:
        results.insert(0, auto)
    if facts.launch is not None and facts.launch.unresolved:
        results = unproven_by_unresolved(results, facts.launch.unresolved)
    target = facts.launch.origin if facts.launch is not None else None
    report = build_report(
        results,
        loaded,
        mode="preflight",
        started_at=started_at,
        started_monotonic=t0,
        strict=strict,
        allow_partial=allow_partial and not no_pack,
        target=target,
        rule_pack=NO_PACK if no_pack else None,
    )
    return PreflightRun(report, facts, malformed[0] if malformed else None, loaded)
