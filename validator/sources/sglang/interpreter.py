"""The server's interpreter, asked where it finds sglang: the program a launch runs, resolved as exec would,
and a bounded child of that python with the server's flags, environment and working directory.

The one part of reading the build that runs a program (process group killed at its deadline, never with more
privilege than whoever controls it: ``run_as``); the package and site directories it learns are all
``sglang.install`` and ``sglang-table`` need.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from validator.facts import LaunchFacts, ProgramFacts
from validator.sources.child_process import run_in_own_session
from validator.sources.host.process import ProcessFacts
from validator.sources.host.program import ProgramUnreadable, resolve_program
from validator.sources.run_as import CannotRunAs, RunAs, of_files, of_process
from validator.trusted_files import (
    UnsafeLocation,
    look_unplanted,
    realpath,
    walk_unplanted,
)

# Run inside the server's interpreter, with the server's own flags, environment and working directory.
# find_spec on a top-level name executes nothing of the package; the probe reports whether torch/sglang
# ended up imported so tests can hold that line. An argument names a console script's directory: Python
# puts that first on sys.path for a script (unless -P/-I), where ``-c`` would put the working directory.
_PROBE = (
    "import importlib.util, json, sys\n"
    "if len(sys.argv) > 1 and sys.path and sys.path[0] == '' and not getattr(sys.flags, 'safe_path', 0):\n"
    "    sys.path[0] = sys.argv[1]\n"
    "s = importlib.util.find_spec('sglang')\n"
    "print(json.dumps({'locations': list(s.submodule_search_locations or []) if s else None,\n"
    " 'origin': s.origin if s else None,\n"
    " 'site_dirs': [p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))],\n"
    " 'imported': sorted(m for m in ('torch', 'sglang') if m in sys.modules)}))\n"
)


@dataclass
class InterpreterProbe:
    """What the server's interpreter says about itself (also feeds humming's site dirs)."""

    interpreter: str
    sglang_root: Path | None
    site_dirs: list[Path] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    error: str | None = None
    not_run: bool = False  # this process may not run it as its owner: unknown, not a fault of it


def probe_interpreter(
    interpreter: str,
    *,
    timeout: float = 5.0,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
    cwd: Path | None = None,
    script_dir: Path | None = None,
    run_as: RunAs | None = None,
) -> InterpreterProbe:
    """Ask ``interpreter`` where sglang is, in a subprocess bounded by ``timeout`` (whole process group), with
    the server's interpreter ``options`` and ``cwd`` (a fresh empty directory when unknown, never ours). When
    this process cannot become ``run_as`` nothing runs and the answer says why."""
    argv = [interpreter, *options, "-c", _PROBE, *([str(script_dir)] if script_dir else [])]
    other = run_as is not None and not run_as.is_me()
    with tempfile.TemporaryDirectory(prefix="spark-validate-probe-") as empty, contextlib.ExitStack() as held:
        if cwd is None and run_as is not None and other and os.geteuid() == 0:
            os.chown(empty, run_as.uid, run_as.gid)  # the empty directory is the child's to enter
        cwd = cwd or Path(empty)
        enter: Path | str = cwd
        try:
            if other and str(cwd) != "/":  # the child enters it before it drops privileges: walked here as
                # the launch's namers could, and entered through the descriptor, never by name as root
                enter = f"/proc/self/fd/{held.enter_context(_directory(cwd))}"
            done = run_in_own_session(argv, timeout=timeout, cwd=enter, env=env, run_as=run_as)
        except UnsafeLocation:
            why = f"its working directory {cwd} is not a place the launch's owner could look"
            return InterpreterProbe(
                interpreter, None, error=f"{interpreter} was not run: {why}", not_run=True
            )
        except CannotRunAs as exc:
            return InterpreterProbe(
                interpreter, None, error=f"{interpreter} was not run: {exc}", not_run=True
            )
        except OSError as exc:
            where = f" in {cwd}" if exc.filename in (str(cwd), enter) or not _is_dir(cwd) else ""
            who = f" as {run_as.name}" if run_as is not None and not run_as.is_me() else ""
            return InterpreterProbe(
                interpreter, None, error=f"cannot run {interpreter}{where}{who}: {exc.strerror or exc}"
            )
    if done is None:
        return InterpreterProbe(interpreter, None, error=f"{interpreter} did not answer within {timeout:g} s")
    returncode, out, err = done
    if returncode != 0:
        last = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return InterpreterProbe(interpreter, None, error=f"{interpreter} exited {returncode}: {last}")
    try:
        doc = json.loads(out.decode(errors="replace").strip().splitlines()[-1])
        locations = doc["locations"]
        site_dirs = [Path(p) for p in doc["site_dirs"]]
        imported = list(doc["imported"])
    except (ValueError, IndexError, KeyError, TypeError):
        return InterpreterProbe(interpreter, None, error=f"{interpreter} gave an unreadable answer")
    root = Path(locations[0]) if locations else None
    return InterpreterProbe(interpreter, root, site_dirs=site_dirs, imported=imported)


@contextlib.contextmanager
def _directory(path: Path) -> Iterator[int]:
    """A descriptor on the directory at ``path``, walked as :func:`walk_unplanted` walks (in a launch's
    namers' scope, judged as them) and one they could enter; raises ``OSError`` as ``chdir`` would."""
    dfd, name, planters = walk_unplanted(str(path))
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        if why := planters.refusal(str(path), os.fstat(fd), os.X_OK, "enter it", fd):
            raise UnsafeLocation(why)
        yield fd
    finally:
        os.close(fd)


def _is_dir(path: Path) -> bool:
    """Whether a directory is at ``path``, walked as :func:`walk_unplanted` walks, never looked at by name:
    where the launch's owners could not look it is taken to be there (the same words whether it is)."""
    try:
        st = look_unplanted(str(path))
    except UnsafeLocation:
        return True
    except OSError:
        return False
    return st is not None and stat.S_ISDIR(st.st_mode)


def inspect_program(
    launch: LaunchFacts,
    *,
    on_server_host: bool,
    process: ProcessFacts | None = None,
    refused: object = None,
) -> tuple[ProgramFacts, InterpreterProbe | None]:
    """``launch.program``'s evidence: resolve the program as exec would, then ask its interpreter, with
    the server's flags, environment and working directory, where ``sglang`` is: as ``process``'s user for
    a discovered server, else as the owner of what it would run (``validator.sources.run_as``).
    ``refused``: a string is why the interpreter may not be asked at all (``source.probed_as_named``)."""

    facts = ProgramFacts(
        written=launch.program,
        path=None,
        problem=None,
        interpreter=launch.interpreter,
        interpreter_options=list(launch.interpreter_options),
        working_directory=launch.working_directory,
        working_directory_known=launch.working_directory is not None,
        on_server_host=on_server_host,
    )
    if launch.program is None:
        facts.problem = (
            "only the server's arguments are known (an args-only file): the program that will run them is not"
        )
        return facts, None
    # a working directory known only at run time (a script's computed cd) is never this process's own
    cwd_unknown = launch.unresolved.get("working_directory") if launch.working_directory is None else None
    facts.path, facts.problem = resolve_program(
        launch.program, launch.env, launch.working_directory, cwd_unknown
    )
    if facts.problem is not None or facts.path is None:
        facts.not_provable = isinstance(facts.problem, ProgramUnreadable)
        return facts, None
    script_dir: Path | None = None
    interpreter: Path | None = facts.path
    if launch.entry != "launch_server":  # a console script: its #! python runs it, from its directory
        if launch.interpreter is None:
            facts.problem = f"cannot tell which python runs {facts.path} (no #! line, no python beside it)"
            return facts, None
        interpreter, problem = resolve_program(
            launch.interpreter, launch.env, launch.working_directory, cwd_unknown
        )
        if problem is not None or interpreter is None:
            facts.problem = f"{facts.path} runs {launch.interpreter}, which {problem or 'is not found'}"
            facts.not_provable = isinstance(problem, ProgramUnreadable)
            return facts, None
        try:  # resolved as the launch's owners could resolve it: as given where they could not
            script_dir = realpath(facts.path).parent
        except OSError:
            script_dir = facts.path.parent
    facts.interpreter = str(interpreter)
    who = (
        of_process(process)
        if process is not None
        else of_files(
            [facts.path, interpreter, launch.working_directory],
            launch.env,
            launch.working_directory,
            launch.named_by,
        )
    )
    if not isinstance(who, str) and isinstance(refused, str):
        who = refused
    if isinstance(who, str):
        facts.probe_error = f"{interpreter} was not run: {who}"
        facts.not_provable = True
        return facts, InterpreterProbe(str(interpreter), None, error=facts.probe_error)
    probe = probe_interpreter(
        str(interpreter),
        env=launch.env,
        options=launch.interpreter_options,
        cwd=launch.working_directory,
        script_dir=script_dir,
        run_as=who,
    )
    facts.probe_error = probe.error
    facts.not_provable = probe.not_run
    facts.sglang_root = probe.sglang_root
    return facts, probe
