"""A program as ``execvp`` finds it on this host, with the server's ``PATH``: what a launch runs, and the
interpreter its ``#!`` line names (the SGLang install is then read through it).

A path this user may not look at is said so (:class:`ProgramUnreadable`): the program's state is then
unknown here, never a traceback and never a fault of the program."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from validator.trusted_files import UnsafeLocation, look_unplanted


class ProgramUnreadable(str):
    """The reason :func:`resolve_program` gives when this user may not look at the path: the program's
    state is unknown here, not a fault of the program."""


def _unreadable(exc: OSError, path: Path) -> str:
    # a walk's refusal (a directory this user, or the launch's owner, may not search) is a denial too
    denied = isinstance(exc, (PermissionError, UnsafeLocation))
    why = "permission denied" if denied else (exc.strerror or type(exc).__name__)
    return ProgramUnreadable(
        f"cannot be looked at by this user ({path}: {why}): run as root or as the server's user"
    )


def resolve_program(
    program: str, env: Mapping[str, str], cwd: Path | None = None, cwd_unknown: str | None = None
) -> tuple[Path | None, str | None]:
    """``program`` as ``execvp`` finds it with the server's ``PATH`` (a name with a ``/`` is taken as a
    path, relative to ``cwd``): (path, None), or (None, why it cannot run). A path this user may not look
    at (a directory above it is 0700) is said so, never a traceback: the reason is then a
    :class:`ProgramUnreadable`. ``cwd_unknown``: why the working directory is known only at run time
    (``cwd`` is then None): a lookup that reaches it is unknown, never this process's own directory's."""
    if "/" in program:
        full = program if program.startswith("/") else os.path.join(str(cwd or Path.cwd()), program)
        if re.match(r"/(?:proc|dev/fd)(?:/|$)", os.path.normpath(full)):
            # /proc/self is the process that reads the name (the server itself, as exec runs it): not ours
            return None, ProgramUnreadable(f"is a process's file ({program}), known only at run time")
        if not program.startswith("/") and cwd is None and cwd_unknown is not None:
            return None, ProgramUnreadable(
                f"is relative to the working directory, known only at run time ({cwd_unknown})"
            )
        path = Path(program) if Path(program).is_absolute() else (cwd or Path.cwd()) / program
        try:  # both looks walked: a link swapped in between is a refusal of the second, never a traceback
            st = look_unplanted(str(path))
            runnable = st is not None and look_unplanted(str(path), os.X_OK) is not None
        except OSError as exc:
            return None, _unreadable(exc, path)
        if st is None:
            return None, f"does not exist ({path})"
        if stat.S_ISDIR(st.st_mode):
            return None, f"is a directory ({path})"
        if not runnable:
            return None, f"is not executable ({path})"
        return path, None
    try:
        found = which(program, env, cwd, cwd_unknown)
    except PathUnreadable as exc:
        if exc.at_run_time is not None:
            return None, ProgramUnreadable(exc.at_run_time)
        return None, _unreadable(exc.error, exc.path)
    if found is None:
        return None, f"is not found on the server's PATH ({env.get('PATH', os.defpath)})"
    return found, None


class PathUnreadable(Exception):
    """A directory on ``PATH`` that this user may not look into: whether ``program`` is there is unknown."""

    def __init__(self, path: Path, error: OSError, at_run_time: str | None = None) -> None:
        super().__init__(str(path))
        self.path, self.error, self.at_run_time = path, error, at_run_time


def which(
    name: str, env: Mapping[str, str], cwd: Path | None = None, cwd_unknown: str | None = None
) -> Path | None:
    """``name`` on ``env``'s PATH as ``execvp`` finds it (a directory it may not search is passed over, as
    execvp does; an empty or relative entry is the working directory, ``cwd``, or one below it); raises
    ``PathUnreadable`` when it is found nowhere and a PATH directory this user could not look into might
    hold it, or (``at_run_time`` set) when the search reaches such an entry before it is found and the
    working directory is known only at run time (``cwd_unknown``: why)."""
    hidden: PathUnreadable | None = None
    if len(env.get("PATH", "")) >= 131_072:  # Linux's MAX_ARG_STRLEN: execve refuses it (E2BIG)
        raise PathUnreadable(
            Path("."), OSError(), at_run_time="cannot run: its PATH is over 128 KiB (execve: E2BIG)"
        )
    seen: set[str] = set()
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        if folder in seen:  # the same entry again answers the same (a PATH of 100,000 ':' took minutes)
            continue
        seen.add(folder)
        if not folder.startswith("/") and cwd is None and cwd_unknown is not None:
            entry = repr(folder) if folder else "empty"
            why = (
                f"is looked for in the working directory (its PATH entry {entry} comes before any that "
                f"holds it), known only at run time ({cwd_unknown})"
            )
            raise PathUnreadable(Path(folder or "."), OSError(), at_run_time=why)
        candidate = Path(folder) / name if folder.startswith("/") else (cwd or Path.cwd()) / folder / name
        try:
            found = look_unplanted(str(candidate), os.X_OK)
        except (UnsafeLocation, PermissionError) as exc:
            hidden = hidden or PathUnreadable(candidate, exc)
            continue
        except OSError:
            continue  # a name over the kernel's limits: not there
        if found is not None and stat.S_ISREG(found.st_mode):
            return candidate
    if hidden is not None:
        raise hidden
    return None
