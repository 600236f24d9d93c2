"""Who a program the validator runs for evidence runs as: never with more privilege than whoever controls it.

Asking the server's interpreter which ``sglang`` it imports runs code (program, ``#!`` interpreter,
``sitecustomize``, ``.pth``, ``LD_PRELOAD``), so (SECURITY.md, "Processes the tool runs"):
:func:`of_process`: a discovered server runs as its own real UID, GID and groups, and only in this mount
namespace. :func:`of_files`: for a declared launch, every file it would execute or import from (program,
interpreter, cwd, ``PYTHON*``, ``LD_*``, user site, site-packages) and each directory above: root's or the
reader's runs as the reader, one other user's as that user, several others' or a non-sticky shared
directory not at all. Dropping privileges needs root; otherwise nothing runs (:class:`CannotRunAs`).
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from validator.bounded_files import glob_walked
from validator.errors import InputError
from validator.sources.host.process import ProcessFacts, user_name
from validator.trusted_files import (
    hidden_from_namers,
    in_namers_scope,
    look_unplanted,
    realpath,
)

# Variables naming where a python (or the dynamic loader) finds code to run: lists of paths...
_PATH_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")
# ... and one path each: ``HOME`` places the user site directory (``~/.local/lib/pythonX.Y/site-packages``,
# whose ``.pth`` files run at start-up when ``PYTHONUSERBASE`` is unset), ``PYTHONPYCACHEPREFIX`` the
# bytecode read in place of every module's own (the standard library's included).
_PATH_VALUES = ("HOME", "PYTHONPYCACHEPREFIX")
MAX_PATHS = 256  # paths looked at for one program: more is not a launch command's environment
MAX_DEPTH = 64  # components per path


@dataclass(frozen=True)
class RunAs:
    """A user, group and supplementary groups to run a child as, and why it is them (for messages)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    why: str = ""

    @property
    def name(self) -> str:
        return user_name(self.uid) or f"UID {self.uid}"

    def is_me(self) -> bool:
        return self.uid == os.geteuid() and self.uid == os.getuid()


class CannotRunAs(OSError):
    """The child would have to run as another user, and this process cannot become it (not root)."""


def popen_identity(run_as: RunAs | None) -> dict[str, object]:
    """``subprocess.Popen`` keywords that make the child ``run_as`` (none: this process's own user).
    Raises :class:`CannotRunAs` when that needs privileges this process does not have."""
    if run_as is None or run_as.is_me():
        return {}
    if os.geteuid() != 0:
        raise CannotRunAs(
            f"it must run as {run_as.name} ({run_as.why}); spark-validate runs as UID {os.geteuid()} and "
            f"cannot act as another user: run it as root or as {run_as.name}"
        )
    return {"user": run_as.uid, "group": run_as.gid, "extra_groups": list(run_as.groups)}


def _own_mount_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/mnt")
    except OSError:
        return None


def of_process(facts: ProcessFacts) -> RunAs | str:
    """The real UID, GID and supplementary groups of a discovered process, or why nothing of it may run
    here: its user unknown, or it lives in another mount namespace (a container). There its program, its
    ``PYTHONPATH`` and its working directory name other files than here, and what they would name here
    (``/proc/PID/root/...`` included) is the container's to choose: it is never run, whoever owns it."""
    if len(facts.uids) != 4 or len(facts.gids) != 4:
        return f"the user of process {facts.pid} could not be read from /proc/{facts.pid}/status"
    who = RunAs(facts.uids[0], facts.gids[0], facts.groups, why=f"the user of process {facts.pid}")
    if facts.mnt_ns is None and not who.is_me() and os.geteuid() != 0:
        return who  # another user's, unreadable to this one: popen_identity refuses it, saying so
    own = _own_mount_namespace()
    if facts.mnt_ns is None or own is None:
        return (
            f"process {facts.pid}: its mount namespace could not be read: its program is not known to be "
            "this host's file"
        )
    if facts.mnt_ns != own:
        return (
            f"process {facts.pid} runs in another mount namespace (a container): its program is not this "
            "host's file to run"
        )
    return who


def _user(uid: int, fallback_gid: int) -> RunAs:
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return RunAs(uid, fallback_gid, (), why=f"the owner (UID {uid}) of a file it runs")
    try:
        groups = tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        groups = ()
    return RunAs(uid, pw.pw_gid, groups, why=f"the owner ({pw.pw_name}) of a file it runs")


def _lstat(path: Path) -> os.stat_result | None:
    """``os.lstat``; where another user named the launch, walked as they could look (a second look by name
    would follow whatever link they swapped in on the way since, into a directory they cannot enter)."""
    try:
        if in_namers_scope():
            return look_unplanted(str(path), follow_last=False)
        return os.lstat(path)
    except (OSError, ValueError):
        return None  # absent or unreadable (or not theirs to look at): nothing there runs


def _glob(prefix: Path, pattern: str) -> list[Path]:
    """``sorted(prefix.glob(pattern))``; where another user named the launch, each directory listed and
    each name looked at as they could (``glob_walked``), never by name as this process."""
    if not in_namers_scope():
        return sorted(prefix.glob(pattern))
    try:
        return [Path(p) for p in glob_walked(str(prefix / pattern), "the interpreter's prefix")]
    except InputError:
        return []


def _chain(path: Path) -> Iterable[tuple[Path, os.stat_result]]:
    """``path`` and each directory above it (as written, and as resolved), with their ``lstat``."""
    seen: set[Path] = set()
    try:
        resolved = realpath(path)
    except (OSError, ValueError):
        resolved = path
    for current in (path, resolved):
        for _ in range(MAX_DEPTH):
            if current not in seen:
                seen.add(current)
                st = _lstat(current)
                if st is not None:
                    yield current, st
            if current.parent == current:
                break
            current = current.parent


_SITE_PATTERNS = (
    "lib/python3*/site-packages",
    "lib64/python3*/site-packages",
    "lib/python3*/dist-packages",
    "local/lib/python3*/dist-packages",
)
MAX_SITE_DIRS = 16  # per pattern and prefix


def _site_dirs(program: Path) -> list[Path]:
    """The site directories a python at ``program`` reads at start-up, whose ``.pth`` files run code: the
    ``site-packages`` (Debian: ``dist-packages``) under its prefix, as written (a virtual environment's)
    and resolved (the base interpreter's). Not a python: none."""
    try:
        if not program.name.startswith("python"):
            return []
        resolved = realpath(program)
    except (OSError, ValueError):
        return []
    found: list[Path] = []
    for exe in dict.fromkeys((program, resolved)):
        prefix = exe.parent.parent
        for pattern in _SITE_PATTERNS:
            try:
                found.extend(_glob(prefix, pattern)[:MAX_SITE_DIRS])
            except (OSError, ValueError):
                continue
    return found


def _writable_by_others(st: os.stat_result) -> bool:
    """A directory where someone other than its owner and root can put or replace entries: writable by
    anyone, or by a group other than root's, without the sticky bit."""
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & stat.S_ISVTX:
        return False
    return bool(st.st_mode & stat.S_IWOTH) or bool(st.st_mode & stat.S_IWGRP and st.st_gid != 0)


def of_files(
    paths: Iterable[Path | str | None],
    env: Mapping[str, str],
    cwd: Path | None = None,
    named_by: Iterable[int] = (),
) -> RunAs | str | None:
    """Who may run a program that executes or imports from ``paths`` and ``env``'s path variables (a
    relative entry is taken from ``cwd``): None (this process's user: every file is root's or its own), a
    :class:`RunAs` (the one other user who owns some of them), or why nobody may (several other owners, a
    directory others can write). ``named_by``: the other users whose files chose the program, its flags,
    environment and working directory (``LaunchFacts.named_by``) own it as much as its files' owners do:
    their ``PYTHONPLATLIBDIR``, ``-X pycache_prefix`` or ``PYTHONPATH`` into a directory they cannot read
    never runs, or looks, with more privilege than theirs."""
    me = os.geteuid()
    owners: dict[int, tuple[Path, int]] = {}
    for uid in named_by:
        if uid in (0, me):
            continue
        try:
            owners.setdefault(uid, (Path(f"<the launch input of UID {uid}>"), pwd.getpwuid(uid).pw_gid))
        except KeyError:
            return f"UID {uid}, whose file named what it runs, has no passwd entry: its groups are not known"
    base = cwd or Path("/")
    wanted: list[Path] = [Path(p) for p in paths if p]
    wanted.extend(d for p in list(wanted) for d in _site_dirs(p if p.is_absolute() else base / p))
    for name in _PATH_VARIABLES:
        for item in env.get(name, "").replace(" ", ":").split(":"):
            if item:
                wanted.append(Path(item))
    wanted.extend(Path(env[name]) for name in _PATH_VALUES if env.get(name))
    for path in wanted[:MAX_PATHS]:
        full = path if path.is_absolute() else base / path
        if hidden_from_namers(str(full)):  # not looked at as root: what is there is not the namers' to know
            continue  # (a child run as them cannot reach it either)
        for where, st in _chain(full):
            if st.st_uid not in (0, me):
                owners.setdefault(st.st_uid, (where, st.st_gid))
            if _writable_by_others(st):
                mode = stat.S_IMODE(st.st_mode)
                return (
                    f"{where} is writable by others (mode {mode:04o}, group {st.st_gid}): they could plant "
                    "what it runs"
                )
    if not owners:
        return None
    if len(owners) > 1:
        shown = ", ".join(f"{where} (UID {uid})" for uid, (where, _) in sorted(owners.items()))
        return f"the files it runs belong to several other users: {shown}"
    ((uid, (_where, gid)),) = owners.items()
    return _user(uid, gid)
