"""A launcher script read statically: every path through it, each walked by a fresh ``Evaluator``.

The entry point of the shell reader (``read_script``): it refuses what is not a bash or POSIX sh script
(another interpreter, ``#!`` options not modelled), parses the file once, and walks each path
(``paths.explore``) with the script's environment and arguments, up to ``MAX_PATHS`` paths.
``launch_script`` turns the endings into launch facts.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from validator.bounded_files import look, read_bounded_stat
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.host.program import PathUnreadable, which
from validator.sources.launch.shell.command_line import shebang_line
from validator.sources.launch.shell.evaluator import Evaluator
from validator.sources.launch.shell.machine import Machine, others_could_write
from validator.sources.launch.shell.paths import Forks, explore
from validator.sources.launch.shell.state import MAX_PATHS, Ending, Memo, Reading
from validator.sources.launch.shell.syntax import (
    MAX_SCRIPT_BYTES,
    interpreter,
    interpreter_options,
    parse,
)
from validator.sources.launch.shell.values import Value, work_budget
from validator.trusted_files import realpath


def read_script(
    path: Path | str,
    *,
    env: Mapping[str, str],
    args: list[str] | None = None,
    text: str | None = None,
    inside: str | None = None,
    cwd: Value | None = None,
    command_string: tuple[str, set[str], str] | None = None,
    writers: tuple[int, ...] = (),
    unknown: Mapping[str, str] | None = None,
    own_env: Collection[str] = (),
    own_env_by: tuple[int, ...] = (),
) -> Reading:
    """Every path through the script at ``path`` started with ``env`` and ``args``. ``text``: its text, known
    without reading ``path`` (a file the launcher wrote); ``inside``: it runs where this host cannot see;
    ``cwd``: the directory it is started in, else its own (``Evaluator.run``); ``command_string``: ``text``
    is the string of ``SHELL -c`` (the shell, the options its command line switches on, and its ``$0``),
    whose first line is no ``#!`` line, and ``path`` names it in messages; ``writers``: who wrote ``text``
    (another user's unit holding the string), as a file's owner is its writer; ``unknown``: variables in
    its environment whose values only the runtime gives (name -> why: a Kubernetes ``valueFrom``, a
    ``docker run -e NAME=$(...)``); ``own_env``: the variables of ``env`` its writers set (a unit's
    Environment=), the rest being the reader's environment; ``own_env_by``: who wrote those (the users who
    named the unit: none for root's). InputError for a file that is not a script (unreadable, oversized,
    syntax)."""
    script = Path(path) if command_string is not None else Path(path).absolute()
    # whoever owns the script can make it do anything: files of theirs it sources add no new writer (a
    # script known by its text alone, an entrypoint the launcher wrote, has no owner of its own)
    owner: tuple[int, ...] = writers
    if text is None:
        data, st = read_bounded_stat(script, MAX_SCRIPT_BYTES, "launcher script", names=True)
        owner = (st.st_uid,)
        if st.st_uid not in own_env_by:  # what root's unit sets (MYSQL_PWD) is not its script's writer's
            own_env = ()
    else:
        data = text.encode("utf-8", "surrogateescape")
        if len(data) > MAX_SCRIPT_BYTES:  # a -c string from a manifest is only as bounded as its file
            raise InputError(str(script), f"over {MAX_SCRIPT_BYTES} bytes: not a launcher script")
    shell, options, zero = command_string or (interpreter(data), interpreter_options(data), None)
    if shell not in ("bash", "sh"):
        raise UnresolvedLaunch(
            f"{script}:1: the script runs under {shell}; the reader models bash and POSIX sh"
        )
    if options is None:
        raise UnresolvedLaunch(f"{script}:1: the #! line's options are not modelled")
    if text is None:
        _runs_a_shell(data, script, env, shell)
    tree = parse(data, str(script), "sh" if shell == "sh" else "bash")
    endings: list[Ending] = []
    notes: list[str] = []
    scripts: list[str] = []
    memo = Memo()

    def walk(forks: Forks) -> None:
        m = Machine(script, forks, posix=shell == "sh", opts=options, owner=owner, memo=memo, zero=zero)
        ending = Evaluator(m).run(
            tree, env, list(args or []), inside=inside, cwd=cwd, unknown=unknown, own=own_env
        )
        if ending.launch is not None and m.missing_source:
            ending.reason = "; ".join(m.missing_source)
        ending.survived = m.survived
        endings.append(ending)
        for note in m.notes:
            if note not in notes:
                notes.append(note)
        scripts.extend(s for s in m.scripts_run if s not in scripts)

    with work_budget():
        explored = explore(walk, MAX_PATHS)
    if not explored:
        endings.append(
            Ending("unresolved", 1, str(script), f"more than {MAX_PATHS} paths through the script")
        )
    return Reading(script, endings, notes, scripts)


# what the file a #! line names (after its links) may be called, to be the program the reader models
_PROGRAMS = {
    "bash": {"bash"},
    "sh": {"sh", "dash", "bash", "busybox"},
    "env": {"env", "coreutils", "busybox"},
}


def _runs_a_shell(data: bytes, script: Path, env: Mapping[str, str], shell: str) -> None:
    """The ``#!`` line names bash or sh by name only: the program at that path (``env``'s, on the script's
    PATH) is what the kernel runs, and a file named ``bash`` in its writer's directory, or a link so named
    to python, runs what it likes. UnresolvedLaunch unless each program is, after its links, a regular
    file of root's (or this user's) that nobody else can write, so named."""
    words = (shebang_line(data) or "").split()
    if not words:
        return  # no #! line: bash runs it itself (``--script``'s assumption)
    programs = [(words[0], "env" if Path(words[0]).name == "env" else shell)]
    if programs[0][1] == "env":
        rest = words[2:] if words[1:2] == ["-S"] else words[1:]
        try:
            found = which(rest[0], env) if rest else None
        except PathUnreadable as exc:
            raise UnresolvedLaunch(f"{script}:1: the #! line's {rest[0]} on PATH: {exc}") from None
        if found is None:
            raise UnresolvedLaunch(f"{script}:1: the #! line's {rest[0]} is on no directory of PATH")
        programs.append((str(found), shell))
    for program, kind in programs:
        why = _not_the_program(program, kind)
        if why is not None:
            raise UnresolvedLaunch(
                f"{script}:1: the #! line runs {program}, {why}: not known to be the {kind} the reader models"
            )


def _not_the_program(program: str, kind: str) -> str | None:
    """Why the file at ``program`` is not known to be ``kind`` (None when it is): looked up walked, as
    the launch's namers could (:func:`bounded_files.look`), its links followed by hand."""

    try:
        real = realpath(program)
        st = look(real, "the #! line's program")
    except (OSError, InputError) as exc:
        return f"which cannot be looked at ({exc})"
    if st is None or not stat.S_ISREG(st.st_mode):
        return "which is no regular file"
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022:
        return f"a file UID {st.st_uid} owns" if st.st_uid not in (0, os.geteuid()) else "writable by others"
    if real.name not in _PROGRAMS[kind]:
        return f"which is {real}"
    if problems := others_could_write(str(real)):  # a directory on its way others could write
        return problems[0]
    return None
