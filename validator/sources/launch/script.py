"""``--script FILE``: a launcher script read statically, never run -> ``Launcher``.

The adapter from ``shell.reader`` (which walks every path) to ``Launcher``: what bash would hand the
server, or what cannot be known, never a different concrete answer. Launch paths must agree (else the value
is ``unresolved``: paths whose words differ are read apart and merged argument by argument); a path that
exits first is not the launch (its conditions are named); an unfollowable path, or a program or container
that differs, makes the launch ``UnresolvedLaunch``; ``env`` and the wrappers (``nohup``, ``setsid``,
``timeout``... ``wrappers.py``) are applied as those programs do. Read as ``/path/start.sh ARGS`` from its
own directory (``--script-arg``), said where the reading relies on it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from validator.bounded_files import look, looks_like
from validator.errors import InputError, UnresolvedLaunch
from validator.facts import ENVIRONMENT_UNKNOWN
from validator.redact import environment_credentials
from validator.sources.container import ContainerSpec, host_path
from validator.sources.launch.command import (
    SHELLS,
    Launcher,
    launch_from_argv,
    looks_like_option,
    many_values,
    optional_value,
    placeholder,
    required,
    shebang,
    takes_value,
)
from validator.sources.launch.docker_run import (
    RUNTIME_VALUE,
    is_container_run,
    launch_from_container,
    parse_docker_words,
    runtime_env_values,
    unread_values,
)
from validator.sources.launch.shell.machine import others_could_write
from validator.sources.launch.shell.programs import is_server_command, which
from validator.sources.launch.shell.reader import read_script
from validator.sources.launch.shell.state import Ending, Launch, Reading
from validator.sources.launch.shell.syntax import OPTION_LETTERS
from validator.sources.launch.shell.values import Field, Unknown, Unsplit, Value, join
from validator.sources.launch.wrappers import WRAPPERS, unwrap
from validator.trusted_files import namers, realpath

# what bash adds to every child's environment by itself, which no check reads
BASH_BOOKKEEPING = frozenset({"_", "SHLVL"})


@dataclass
class Exec:
    """What the kernel is asked to run: the program file, its argv and its environment."""

    program: Value  # the file executed (resolved on PATH), Unknown when it depends on the run
    argv: list[Field] | Unsplit  # argv[0] as written, then the arguments
    env: dict[str, Value]
    origin: dict[str, str]
    unexported: set[str]
    cwd: Value
    line: int
    where: str
    others: str | None = None  # why variables not in ``env`` may reach the server too
    written: dict[str, str] = field(default_factory=dict)  # files the script wrote, with their text
    # the paths' own argvs where they differ; ``argv`` is their merge word by word where their lengths
    # agree, else Unsplit: ``launch_from_script`` reads them apart where the merge cannot be read
    paths: list[list[Field]] = field(default_factory=list)
    paths_at: list[str] = field(default_factory=list)  # where each of ``paths`` launches (file:line)
    cwd_given: bool = True  # on every path a cd set ``cwd`` (else the reading assumed where it starts)
    cwd_read: bool = False  # on some path a relative path was read against the assumed directory
    assumed: list[str] = field(default_factory=list)  # the run-time conditions its path took


def final_exec(launch: Launch) -> Exec:
    """The launch with ``env`` and the wrappers applied: the program they run, with its environment."""
    env = dict(launch.env)
    origin = dict(launch.origin)
    program: Value
    argv: list[Field] | Unsplit
    if isinstance(launch.words, Unknown):
        program = argv = Unsplit(launch.words.reason)
        others, written = launch.others, {}
    else:
        argv, path, others = _unwrapped(list(launch.words), launch, env, origin)
        head = join(argv[0])
        program = head if isinstance(head, Unknown) else which(head, path, launch.cwd)
        written = dict(launch.written)
    return Exec(
        program,
        argv,
        env,
        origin,
        launch.unexported,
        launch.cwd,
        launch.line,
        launch.where,
        others,
        written,
        cwd_given=launch.cwd_given,
        cwd_read=launch.cwd_read,
        assumed=list(launch.assumed),
    )


def _unwrapped(
    words: list[Field], launch: Launch, env: dict[str, Value], origin: dict[str, str]
) -> tuple[list[Field], Value, str | None]:
    """``env`` and the wrappers of ``wrappers.WRAPPERS`` (nohup, setsid, timeout...) before the program,
    applied to ``env`` and ``origin`` as those programs do: the words they run, the ``PATH`` the program is
    found on (the one they pass on: they exec it with execvp), and ``others`` (None once ``env -i`` cleared
    it)."""
    others = launch.others
    path: Value = launch.path
    at = f"{launch.where}:{launch.line}"
    while words:
        head = join(words[0])
        if isinstance(head, Unknown) or os.path.basename(head) not in (*WRAPPERS, "env"):
            break
        wrapper = os.path.basename(head)
        words = words[1:]
        # each execs its command with execvp, on the PATH it passes on
        path = env.get("PATH", Unknown(f"{wrapper} runs the program with no PATH: the C library's default"))
        if wrapper in WRAPPERS:
            # its own words end before a field of unknown word count, or where they end is unknown
            cut = next((k for k, f in enumerate(words) if f and isinstance(f[0], Unsplit)), len(words))
            known = [join(f) for f in words[:cut]]
            done = unwrap(wrapper, [w if isinstance(w, str) else None for w in known], at)
            if done.skip == cut < len(words):
                raise UnresolvedLaunch(f"{at}: the words after {wrapper} are computed at run time")
            for var, text in done.env.items():
                env[var], origin[var] = text, f"{wrapper}:{at}"
            for var, why in done.unknown.items():
                env[var], origin[var] = Unknown(why), f"{wrapper}:{at}"
            words = words[done.skip :]
            continue
        while words:
            w = join(words[0])
            if isinstance(words[0][0], Unsplit):
                raise UnresolvedLaunch(
                    f"{at}: the words of env are computed at run time: {words[0][0].reason}"
                )
            if isinstance(w, str) and w in ("-i", "-", "--ignore-environment"):
                env.clear()
                origin.clear()
                others = None
                words = words[1:]
            elif isinstance(w, str) and w in ("-u", "--unset") and len(words) > 1:
                name = join(words[1])
                if isinstance(name, Unknown):
                    raise UnresolvedLaunch(f"{at}: env -u of a name known only at run time: {name.reason}")
                env.pop(name, None)
                words = words[2:]
            elif isinstance(w, str) and w.startswith("--unset="):
                env.pop(w.split("=", 1)[1], None)
                words = words[1:]
            elif isinstance(w, str) and w == "--":
                words = words[1:]
                break
            elif isinstance(w, str) and w.startswith("-"):
                raise UnresolvedLaunch(f"{at}: env option {w!r} is not modelled")
            else:
                first = words[0][0] if words[0] else ""
                lead = first if isinstance(first, str) else ""
                name, eq, _ = lead.partition("=")
                if not eq or not name or "/" in name:
                    break
                value: Value = join([lead[len(name) + 1 :], *words[0][1:]])
                env[name] = value
                origin[name] = f"script:{at}"
                words = words[1:]
        path = env.get("PATH", Unknown("env runs the program with no PATH: the C library's default"))
    if not words:
        raise InputError(at, "env or a wrapper (nohup, setsid, timeout...) with no program after it")
    return words, path, others


def _same(a: Exec, b: Exec) -> bool:
    return (a.program, a.argv, a.env, a.cwd, a.others) == (b.program, b.argv, b.env, b.cwd, b.others)


def merged(execs: list[Exec], why: str) -> Exec:
    """The launches of several paths as one: what they agree on, Unknown where they differ."""
    first = execs[0]
    if all(_same(first, e) for e in execs[1:]):
        return first
    at = f"{first.where}:{first.line}"
    program = first.program
    if any(e.program != first.program for e in execs):
        heads = {join(e.argv[0]) if not isinstance(e.argv, Unknown) and e.argv else None for e in execs}
        head = heads.pop() if len(heads) == 1 else None
        if not isinstance(head, str):
            raise UnresolvedLaunch(f"{at}: the program depends on a run-time condition ({why})")
        # the same command word, found on a PATH that differs between the paths: which file runs is
        # unknown, what it is given is not
        program = Unknown(f"the file {head} runs depends on a run-time condition ({why})")
    if any(
        isinstance(e.argv, Unknown) or any(f and isinstance(f[0], Unsplit) for f in e.argv) for e in execs
    ):
        raise UnresolvedLaunch(f"{at}: the arguments depend on a run-time condition ({why})")
    argv: list[Field] = []
    paths: list[list[Field]] = []
    paths_at: list[str] = []
    for e in execs:  # each path's own argv, for ``launch_from_script`` to read apart
        if e.argv not in paths:
            paths.append(e.argv)  # type: ignore[arg-type]
            taken = "; ".join(e.assumed[:3]) + ("; ..." if len(e.assumed) > 3 else "")
            paths_at.append(f"{e.where}:{e.line}" + (f" (the path where {taken})" if taken else ""))
    if len(paths) == 1:
        paths, paths_at = [], []
    by_position = len({len(e.argv) for e in execs}) == 1  # type: ignore[arg-type]
    # words present on some paths only: no position lines up, so only the paths read apart tell
    for k, f in enumerate(first.argv if by_position else []):  # type: ignore[arg-type]
        if all(e.argv[k] == f for e in execs):  # type: ignore[index]
            argv.append(f)
        else:
            argv.append([Unknown(f"the word depends on a run-time condition ({why})")])
    env: dict[str, Value] = {}
    for name in {n for e in execs for n in e.env}:
        values = [e.env.get(name) for e in execs]
        if all(v == values[0] for v in values) and values[0] is not None:
            env[name] = values[0]
        else:
            env[name] = Unknown(f"whether and how {name} is set depends on a run-time condition ({why})")
    cwd = (
        first.cwd if all(e.cwd == first.cwd for e in execs) else Unknown(f"the directory depends on ({why})")
    )
    others = next((e.others for e in execs if e.others is not None), None)
    written = {p: c for p, c in first.written.items() if all(e.written.get(p) == c for e in execs)}
    words: list[Field] | Unsplit = argv
    if not by_position:  # no one argv: a reader that does not read ``paths`` apart finds them unknown
        words = Unsplit(f"the arguments depend on a run-time condition ({why})")
    return Exec(
        program,
        words,
        env,
        first.origin,
        first.unexported,
        cwd,
        first.line,
        first.where,
        others,
        written,
        paths,
        paths_at,
        all(e.cwd_given for e in execs),
        any(e.cwd_read for e in execs),
    )


def read_exec(
    path: Path | str, env: Mapping[str, str], args: list[str] | None = None
) -> tuple[Exec, list[Ending]]:
    """The one launch the script makes (paths merged), and the endings of the paths that launched.
    Raises UnresolvedLaunch when a path cannot be followed, InputError when no path launches."""
    return exec_of(read_script(path, env=env, args=args))


def exec_of(reading: Reading) -> tuple[Exec, list[Ending]]:
    """``read_exec`` of a reading already made."""
    where = str(reading.script)
    stuck = [e for e in reading.endings if e.kind == "unresolved"]
    if stuck:
        e = stuck[0]
        more = f" (and {len(stuck) - 1} more paths)" if len(stuck) > 1 else ""
        raise UnresolvedLaunch(f"{e.where}:{e.line}: {e.reason}{more}")
    launched = [e for e in reading.endings if e.kind == "launch" and e.launch is not None]
    if not launched:
        raise InputError(where, _no_launch(reading))
    execs = [final_exec(e.launch) for e in launched if e.launch is not None]
    why = "; ".join(sorted({a for e in launched for a in e.assumed})[:3]) or "a run-time condition"
    return merged(execs, why), launched


def _no_launch(reading: Reading) -> str:
    """Why no path launches: where the paths end, and the other scripts it runs, which are not followed
    (a driver such as ``setsid nohup ./start.sh &``: that script is the one to give)."""
    ends = sorted(
        {
            f"at line {e.line} ({e.reason})"
            if e.line
            else "at the end of the script"
            if e.reason == "the script ends"
            else e.reason
            for e in reading.endings
        }
    )
    more = f" (and {len(ends) - 3} more)" if len(ends) > 3 else ""
    text = (
        "no path through the script starts the SGLang server (python -m sglang.launch_server, sglang serve, "
        f"spark-validate launch or docker run) on this host; its paths end {', '.join(ends[:3])}{more}"
    )
    if reading.scripts:
        names = ", ".join(reading.scripts[:3])
        text += (
            f"; it runs another script, {names}, which is not followed here: if that starts the server, "
            "give it with --script (with the environment and arguments this one gives it)"
        )
    return text


def resolve(ex: Exec) -> tuple[list[str], dict[str, str], dict[str, str], dict[str, str]]:
    """(argv, env, env origin, unresolved) for ``launch_from_argv``; raises UnresolvedLaunch."""
    at = f"{ex.where}:{ex.line}"
    if ex.paths and isinstance(ex.argv, Unknown):  # read apart only by ``launch_from_script``
        raise UnresolvedLaunch(f"{at}: {ex.argv.reason}")
    if isinstance(ex.argv, Unknown):
        raise UnresolvedLaunch(f"{at}: the command is computed at run time: {ex.argv.reason}")
    unresolved: dict[str, str] = {}
    env: dict[str, str] = {}
    for k, v in ex.env.items():
        if k in BASH_BOOKKEEPING:
            continue
        if isinstance(v, Unknown):
            unresolved[k] = v.reason
        else:
            env[k] = v
    head = join(ex.argv[0]) if ex.argv else Unknown("no program")
    if isinstance(head, Unknown):
        raise UnresolvedLaunch(f"{at}: the program is computed at run time: {head.reason}")
    program = ex.program if isinstance(ex.program, str) else head
    argv: list[str] = [program]
    words = [join(f) for f in ex.argv]
    maybe = [w if isinstance(w, str) else None for w in words]
    # a container's variable set to a run-time value: that variable unknown, the rest of the run known
    assigned = runtime_env_values(maybe, [_lead(f) for f in ex.argv])
    unread = unread_values(maybe, assigned)
    swallowed = ""  # a flag with nargs '+' whose value is known at run time: the words after it are its too
    for i, f in enumerate(ex.argv[1:], start=1):
        if f and isinstance(f[0], Unsplit):
            raise UnresolvedLaunch(f"{at}: an argument is computed at run time: {f[0].reason}")
        value = words[i]
        if swallowed and isinstance(value, Unknown):
            raise UnresolvedLaunch(
                f"{at}: a word computed at run time after {swallowed}'s values may be one of them or an "
                f"option: {value.reason}"
            )
        if swallowed and isinstance(value, str):
            option = looks_like_option(value)
            if option is None:
                raise UnresolvedLaunch(
                    f"{at}: whether {value!r} is an option or a value of {swallowed} is not known"
                )
            if not option:
                continue
        swallowed = ""
        if isinstance(value, str):
            argv.append(value)
            continue
        if i in assigned and not any(isinstance(p, Unsplit) for p in f):  # one word, whatever its value
            argv.append(assigned[i] + RUNTIME_VALUE + f"{at}: {value.reason}")
            continue
        if i in unread:  # a container option's value that nothing here reads (``--group-add "$gid"``)
            argv.append(f"<{argv[-1]}: known only at run time>")
            continue
        lead = f[0] if f and isinstance(f[0], str) else ""
        if lead.startswith("--") and "=" in lead:
            dest = takes_value(lead.split("=", 1)[0])
            if dest is not None:
                unresolved[dest] = value.reason
                continue
        if len(argv) > 1 and argv[-1].startswith("-") and (dest := takes_value(argv[-1])) is not None:
            if optional_value(argv[-1]) and (not lead or lead.startswith("-")):
                # argparse takes the word as the value only if it is not an option: which it is, and so
                # which options the server is given, is known only at run time
                raise UnresolvedLaunch(
                    f"{at}: {argv[-1]} takes a value only if the word after it is not an option, and that "
                    f"word is computed at run time: {value.reason}"
                )
            unresolved[dest] = value.reason
            swallowed = argv[-1] if many_values(argv[-1]) else ""  # argparse gives it the words after too
            if required(argv[-1]):  # kept, so that SGLang's parser does not refuse the command for it
                argv.append(placeholder(dest))
            else:
                argv.pop()
            continue
        raise UnresolvedLaunch(f"{at}: an argument is computed at run time: {value.reason}")
    return argv, env, {k: ex.origin.get(k, "environment") for k in env}, unresolved


def _lead(f: Field) -> str:
    """The known text a word begins with, before its first unknown part."""
    lead = []
    for part in f:
        if not isinstance(part, str):
            break
        lead.append(part)
    return "".join(lead)


def _container(argv: list[str], env: dict[str, str], where: str, cwd: Value) -> ContainerSpec | None:
    """The script's server runs in a container (``exec docker run ...``): its spec, else None. A variable
    ``-e`` sets to a value known only at run time (``RUNTIME_VALUE``) is unresolved in it, with why. Its
    relative ``--env-file`` and bind sources are the shell's directory's; where that is known only at run
    time, they are unknown, never this process's own directory's."""

    if not is_container_run(argv) and not is_container_run(argv, "exec"):
        return None
    if isinstance(cwd, Unknown):
        spec = parse_docker_words(argv, env, f"script:{where}", None, base_unknown=cwd.reason)
    else:
        spec = parse_docker_words(argv, env, f"script:{where}", cwd)
    for name, value in list(spec.env.items()):
        if value.startswith(RUNTIME_VALUE):
            del spec.env[name]
            spec.env_origin.pop(name, None)
            spec.unresolved[name] = f"docker run -e {name}=...: " + value[len(RUNTIME_VALUE) :]
    return spec


def through_entrypoint(spec: ContainerSpec, written: Mapping[str, str]) -> ContainerSpec:
    """A container whose entrypoint is a script the launcher itself wrote (``cat > /tmp/boot.sh <<'EOF'``,
    mounted with ``-v /tmp/boot.sh:/boot.sh``, ``--entrypoint /boot.sh``): the server command is what that
    script runs, read as bash runs it inside the container, where the image's environment and files are
    unknown (so is every variable the script does not set itself). Any other container as it is."""
    if not spec.entrypoint_overridden or not spec.argv or is_server_command(list(spec.argv)):
        return spec
    host, _ = host_path(spec.argv[0], spec.mounts) if spec.argv[0].startswith("/") else (None, "")
    text = None if host is None else written.get(os.path.normpath(str(host)))
    if host is None or text is None:
        return spec
    reading = read_script(
        host,
        env=spec.env,
        args=spec.argv[1:],
        text=text,
        inside=_inside(spec),
        cwd=_cwd(spec),
        unknown=_runtime_values(spec),
    )
    note = f"the entrypoint {spec.argv[0]} is {host}, written by the launcher: read as bash runs it there"
    others = others_could_write(os.path.normpath(str(host)))
    if others:
        # what it runs may be someone else's: the reading is the launcher's intent, and the container's
        # program is unproven anyway (the image hides its install); a failure of the given flags stands
        note += f"; another user could replace it before the container starts ({'; '.join(others[:2])})"
    return _read_inside(spec, reading, note)


def _runtime_values(spec: ContainerSpec) -> dict[str, str]:
    """The container's variables that its runtime fills in (a Kubernetes ``valueFrom``, ``docker run -e
    NAME=$(...)``): name -> why, as the shell inside reads them (the image does not set these: the
    launch does, with a value known only at run time)."""
    return {
        k: why
        for k, why in spec.unresolved.items()
        if k != ENVIRONMENT_UNKNOWN and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and k not in spec.env
    }


def _inside(spec: ContainerSpec) -> str:
    return f"the image {spec.image} (its environment and files are not visible from here)"


def _cwd(spec: ContainerSpec) -> Value:
    return spec.workdir or Unknown("the image's working directory")


def _read_inside(
    spec: ContainerSpec, reading: Reading, note: str | None, image_env: str | None = None
) -> ContainerSpec:
    """The container with the server command a shell reading inside it found (``note``: a warning).
    ``image_env``: the reading's own reason for the variables the image may set, which reach the server
    as they do when the container runs it directly (unseen, as ``launch_from_container`` says), so they
    leave nothing more unresolved; any other reason (a file the shell sources) does."""
    ex, _ = exec_of(reading)
    if not isinstance(ex.argv, Unknown) and ex.argv:
        # the program is found on the container's PATH, in its image: never the file this host has there
        ex = replace(ex, program=join(ex.argv[0]))
    argv, env, origin, unresolved = resolve(ex)
    if ex.others is not None and ex.others != image_env:
        unresolved["*"] = f"{ex.others}: which variables reach the server, and their values, are unknown"
    return replace(
        spec,
        argv=argv,
        env=env,
        env_origin={k: origin.get(k, spec.env_origin.get(k, "")) for k in env},
        unresolved={**spec.unresolved, **unresolved},
        warnings=[*spec.warnings, *([note] if note else [])],
    )


def _command_string(argv: list[str], where: str) -> tuple[str, set[str], int] | None:
    """``bash -c STRING [NAME [ARG...]]`` (or ``sh -c``, ``dash -c``): the shell, the options its command
    line switches on, and the index of STRING; None when ``argv`` is no shell given ``-c``. Options other
    than ``-c`` and those of ``set`` the reader models (a login shell's profile files, ``-o``) leave the
    launch unresolved, naming them."""
    shell = SHELLS.get(os.path.basename(argv[0])) if argv else None
    if shell is None:
        return None
    command, opts, others, i = False, set[str](), [], 1
    # bash and dash: a lone "-" ends the options as "--" does, a lone "+" is none
    while i < len(argv) and argv[i][:1] in ("-", "+"):
        word, i = argv[i], i + 1
        if word in ("--", "-"):
            break
        for letter in word[1:] if not word.startswith("--") else [word]:
            if letter == "c" and word[0] == "-":
                command = True
            elif letter in OPTION_LETTERS:
                (opts.add if word[0] == "-" else opts.discard)(OPTION_LETTERS[letter])
            else:
                others.append(word)
    if not command:
        return None
    if others or i >= len(argv):
        what = f"option {others[0]!r} is not modelled" if others else "-c is given no command string"
        raise UnresolvedLaunch(f"{where}: {argv[0]} -c: {what}, so what the shell runs is not known")
    return shell, opts, i


def shell_zero(argv: list[str], i: int, shell: str, env: Mapping[str, str]) -> str:
    """``$0`` of ``SHELL -c STRING [NAME ...]`` (STRING at ``i``): NAME, else the shell's own argv[0], but
    for bash (outside POSIX mode) started with BASH_ARGV0 in its environment: its value (bash 5 sets $0
    from it when no NAME is given)."""
    if i + 1 < len(argv):
        return argv[i + 1]
    return env["BASH_ARGV0"] if shell == "bash" and "BASH_ARGV0" in env else argv[0]


def through_shell(spec: ContainerSpec) -> ContainerSpec:
    """A container whose command is ``bash -c STRING [NAME [ARG...]]`` (``_command_string``; in Compose's
    ``command`` or ``entrypoint``, a Kubernetes ``command``/``args``): the server command is what STRING
    runs, read as that shell runs it inside the container (bash(1): NAME is ``$0``, the ARGs ``$1``...),
    where the image's environment and files are unknown. Any other container as it is."""
    argv = list(spec.argv)
    found = _command_string(argv, spec.where)
    if found is None:
        return spec
    shell, opts, i = found
    for ref, why in spec.unresolved.items():
        # a kubelet reference known only at run time (``$(LWS_LEADER_ADDRESS)``, a valueFrom): the kubelet
        # puts its value into the string before the shell reads it, quoted or not, so the text as written
        # is never what the server gets
        if ref.startswith("$(") and any(ref in word for word in argv[i:]):
            raise UnresolvedLaunch(
                f"{spec.where}: {argv[0]} -c: {why}, so what the container runs is not known"
            )
    if shell == "bash" and ENVIRONMENT_UNKNOWN in spec.unresolved and "BASH_ENV" not in spec.env:
        # bash -c sources the file the environment's BASH_ENV names before the string (bash(1), INVOCATION):
        # in a container started earlier (docker exec) that environment is not visible, so neither what the
        # string runs nor the variables the exec sets over it (-e) are known
        raise UnresolvedLaunch(
            f"{spec.where}: {argv[0]} -c in the container {spec.existing}: bash first sources the file its "
            "environment's BASH_ENV names, and that environment is not visible here (-e BASH_ENV= runs none)"
        )
    zero = shell_zero(argv, i, shell, spec.env)
    reading = read_script(
        f"{spec.where} ({argv[0]} -c)",
        env=spec.env,
        args=argv[i + 2 :],
        text=argv[i],
        inside=_inside(spec),
        cwd=_cwd(spec),
        command_string=(shell, opts, zero),
        unknown=_runtime_values(spec),
    )
    return _read_inside(spec, reading, None, image_env=_inside(spec))


# the most words, over all the paths whose arguments differ, that ``launch_from_script`` reads apart
MAX_APART_WORDS = 10_000

# a word that names a path from the working directory: ./x, ../x, --model-path=./x, -v ./x:/y
_RELATIVE = re.compile(r"(^|[=:,])\.\.?(/|$)")


def _launcher_of(
    ex: Exec, env_origin: Mapping[str, str] | None, name: str | None = None
) -> tuple[Launcher, dict[str, str]]:
    """One path's launch (``ex.argv`` a single argv) as a Launcher, with what it leaves unresolved;
    ``name`` names it (else the script)."""
    argv, server_env, origin, unresolved = resolve(ex)
    head = join(ex.argv[0]) if not isinstance(ex.argv, Unknown) and ex.argv else ""
    relative_program = isinstance(head, str) and "/" in head and not head.startswith("/")
    if relative_program or any(_RELATIVE.search(w) for w in argv):
        ex.cwd_read = True  # the server's own words name a path from the working directory
    for k, v in origin.items():
        if v == "environment":
            origin[k] = (env_origin or {}).get(k, "environment")
    base_dir = Path(ex.cwd) if isinstance(ex.cwd, str) else None
    container = _container(argv, server_env, ex.where, ex.cwd)
    if container is not None:
        launcher = launch_from_container(through_shell(through_entrypoint(container, ex.written)))
    else:
        launcher = launch_from_argv(
            argv,
            origin=name or f"script:{ex.where}",
            env=server_env,
            env_origin=origin,
            base_dir=base_dir,
            working_directory=base_dir,
        )
    launcher.container, launcher.placeholders = container, True
    if container is None and base_dir is not None and _model_from(launcher.server_args, base_dir):
        ex.cwd_read = True  # its checkpoint is a directory found from the working directory
    return launcher, unresolved


# the server's values that SGLang loads from the working directory where a directory of that name is there
_LOCAL_OR_HUB = ("model_path", "speculative_draft_model_path")


def _model_from(words: list[str], cwd: Path) -> bool:
    """A model path without ./ (``--model-path models/x``) that is a directory under ``cwd``: SGLang loads a
    local directory where there is one (``os.path.isdir``, sglang/srt/utils/common.py), else the Hugging
    Face repo of that id, so what runs depends on the directory. Looked at as the script's namers could."""
    for k, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if not eq:
            value = words[k + 1] if k + 1 < len(words) else ""
        if not flag.startswith("--") or takes_value(flag) not in _LOCAL_OR_HUB:
            continue
        if value and not value.startswith(("/", "-")) and looks_like(cwd / value, stat.S_ISDIR):
            return True
    return False


def _merged_launchers(
    variants: list[tuple[Launcher, dict[str, str]]], why: str, at: str, ats: list[str]
) -> tuple[Launcher, dict[str, str]]:
    """The launches of paths whose words differ in number, as one: the program and the container must be
    the same on every path (else the launch is unresolved); a variable or server argument that differs
    between them (or is given on some only) is unresolved, the rest stays known (``Launcher.parsed``)."""

    def shape(launcher: Launcher) -> tuple[object, ...]:
        f, c = launcher.facts, launcher.container
        bare = None if c is None else replace(c, argv=[], env={}, env_origin={}, unresolved={}, warnings=[])
        return (f.program, f.entry, f.interpreter, f.interpreter_options, f.working_directory, bare)

    first, unresolved = variants[0][0], dict(variants[0][1])
    if any(shape(other) != shape(first) for other, _ in variants[1:]):
        what = "container's options" if first.container is not None else "program"
        raise UnresolvedLaunch(f"{at}: the {what} depend on a run-time condition ({why})")
    for other, more in variants[1:]:
        # what another path's own reading left unknown (a container's: its shell's sourced file, ``*``)
        for name, reason in [*more.items(), *other.facts.unresolved.items()]:
            if name not in first.facts.unresolved:
                unresolved.setdefault(name, reason)
    envs = [launcher.facts.env for launcher, _ in variants]
    for name in sorted({n for e in envs for n in e}):
        if name not in first.facts.env or any(e.get(name) != first.facts.env[name] for e in envs):
            first.facts.env.pop(name, None)
            first.facts.env_origin.pop(name, None)
            unresolved.setdefault(
                name, f"whether and how {name} is set depends on a run-time condition ({why})"
            )
    first.paths_at = ats[:1]
    for (other, _), other_at in zip(variants[1:], ats[1:], strict=True):
        if other.server_args != first.server_args and other.server_args not in first.alternatives:
            first.alternatives.append(other.server_args)
            first.paths_at.append(other_at)
    first.alternatives_why, first.alternatives_at = why, at
    return first, unresolved


def launch_from_script(
    path: Path | str,
    *,
    env: Mapping[str, str] | None = None,
    env_origin: Mapping[str, str] | None = None,
    args: list[str] | None = None,
    cwd: Path | None = None,
    name: str | None = None,
    own_env: Collection[str] = (),
    own_env_by: tuple[int, ...] = (),
) -> Launcher:
    """``--script``: the server command the script runs, with the environment it gives it; its container
    is the ``docker run`` the script runs as written, when it runs one (for what it hides). ``cwd``: the
    directory it is started in (else its own, an assumption named in a warning); ``name``: what runs it
    (a unit), for messages; ``own_env``: the variables of ``env`` the unit running it sets, and
    ``own_env_by`` who wrote that unit (the users who named it; none for root's)."""
    here = None if cwd is None else str(cwd)
    reading = read_script(
        path, env=dict(env or {}), args=args, cwd=here, own_env=own_env, own_env_by=own_env_by
    )
    return _launch_of(reading, env_origin, None if name is None else f"{name} ({path})")


def launch_from_program(
    argv: list[str],
    *,
    origin: str,
    env: Mapping[str, str],
    env_origin: Mapping[str, str],
    working_directory: Path | None,
) -> Launcher | None:
    """A launch on this host whose program is not SGLang's, read by the reader that fits (a unit's
    ExecStart=, ``--launch-cmd``, ``launch --``): a shell given ``-c`` (:func:`launch_from_command_string`), a
    ``docker``/``podman`` ``run`` or ``exec`` (its bind sources from ``working_directory``), or a script
    whose ``#!`` names bash or sh, with its arguments, started in ``working_directory``. None for any
    other program."""
    _carried_credential(argv, env, origin)
    through = launch_from_command_string(
        argv, origin=origin, env=env, env_origin=env_origin, working_directory=working_directory
    )
    if through is not None:
        return through
    base = str(working_directory) if working_directory is not None else None
    if is_container_run(argv) or is_container_run(argv, "exec"):
        spec = parse_docker_words(argv, env, origin, base)
        _carried_credential(spec.env.values(), env, origin)  # -e NAME, an env file's NAME: the reader's
        return launch_from_container(through_shell(spec))
    program = Path(argv[0])
    if not program.is_absolute():
        if working_directory is None or "/" not in argv[0]:
            return None  # run from a directory not known, or looked up on a PATH: not read
        program = working_directory / program
    found = shebang(program)
    if found is None or SHELLS.get(Path(found[0]).name) is None:
        return None
    st = look(program, "program")
    if st is not None and not st.st_mode & 0o111:  # execve: EACCES, the service never starts
        raise InputError(origin, f"{argv[0][:200]!r} is not executable (mode {st.st_mode & 0o7777:04o})")
    return launch_from_script(
        program,
        env=env,
        env_origin=env_origin,
        args=argv[1:],
        cwd=working_directory,
        name=origin,
        # the reader's own (its environment, an operator's --env-file) are not the unit's
        own_env=[k for k, o in env_origin.items() if o != "environment" and not o.startswith("--env-file ")],
        own_env_by=namers(),
    )


def _carried_credential(words: Iterable[str], env: Mapping[str, str], origin: str) -> None:
    """In another user's launch (a unit of theirs), a word that holds a credential of the reader's
    environment (systemd expanded ``${HF_TOKEN}`` into it, docker's ``-e HF_TOKEN`` copied it) could be
    sliced past the redactor by what reads it (``${1:3}``), as their script could (``Evaluator.run``):
    the launch is unresolved, naming no value."""
    if not namers():
        return
    credentials = [env[k] for k in environment_credentials(env) if env[k]]
    if any(c in word for c in credentials for word in words):
        raise UnresolvedLaunch(
            f"{origin}: the command is given a credential of the reader's environment, unknown to another "
            "user's launch"
        )


def launch_from_command_string(
    argv: list[str],
    *,
    origin: str,
    env: Mapping[str, str],
    env_origin: Mapping[str, str],
    working_directory: Path | None,
) -> Launcher | None:
    """A launch on this host whose program is ``bash -c STRING [NAME [ARG...]]`` (a unit's ExecStart=, a
    ``--launch-cmd``, ``launch --``): the server command STRING runs, read as a script is, started in
    ``working_directory`` (unknown when None: its relative paths are then unknown). Its writers are the users
    who named the launch (another user's unit): to them the reader's credentials are unknown, as to
    another user's script. None when ``argv`` is no shell given ``-c``."""
    found = _command_string(argv, origin)
    if found is None:
        return None
    shell, opts, i = found
    cwd: Value = (
        str(working_directory)
        if working_directory is not None
        else Unknown(f"{origin}: the directory the command runs in is not known")
    )
    _a_shell(argv[0], env, cwd, origin)
    writers = namers()
    zero = shell_zero(argv, i, shell, env)
    reading = read_script(
        f"{origin} ({argv[0]} -c)",
        env=env,
        args=argv[i + 2 :],
        text=argv[i],
        cwd=cwd,
        command_string=(shell, opts, zero),
        writers=writers,
        # the reader's own (its environment, an operator's --env-file) are not the writers'
        own_env=[k for k, o in env_origin.items() if o != "environment" and not o.startswith("--env-file ")],
    )
    return _launch_of(reading, env_origin, f"{origin} ({argv[0]} -c)")


def _a_shell(program: str, env: Mapping[str, str], cwd: Value, origin: str) -> None:
    """The file ``program`` runs (on PATH, from ``cwd``) is a shell only by its name: read as bash or dash
    only where no user but root (and this one) could have put it there; a ``bash`` another user wrote
    (their unit's ``ExecStart=/home/them/bash -c ...``) may run anything (red team 22)."""
    path = which(program, env.get("PATH", os.defpath), cwd)
    if isinstance(path, Unknown):
        raise UnresolvedLaunch(f"{origin}: the shell {program}: {path.reason}")
    try:  # the file a link (/bin/sh -> dash) leads to, walked as the namers where another user named it
        real = str(realpath(path))
    except OSError as exc:
        raise UnresolvedLaunch(f"{origin}: the shell {path}: {exc}") from None
    if problems := others_could_write(real):
        raise UnresolvedLaunch(
            f"{origin}: {path} is a shell by its name only: {problems[0]}, so what it runs is not known"
        )


def _launch_of(reading: Reading, env_origin: Mapping[str, str] | None, origin: str | None = None) -> Launcher:
    """The launch a script's reading makes: its paths read apart where their words differ, and merged."""
    ex, launched = exec_of(reading)
    ats = ex.paths_at if ex.paths else [f"{ex.where}:{ex.line}"]
    paths = [replace(ex, argv=a, paths=[]) for a in ex.paths or [ex.argv]]  # type: ignore[list-item]
    variants: list[tuple[Launcher, dict[str, str]]] = []
    if ex.paths and not isinstance(ex.argv, Unknown):  # merged word by word: read so while it can be
        with contextlib.suppress(UnresolvedLaunch):
            whole = replace(ex, paths=[])
            variants = [_launcher_of(whole, env_origin, origin)]
            paths, ats = [whole], ats[:1]
    words = sum(len(one.argv) for one in paths if not isinstance(one.argv, Unknown))
    if not variants and len(paths) > 1 and words > MAX_APART_WORDS:
        # each path is parsed with SGLang's flag table (argparse: quadratic in the words of one): bounded
        raise UnresolvedLaunch(
            f"{ex.where}:{ex.line}: the arguments differ between {len(paths)} paths of {words} words in all, "
            f"more than the {MAX_APART_WORDS} read apart"
        )
    variants = variants or [_launcher_of(one, env_origin, origin) for one in paths]
    if len(variants) > 1:
        why = "; ".join(sorted({a for e in launched for a in e.assumed})[:3]) or "a run-time condition"
        launcher, unresolved = _merged_launchers(variants, why, f"{ex.where}:{ex.line}", ats)
    else:
        launcher, unresolved = variants[0]
    facts = launcher.facts
    facts.unresolved.update(unresolved)
    facts.unresolved_at.update(dict.fromkeys(unresolved, f"{ex.where}:{ex.line}"))
    facts.shell_only.update({n: "set by the script but not exported" for n in ex.unexported})
    if ex.others is not None:
        facts.unresolved["*"] = (
            f"source {ex.others}: its text is not known here, so every variable from there on is unknown "
            "(defaults included), and which others reach the server"
        )
        facts.unresolved_at.setdefault("*", ex.where)
    assumed = sorted({a for e in launched for a in e.assumed})
    if assumed:
        facts.warnings.append(
            "the reading assumes these run-time conditions held (a path where one did not exits before the "
            "server starts, or was read too): " + "; ".join(assumed)
        )
    if isinstance(ex.cwd, Unknown):
        facts.unresolved.setdefault("working_directory", ex.cwd.reason)
    elif not ex.cwd_given and any(one.cwd_read for one in paths):
        facts.warnings.append(
            f"read as run from {ex.cwd} (the script's own directory): the script does not cd to a directory "
            "of its own before it starts the server, so its relative paths (files it sources or tests, the "
            "server's ./ paths, a model path found there) are read from there; run from elsewhere, they name "
            "other files"
        )
    return launcher


__all__ = [
    "BASH_BOOKKEEPING",
    "Exec",
    "final_exec",
    "launch_from_script",
    "read_exec",
    "resolve",
]
