"""The launch source: the server's launch command from whichever input names it, parsed with the flag table
of the SGLang build that will run it, and that build and program located through the command's own
interpreter. Every other preflight source reads what this one establishes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from validator.errors import InputError, UnresolvedLaunch, UsageError
from validator.facts import ENVIRONMENT_UNKNOWN, LAUNCH, SGLANG, LaunchFacts, ProgramFacts, SGLangInstallFacts
from validator.preflight_inputs import PreflightInputs
from validator.redact import register_environment
from validator.sources.gathering import Gathering, Unreadable, preflight_source
from validator.sources.host.program import resolve_program
from validator.sources.host.server_command import stand_in_of
from validator.sources.launch import command as launch_command
from validator.sources.launch import systemd_unit
from validator.sources.launch.command import SHELLS, Launcher
from validator.sources.launch.compose import load_compose
from validator.sources.launch.docker_run import image_note, launch_from_container, parse_docker_cmd
from validator.sources.launch.env_file import read_env_file
from validator.sources.launch.kube_manifest import load_kube_container
from validator.sources.sglang.cli import ArgparseRefusal
from validator.sources.sglang.cli_table import TableChoice, load_table, parsing_with
from validator.sources.sglang.install import install_from_probe, read_sglang_install, referenced_env
from validator.sources.sglang.interpreter import inspect_program
from validator.sources.sglang.tables import table_for
from validator.trusted_files import named_by, read_as, realpath

if TYPE_CHECKING:
    from validator.sources.container import ContainerSpec
    from validator.sources.host.server_processes import ServerProcess

DSPARK = "DSPARK"


@preflight_source(LAUNCH, 10)
def gather(g: Gathering) -> None:
    """The launch command, the install and the program; then, for the sources after it, the server's
    environment and container. A script that computes its command at run time leaves nothing to check
    (``Unreadable``: the launch source's error)."""
    inputs = g.inputs
    try:
        launch, sg, program, g.container, g.env = launch_and_install(inputs)
    except UnresolvedLaunch as exc:
        raise Unreadable(str(exc)) from None
    g.facts.launch, g.facts.sglang, g.facts.program = launch, sg, program
    if g.container is not None and inputs.sglang_root is None:
        # the install is inside the image: not proven, never read from this host's Python
        g.hidden_install = image_note(g.container)
        launch.unresolved[SGLANG] = g.hidden_install
    if sg.root is not None and sg.declared_env:
        unknown = {k for k in launch.env if k.startswith("SGLANG_") and k not in sg.declared_env}
        if unknown:  # the install another user's interpreter reported: read only as they could read it
            with read_as(launch.named_by):
                sg.referenced_env = referenced_env(sg.root, unknown)


def read_launcher(inputs: PreflightInputs) -> tuple[Launcher, dict[str, str]]:
    """Every launch input read once: the launcher, its arguments not yet parsed (``Launcher.parsed``, once
    per flag table), and the environment the server will see: this process's environment (systemd runs
    ExecStartPre with the unit's environment), then each --env-file in order. For a running server, the
    environment it was exec'd with, and nothing else. Each input file, and a running server's process,
    another user owns names the files read for it only as far as that user could read (``named_by``)."""
    with read_as({}) as namers:
        launcher, env = _read_launcher(inputs)
    launcher.facts.named_by = dict(namers)
    return launcher, env


def probed_as_named(inputs: PreflightInputs, launch: LaunchFacts) -> LaunchFacts | str:
    """The launch as its interpreter is asked about it. Where another user's file named it, the probe runs
    as them (``run_as.of_files``): it is read again with none of this process's environment but ``PATH``
    (which finds the program, as for the report) and none of the operator's ``--env-file`` (as
    :func:`read_launcher` reads it otherwise), so that no value of theirs (a token in root's shell, copied
    by the script into a variable, an interpreter option or its working directory) reaches a process the
    other user owns. A launch that cannot be read so is not asked (the reason)."""
    process = os.environ if inputs.base_env is None else inputs.base_env
    kept = {"PATH": process["PATH"]} if "PATH" in process else {}
    if not launch.named_by or inputs.running is not None or (dict(process) == kept and not inputs.env_files):
        return launch
    try:
        with read_as(launch.named_by):
            own = _read_launcher(replace(inputs, base_env=kept, env_files=[]))[0].facts
    except (InputError, UnresolvedLaunch, UsageError) as exc:
        return f"without this process's environment the launch does not read ({exc})"
    if (own.program, own.interpreter) != (launch.program, launch.interpreter):
        # the program itself comes from this process's environment: the probe would ask another one
        return "the launch's program depends on this process's environment, which its owner is not given"
    return replace(
        launch,
        program=own.program,
        entry=own.entry,
        interpreter=own.interpreter,
        interpreter_options=list(own.interpreter_options),
        env=dict(own.env),
        env_origin=dict(own.env_origin),
        working_directory=own.working_directory,
    )


def _read_launcher(inputs: PreflightInputs) -> tuple[Launcher, dict[str, str]]:
    if inputs.running is not None:
        proc = inputs.running.process
        if proc.uid is not None:
            named_by(proc.uid, f"the command line of process {proc.pid}")
        seen = proc.env or {}
        where = f"/proc/{proc.pid}/environ"
        return launch_of_process(inputs.running, dict(seen), dict.fromkeys(seen, where)), dict(seen)
    process = dict(os.environ if inputs.base_env is None else inputs.base_env)
    files = [(path, read_env_file(path)) for path in inputs.env_files]
    env, origin = dict(process), dict.fromkeys(process, "process environment")
    for path, values in files:
        for k, v in values.items():
            env[k] = v
            origin[k] = f"env-file:{path}"
    # a launch file interpolates this environment (a unit's or Compose's ${HF_TOKEN}, behind a prefix that
    # hides the token's shape): its credentials are scrubbed from whatever the reading prints
    register_environment(env)
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
    container = container_spec(inputs, env)
    if container is not None:
        if container.argv and os.path.basename(container.argv[0]) in SHELLS:
            # `bash -c STRING`: read by the shell reader (imported here: it loads tree-sitter)
            from validator.sources.launch.script import through_shell

            container = through_shell(container)
        launcher = launch_from_container(container)
    elif inputs.script is not None:
        from validator.sources.launch.script import launch_from_script

        launcher = launch_from_script(inputs.script, env=env, env_origin=origin, args=inputs.script_args)
    elif inputs.argv is not None:
        # exec keeps the working directory: the server starts where `launch` runs
        launcher = launch_command.launch_from_argv(
            list(inputs.argv), origin="launch", env=env, working_directory=Path.cwd(), program_reader=_program
        )
    elif inputs.launch_cmd is not None:
        launcher = launch_command.launch_from_string(
            inputs.launch_cmd, origin="--launch-cmd", env=env, program_reader=_program
        )
    elif inputs.launch_args_file is not None:
        launcher = launch_command.launch_from_args_file(inputs.launch_args_file, env=env)
    else:
        assert inputs.unit is not None
        # with --unit, --env-file stands in for the unit's EnvironmentFile= (checked before installing it)
        launcher = systemd_unit.launch_from_unit(
            inputs.unit, base_env=process, env_files=files or None, program_reader=_program
        )
    for k, v in origin.items():
        launcher.facts.env_origin.setdefault(k, v)
    return launcher, env


def _program(
    argv: list[str],
    *,
    origin: str,
    env: Mapping[str, str],
    env_origin: Mapping[str, str],
    working_directory: Path | None,
) -> Launcher | None:
    """A launch whose program is not SGLang's, read by ``script.launch_from_program`` (imported here: it
    loads tree-sitter)."""
    from validator.sources.launch.script import launch_from_program

    return launch_from_program(
        argv, origin=origin, env=env, env_origin=env_origin, working_directory=working_directory
    )


def launch_of_process(server: ServerProcess, env: dict[str, str], origin: dict[str, str]) -> Launcher:
    """A running server's launch command: its argv (for a stand-in, the SGLang command it stands in for)
    with the environment and working directory the kernel shows. An environment that could not be
    read leaves every variable unresolved: a check that reads one is then not proven, never judged on an
    empty environment."""
    proc = server.process
    launcher = launch_command.launch_from_argv(
        # a stand-in's own argv (it is recognised as such); a server's command without the #! python
        list(server.process.argv if server.kind in ("stand-in", "launch") else server.command),
        origin=f"process {proc.pid}",
        env=env,
        env_origin=origin,
        working_directory=proc.cwd,
    )
    launcher.facts.user = proc.user
    if proc.env is None:  # every variable, whichever a pack's checks read (its FP8 switch, the caches)
        launcher.facts.unresolved[ENVIRONMENT_UNKNOWN] = proc.env_error or "its environment could not be read"
    return launcher


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
    other inputs; a script's is its launcher's)."""
    if kube_is_launch(inputs):
        assert inputs.kube_manifest is not None
        return load_kube_container(inputs.kube_manifest, inputs.kube_container)
    if inputs.docker_cmd is not None:
        return parse_docker_cmd(inputs.docker_cmd, env)
    if inputs.compose is not None:
        return load_compose(inputs.compose, inputs.service, env)
    return None


def _locate(
    inputs: PreflightInputs, launch: LaunchFacts, container: ContainerSpec | None
) -> tuple[SGLangInstallFacts, ProgramFacts]:
    """The install to read, and ``launch.program``'s evidence: the program resolved as exec would, its
    interpreter asked with the server's flags, environment and working directory (or, in ``container``,
    neither visible here). There is no fallback to this process's own packages: they prove nothing about
    the server's."""
    if container is not None:  # the program and the install are inside the image: not visible here
        note = image_note(container)
        hidden = ProgramFacts(
            written=launch.program,
            path=None,
            problem=f"is inside the container ({note})",
            interpreter=launch.interpreter,
            interpreter_options=list(launch.interpreter_options),
        )
        place = f"container {container.existing}" if container.existing else f"image {container.image}"
        return SGLangInstallFacts(root=None, located_by=place, note=note), hidden

    dspark = str(launch.args.get("speculative_algorithm") or "").upper() == DSPARK
    parser = launch.args.get("tool_call_parser")
    tools = parser if isinstance(parser, str) and parser != "auto" else None
    stand_in = stand_in_of(launch.command)
    if stand_in is not None:  # it runs instead of an SGLang install, which it names itself
        # resolved as exec would (``launch`` execs it), never asked what it imports
        path, _ = resolve_program(launch.program or "", launch.env, launch.working_directory)
        hidden = ProgramFacts(
            written=launch.program,
            path=path,
            problem=f"is {stand_in.what} ({stand_in.note})",
            interpreter=None,
        )
        if inputs.sglang_root is not None:  # its files for the install checks; the stand-in still runs
            where = f"--sglang-root {inputs.sglang_root}"
            tree = read_sglang_install(inputs.sglang_root, where, dspark=dspark, tool_call_parser=tools)
            return replace(tree, build_id=stand_in.build_id), hidden
        install = SGLangInstallFacts(
            root=None, located_by=stand_in.located_by, note=stand_in.note, build_id=stand_in.build_id
        )
        return install, hidden
    on_host = inputs.argv is not None or inputs.unit is not None or inputs.running is not None
    process = inputs.running.process if inputs.running is not None else None
    probed = probed_as_named(inputs, launch)
    program, probe = inspect_program(
        launch if isinstance(probed, str) else probed, on_server_host=on_host, process=process, refused=probed
    )
    if inputs.sglang_root is not None:
        where = f"--sglang-root {inputs.sglang_root}"
        imported = program.sglang_root
        if imported is not None and _resolved(imported) != inputs.sglang_root.resolve():
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
        with read_as({}):  # --sglang-root is the operator's own word, not the launch's
            tree = read_sglang_install(inputs.sglang_root, where, dspark=dspark, tool_call_parser=tools)
        return tree, program
    if probe is not None:
        return install_from_probe(probe, dspark=dspark, tool_call_parser=tools), program
    named = f"the program {launch.program} " if launch.program else ""
    note = named + (program.problem or "names no interpreter")
    return SGLangInstallFacts(root=None, located_by="launch command", note=note), program


def launch_and_install(
    inputs: PreflightInputs,
) -> tuple[LaunchFacts, SGLangInstallFacts, ProgramFacts, ContainerSpec | None, dict[str, str]]:
    """The launch command parsed with the flag table of the SGLang build that will run it: first with the
    shipped table (leniently if it refuses), then with the build's generated table if any, else leniently,
    reporting what the table does not know instead of failing. Every parse is of the one reading of the
    inputs, which also gives the container they describe and the server's environment."""
    launcher, env = read_launcher(inputs)
    # the SGLang that parses the words is inside an image (no --sglang-root): its version is not read here
    imaged = launcher.container if inputs.sglang_root is None else None
    refused: InputError | None = None
    try:
        launch = launcher.parsed()
    except InputError as exc:
        with parsing_with(TableChoice(load_table(), "the shipped table", lenient=True)):
            try:
                launch = launcher.parsed()
            except InputError:
                if imaged is not None and isinstance(exc, ArgparseRefusal):
                    raise UnresolvedLaunch(_refused_by_shipped(exc, imaged)) from None
                raise exc from None
        refused = exc
    # with --sglang-root the install is that tree, not one hidden in the container
    # the program and its install are named by the launch's own inputs; a --config names server arguments
    # only (its owner is a namer of those: the checkpoint, the draft), never the program or its interpreter
    located = replace(launch, named_by=dict(launcher.facts.named_by))
    with read_as(located.named_by):
        sg, program = _locate(inputs, located, None if inputs.sglang_root is not None else launcher.container)
    choice = table_for(sg, launch.interpreter)
    if choice is None:
        if refused is not None and not (imaged is not None and isinstance(refused, ArgparseRefusal)):
            raise refused
        # an image's SGLang of unread version: arguments the shipped table lacks are reported, not
        # refused (as for a host build with no generated table); the lenient parse above stands
    else:
        with parsing_with(choice):
            launch = launcher.parsed()
        launch.warnings.insert(0, f"launch command parsed with {choice.described}")
    return launch, sg, program, launcher.container, env


def _refused_by_shipped(exc: InputError, spec: ContainerSpec) -> str:
    """Why a refusal of the shipped table leaves an image's launch unresolved: any argparse refusal
    (ambiguous, ill-typed, missing value) depends on the flags a version registers, and the image's
    version is not read here (``-h``, which every version's argparse exits on, is not one of these)."""
    shipped = load_table().sglang_version
    return (
        f"{exc.where}: SGLang {shipped} would refuse the server's arguments ({exc.reason}), but the SGLang "
        f"that parses them is not that one: {image_note(spec)}, and its version is not read here"
    )


def _resolved(imported: Path) -> Path | None:
    """Where the reported SGLang is, resolved as the launch's owners could resolve it (None where they
    could not: not the named tree)."""
    try:
        return realpath(imported)
    except OSError:
        return None
