"""systemd service unit reader: the server command and environment that systemd would start.

Follows ``systemd.service(5)``/``systemd.exec(5)``: the last ``ExecStart=`` after any reset, its prefixes,
``Environment=`` overridden by ``EnvironmentFile=`` (optional ``-``, globs), ``UnsetEnvironment=`` applied
last, drop-ins in ``<unit>.d/``.
What systemd warns about and skips raises ``InputError(path, reason, line)``. The text grammar is
:mod:`validator.sources.launch.unit_syntax`.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validator.bounded_files import TEXT_CAP, FileAbsent, glob_walked, read_bounded
from validator.errors import InputError, UnresolvedLaunch
from validator.redact import is_secret_key, may_be_secret
from validator.sources.launch.command import SHELLS, Launcher, ProgramReader, launch_from_argv, unwrap_launch
from validator.sources.launch.env_file import others_could_create, read_env_file
from validator.sources.launch.unit_syntax import (
    ENV_NAME,
    Assignment,
    expand_env,
    expanded_names,
    parse_unit_text,
    specifiers,
    split_words,
    user_unit,
)
from validator.trusted_files import UnsafeLocation, look_unplanted, namers, open_unplanted, running_as


@dataclass
class ServiceUnit:
    """The [Service] facts preflight needs, with systemd's expansion applied."""

    path: Path
    exec_start: list[str]  # the server command (inside ``spark-validate launch ... --`` when wrapped)
    exec_start_pre: list[list[str]]
    env: dict[str, str]
    env_origin: dict[str, str]
    working_directory: Path | None = None
    user: str | None = None
    wrapped_by_launch: bool = False  # ExecStart was ``spark-validate launch [opts] -- CMD``
    launch_options: list[str] = field(default_factory=list)  # the [opts] of that wrapper
    # what bounds the start job (validator.sources.launch.start_budget): raw values, last assignment wins
    timing: dict[str, str] = field(default_factory=dict)  # Type, TimeoutStartSec, TimeoutSec, ExecStartPost
    view: list[str] = field(default_factory=list)  # the set _VIEW_KEYS, each as ``Key=value``


EnvFiles = Sequence[tuple[Path, Mapping[str, str]]]  # --env-file paths, in order, with what each holds


def _read_text(path: Path) -> str:
    data = read_bounded(path, TEXT_CAP, "unit file", names=True)  # regular files only, size-capped
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(str(path), "invalid UTF-8", data.count(b"\n", 0, exc.start) + 1) from None


def _dropins(dropin: Path) -> list[Path]:
    """The ``*.conf`` files of a unit's drop-in directory, listed through a descriptor opened as the unit's
    owner could (``open_unplanted``): a link to a directory they could not list is refused, the same words
    whether it is there, never listed as root."""
    try:
        fd = open_unplanted(str(dropin), os.O_RDONLY | os.O_DIRECTORY)
    except UnsafeLocation as exc:
        raise InputError(str(dropin), f"cannot read the drop-in directory: {exc}") from None
    except OSError:  # none there, or not a directory: no drop-ins, as for systemd
        return []
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    return [dropin / n for n in sorted(names) if n.endswith(".conf") and not n.startswith(".")]


def _merged_service(path: Path) -> list[tuple[str, Assignment]]:
    """The [Service] assignments of the unit and its drop-ins, in the order systemd applies them."""
    texts = {path: _read_text(path)}  # first: its owner names the drop-in directory (``named_by``)
    files = [path, *_dropins(path.with_name(path.name + ".d"))]
    items: list[tuple[str, Assignment]] = []
    found_service = False
    for f in files:
        text = texts[f] if f in texts else _read_text(f)
        if "\x00" in text:
            raise InputError(str(f), "NUL byte in unit file", text.count("\n", 0, text.index("\x00")) + 1)
        sections = parse_unit_text(text, str(f))
        service = sections.get("Service")
        if service is None:
            continue
        found_service = True
        for key, values in service.items():
            items.extend((key, v) for v in values)
    if not found_service:
        raise InputError(str(path), "no [Service] section")
    items.sort(key=lambda kv: (files.index(Path(kv[1].file)), kv[1].line))
    return items


def _exec_words(a: Assignment, unit: Path, env: dict[str, str], hidden: Collection[str] = ()) -> list[str]:
    """One ExecStart=/ExecStartPre= value -> argv, after prefixes, specifiers and $VAR expansion; a variable
    in ``hidden`` expanded leaves it unresolved."""
    where = a.file
    text = specifiers(a.value, unit, env, where, a.line)
    words = split_words(text, where=where, line=a.line)
    if not words:
        return []
    first = words[0]
    prefixes = ""
    while first and first[0] in "-@:+!":
        prefixes += first[0]
        first = first[1:]
    if not first:
        raise InputError(where, "ExecStart= names no program after its prefixes", a.line)
    words[0] = first
    if "/" in first and not first.startswith("/"):
        # systemd.service(5): an absolute path or a file name without any slash (looked up in its fixed
        # path); 'bin/start.sh' is neither, and systemd ignores the line (the service does not start)
        raise InputError(
            where, f"ExecStart= program {first[:200]!r} is neither an absolute path nor a name", a.line
        )
    if "@" in prefixes:
        if len(words) < 2:
            raise InputError(where, "'@' prefix needs the program and its argv[0]", a.line)
        if Path(words[0]).name in SHELLS and words[1] != words[0]:
            # bash started as "-bash" is a login shell (it reads the profile files), as "sh" in POSIX mode;
            # dash alike as "-sh"; and a -c string's $0 is argv[0]: not modelled
            raise UnresolvedLaunch(
                f"{where}:{a.line}: the shell {words[0]} is started with argv[0] {words[1]!r} ('@'): "
                "not modelled"
            )
        words = [words[0], *words[2:]]  # the program runs with a custom argv[0]; keep the real path
    if ":" in prefixes:
        return words
    if names := sorted(expanded_names(words) & set(hidden)):
        what = (
            "a credential"
            if is_secret_key(names[0], env[names[0]])
            else "a variable (it may hold a credential)"
        )
        raise UnresolvedLaunch(
            f"{where}:{a.line}: ExecStart= expands ${names[0]}, {what} of the reader's environment, unknown "
            "to another user's unit"
        )
    return expand_env(words, env, where, a.line)


def readers(origin: str) -> bool:
    """Whether a variable of the unit's environment with this ``env_origin`` is the reader's own: this
    process's environment, or an operator's ``--env-file`` standing in for EnvironmentFile=."""
    return origin == "environment" or origin.startswith("--env-file ")


def _missing_directory(path: Path) -> bool:
    """``WorkingDirectory=-PATH``: no directory at ``path`` (a walked look, as another user's unit names it);
    False where the walk refuses to say, so the directory stays the unit's word."""
    try:
        st = look_unplanted(str(path))
    except OSError:  # UnsafeLocation included: not ours to tell
        return False
    return st is None or not stat.S_ISDIR(st.st_mode)


def _uid_text(user: str) -> bool:
    """``User=`` is a numeric UID: ASCII digits (``str.isdigit`` also takes "²", which ``int`` refuses), as
    many as a 32-bit UID has at most (Python refuses to convert over 4,300); anything else is a name."""
    return user.isascii() and user.isdigit() and len(user) <= 10


def _service_uids(items: list[tuple[str, Assignment]]) -> set[int]:
    """The UID of the unit's ``User=`` where this host knows it: besides root and the reading user, the one
    who may write the unit's EnvironmentFile= (its own server's environment)."""
    user = next((a.value.strip() for key, a in reversed(items) if key == "User" and a.value.strip()), "")
    if not user:
        return set()
    if _uid_text(user):
        return {int(user)}
    try:
        return {pwd.getpwnam(user).pw_uid}
    except KeyError:
        return set()


def _environment(
    items: list[tuple[str, Assignment]],
    unit: Path,
    base_env: dict[str, str],
    env_files: EnvFiles | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    env = dict(base_env)
    origin = dict.fromkeys(base_env, "environment")
    unset = [w for w, _ in _words(items, "UnsetEnvironment", unit, base_env, _unset_entry)]
    for word, a in _words(items, "Environment", unit, base_env, _assignment):
        name, _, value = word.partition("=")
        env[name], origin[name] = value, f"{a.file}:{a.line} Environment="
    trusted = _service_uids(items)
    files: list[tuple[str, Assignment]] = []
    for key, a in items:
        if key == "EnvironmentFile":
            if not a.value:
                files.clear()
            else:
                files.append((a.value, a))
    if env_files is not None:  # --env-file stands in for EnvironmentFile= (a unit not yet installed)
        named = ", ".join(v for v, _ in files) or "none"
        for path, values in env_files:
            for name, val in values.items():
                env[name], origin[name] = val, f"--env-file {path} (for the unit's EnvironmentFile={named})"
        return _without(unset, env, origin)
    for value, a in files:
        optional = value.startswith("-")
        pattern = specifiers(value[1:] if optional else value, unit, base_env, a.file, a.line)
        if not os.path.isabs(pattern):
            raise InputError(a.file, f"EnvironmentFile= path {pattern!r} is not absolute", a.line)
        # never stat'ed or listed before the directory is judged: following a link another user planted
        # would tell them what a directory they cannot list holds
        matches = _listed(pattern, trusted, a, optional) if glob.has_magic(pattern) else [pattern]
        try:
            if not matches:
                raise FileAbsent(pattern, "no file matches")
            read = [(m, read_env_file(m, trusted_uids=trusted)) for m in matches]
        except FileAbsent:
            if not optional:
                raise InputError(
                    a.file, f"EnvironmentFile= {pattern} does not exist (prefix '-' to allow)", a.line
                ) from None
            _absent_but_safe(pattern, trusted, a)
            continue
        for m, values in read:
            for name, val in values.items():
                env[name], origin[name] = val, f"EnvironmentFile={m}"
    return _without(unset, env, origin)


def _words(
    items: list[tuple[str, Assignment]],
    key: str,
    unit: Path,
    base_env: dict[str, str],
    check: Callable[[str, Assignment], None],
) -> list[tuple[str, Assignment]]:
    """The words of every ``key=`` assignment in order, specifiers resolved, each ``check``ed as it is read;
    an empty assignment resets the list (``Environment=``, ``UnsetEnvironment=``: systemd.exec(5))."""
    words: list[tuple[str, Assignment]] = []
    for k, a in items:
        if k != key:
            continue
        if not a.value:
            words.clear()
            continue
        for word in split_words(
            specifiers(a.value, unit, base_env, a.file, a.line), where=a.file, line=a.line
        ):
            check(word, a)
            words.append((word, a))
    return words


def _assignment(word: str, a: Assignment) -> None:
    """An ``Environment=`` word is ``NAME=VALUE``; an error never quotes the value: it may be a secret."""
    name, eq, _ = word.partition("=")
    if not eq or not ENV_NAME.match(name):
        shown = f"{name[:60]!r}=..." if eq else "a word without '='"
        raise InputError(a.file, f"invalid Environment= assignment {shown}", a.line)


def _unset_entry(word: str, a: Assignment) -> None:
    """An ``UnsetEnvironment=`` word is ``NAME`` or ``NAME=VALUE`` (systemd warns of others, ignores them)."""
    name = word.partition("=")[0]
    if not ENV_NAME.match(name):
        raise InputError(a.file, f"invalid UnsetEnvironment= entry {name[:60]!r}", a.line)


def _without(
    unset: list[str], env: dict[str, str], origin: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The environment less ``UnsetEnvironment=``'s entries, applied last, whatever set them: a ``NAME``
    removes the variable, a ``NAME=VALUE`` only that exact assignment (systemd.exec(5))."""
    for word in unset:
        name, eq, value = word.partition("=")
        if name in env and (not eq or env[name] == value):
            del env[name]
            origin.pop(name, None)
    return env, origin


def _wildcard_dir(pattern: str) -> str:
    """The path down to the first component with a wildcard (the one a glob lists)."""
    head = pattern.split("/")
    first = next(i for i, part in enumerate(head) if glob.has_magic(part))
    return "/".join(head[:first]) + "/" + head[first]


def _listed(pattern: str, trusted: set[int], a: Assignment, optional: bool) -> list[str]:
    """A glob's matches, once nobody but root, the reading user and ``User=`` could have put names where it
    lists (the matched files would be refused anyway; listing first would show another user what is
    there, through a link of theirs)."""
    why = others_could_create(_wildcard_dir(pattern), trusted)
    if why is not None and optional:
        raise _optional_refusal(pattern, why, a)  # as for no match there
    if why is not None:
        raise InputError(
            a.file, f"EnvironmentFile={pattern}: {why}: anyone could put a file it matches there", a.line
        )
    return glob_walked(pattern, "EnvironmentFile=")


def _absent_but_safe(pattern: str, trusted: set[int], a: Assignment) -> None:
    """An optional ``EnvironmentFile=-`` that is not there is read as no file only where nobody but root,
    the reading user and the unit's ``User=`` could create it before the server starts (systemd, as root,
    reads whatever is there then). For a glob, the directory its first wildcard is in is judged."""
    why = others_could_create(_wildcard_dir(pattern) if glob.has_magic(pattern) else pattern, trusted)
    if why is not None:
        raise _optional_refusal(pattern, why, a)


def _optional_refusal(pattern: str, why: str, a: Assignment) -> InputError:
    return InputError(
        a.file,
        f"EnvironmentFile=-{pattern} is not there, but {why}: anyone could create it before the server "
        "starts, and systemd would read it",
        a.line,
    )


_TIMING_KEYS = frozenset({"Type", "TimeoutStartSec", "TimeoutSec", "ExecStartPost"})

# systemd.exec(5) settings that change, beyond User=, what the service's processes may read or find: their
# credentials, capabilities, mount namespace, security labels, syscalls, or directories made for them
_VIEW_KEYS = frozenset(
    {
        *("Group", "SupplementaryGroups", "DynamicUser", "PAMName", "PrivateUsers", "SecureBits"),
        *("AmbientCapabilities", "CapabilityBoundingSet", "SystemCallFilter", "RestrictFileSystems"),
        *("SELinuxContext", "AppArmorProfile", "SmackProcessLabel", "RootDirectory", "RootImage"),
        *("MountImages", "ExtensionImages", "ExtensionDirectories", "BindPaths", "BindReadOnlyPaths"),
        *("TemporaryFileSystem", "InaccessiblePaths", "ReadOnlyPaths", "ReadWritePaths", "ExecPaths"),
        *("NoExecPaths", "PrivateTmp", "PrivateDevices", "PrivateMounts", "ProtectHome", "ProtectSystem"),
        *("ProtectProc", "ProcSubset", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs"),
        *("ProtectControlGroups", "ProtectClock", "ProtectHostname", "MountAPIVFS", "JoinsNamespaceOf"),
        *("RuntimeDirectory", "StateDirectory", "CacheDirectory", "LogsDirectory", "ConfigurationDirectory"),
        *("LoadCredential", "LoadCredentialEncrypted", "SetCredential", "SetCredentialEncrypted"),
        "ImportCredential",
    }
)
_OFF = frozenset({"", "no", "false", "off", "0"})  # a boolean's default, or an empty list (a reset)


def load_unit(
    path: Path | str, *, base_env: dict[str, str] | None = None, env_files: EnvFiles | None = None
) -> ServiceUnit:
    """Read a service unit (and its drop-ins) as systemd would start it. ``env_files`` (preflight's
    ``--env-file``, each path with what the caller read from it) stand in for the unit's
    ``EnvironmentFile=`` entries, with their precedence."""
    unit = Path(path)
    items = _merged_service(unit)
    env, origin = _environment(items, unit, dict(base_env or {}), env_files)
    exec_start: Assignment | None = None
    pre: list[Assignment] = []
    workdir: str | None = None
    user: str | None = None
    timing: dict[str, str] = {}
    view: dict[str, str] = {}  # the last assignment of each _VIEW_KEYS key
    starts: list[Assignment] = []
    for key, a in items:
        if key == "ExecStart":
            starts = [*starts, a] if a.value else []
            exec_start = a if a.value else None
        elif key == "ExecStartPre":
            pre = [*pre, a] if a.value else []
        elif key == "WorkingDirectory":
            workdir = a.value or None
        elif key == "User":
            user = a.value or None
        if key in _TIMING_KEYS:
            timing[key] = a.value
        if key in _VIEW_KEYS:
            view[key] = a.value.strip()
    if exec_start is None:
        raise InputError(str(unit), "no ExecStart= in [Service]")
    if len(starts) > 1:
        # systemd.service(5): more than one ExecStart= only for Type=oneshot (else the unit is refused),
        # where they run one after another, each waited for: a server among them runs there, not the last
        if timing.get("Type", "").strip() != "oneshot":
            raise InputError(
                exec_start.file,
                "more than one ExecStart= (systemd refuses it unless Type=oneshot)",
                exec_start.line,
            )
        raise UnresolvedLaunch(
            f"{exec_start.file}:{exec_start.line}: Type=oneshot runs its {len(starts)} ExecStart= commands "
            "one after another: which of them starts the server is not known"
        )
    # another user's unit is not handed a value of this process's environment that may be a credential
    # (``--tool-call-parser ${MYSQL_PWD}`` in argparse's refusal): systemd would expand the manager's
    # environment, not the reader's shell's, so it is not known either
    theirs = bool(namers())
    hidden = [k for k, v in env.items() if theirs and readers(origin.get(k, "")) and may_be_secret(k, v)]
    argv = _exec_words(exec_start, unit, env, hidden)
    if not argv:
        raise InputError(exec_start.file, "ExecStart= is empty after expansion", exec_start.line)
    try:  # ``spark-validate launch [opts] -- CMD...``: CMD is the server the wrapper will exec
        wrapper = unwrap_launch(argv, "ExecStart")
    except InputError as exc:
        raise InputError(exec_start.file, exc.reason, exec_start.line) from None
    argv, opts = wrapper or (argv, [])
    wd: Path | None = None
    if workdir:
        wd_text = specifiers(workdir.lstrip("-"), unit, env, str(unit), 0)
        wd = _home(user, unit, env) if wd_text == "~" else Path(wd_text)
        if workdir.startswith("-") and _missing_directory(wd):
            wd = None  # systemd: with '-' a missing directory is not fatal; the command starts in / instead
    return ServiceUnit(
        path=unit,
        exec_start=argv,
        exec_start_pre=[w for w in (_exec_words(a, unit, env) for a in pre) if w],
        env=env,
        env_origin=origin,
        working_directory=wd,
        user=user,
        wrapped_by_launch=wrapper is not None,
        launch_options=opts,
        timing=timing,
        view=[f"{k}={v}" for k, v in view.items() if v.lower() not in _OFF],
    )


def _user_uid(user: str | None) -> int | None:
    """The UID of ``User=`` where this host knows it (a name missing here: None)."""
    if not user:
        return None
    if _uid_text(user):
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def _home(user: str | None, unit: Path, env: dict[str, str]) -> Path:
    """``WorkingDirectory=~``: the home directory of ``User=`` (root's where none is set) for the system
    manager, this user's for a user unit (systemd.exec(5))."""
    if user_unit(unit):
        return Path(env.get("HOME", "/root"))
    if user is None:
        return Path("/root")
    try:
        entry = pwd.getpwuid(int(user)) if _uid_text(user) else pwd.getpwnam(user)
    except (KeyError, OverflowError):
        raise InputError(str(unit), f"WorkingDirectory=~: no user {user[:60]!r} on this host") from None
    return Path(entry.pw_dir)


def launch_from_unit(
    path: Path | str,
    *,
    base_env: Mapping[str, str] | None = None,
    env_files: EnvFiles | None = None,
    program_reader: ProgramReader | None = None,
) -> Launcher:
    """``--unit``: the ExecStart= command with the unit's environment (see ``systemd_unit``); ``env_files``
    stand in for its EnvironmentFile= entries; ``program_reader`` reads an ExecStart= that runs the server
    through a shell, a container runtime or a script."""
    unit = load_unit(path, base_env=dict(base_env or {}), env_files=env_files)
    reader = program_reader
    if program_reader is not None:
        uid, what = _user_uid(unit.user), f"the unit {unit.path} (User=)"

        def reader(argv: list[str], **kw: Any) -> Launcher | None:
            if unit.view:  # ``[ -r FILE ]`` in the service: another answer than this process's, not known
                raise UnresolvedLaunch(
                    f"{unit.path}: {', '.join(unit.view)} changes what the service's processes may read or "
                    f"find, so what its ExecStart= {argv[0]} tests and reads there is not known"
                )
            # the service runs as User=: what its script or shell string tests and reads is that user's
            # answer (``[ -r FILE ]``), not root's
            with running_as(uid, what):
                return program_reader(argv, **kw)

    launcher = launch_from_argv(
        unit.exec_start,
        origin=f"unit:{unit.path}",
        env=unit.env,
        env_origin=unit.env_origin,
        base_dir=unit.working_directory,
        # systemd starts a service in / (a user manager's: in the user's home, as WorkingDirectory=~ names
        # it) unless WorkingDirectory= says otherwise (systemd.exec(5))
        working_directory=unit.working_directory
        or (_home(None, unit.path, unit.env) if user_unit(unit.path) else Path("/")),
        program_reader=reader,
    )
    launcher.facts.user = unit.user
    return launcher
