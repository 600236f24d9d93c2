"""Bounded reading of every input file: regular files only, a size cap, never a blocking open.

Why: ``/dev/zero`` as an input (or a ``config.json`` symlinked to it) would grow the process without end,
and a FIFO blocks ``open()`` forever (in the sidecar, the event loop). Files open ``O_NONBLOCK``, the opened
descriptor is ``fstat``-checked (no swap after a ``stat``), and at most ``cap + 1`` bytes are read; links to
regular files are followed (Hugging Face caches are symlink trees). :func:`parse_json` turns every way
``json.loads`` fails on hostile text into an ``InputError`` and caps nesting. Failures exit 65.
"""

from __future__ import annotations

import errno
import fnmatch
import gc
import glob
import json
import os
import stat
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from validator.errors import InputError
from validator.trusted_files import (
    UnsafeLocation,
    in_namers_scope,
    kind,
    look_unplanted,
    named_by,
    namers_refusal,
    open_unplanted,
    read_trusted_file,
    read_upto,
)

# Caps per kind of input, generous against real files and small against memory. A real config.json or
# index is tens of KB (the 124B model's index: ~2 MB); unit files, env files and args files are a few KB.
JSON_CAP = 64 * 1024 * 1024
TEXT_CAP = 4 * 1024 * 1024
MAX_JSON_DEPTH = 100

_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)


def open_regular(path: Path | str, what: str = "file") -> int:
    """An ``O_RDONLY`` descriptor on ``path`` after checking (on the descriptor) that it is a regular file.

    ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer; ``O_NOCTTY`` keeps a terminal from
    becoming the controlling one. The caller closes the descriptor."""
    where = str(path)
    try:  # walked from / following no link another user could have planted (its target, a file only
        # root may read, would otherwise be read, and a word of it quoted in an input error)
        fd = open_unplanted(where, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError(where, f"cannot read {what}: no such file") from None
    except UnsafeLocation as exc:
        raise InputError(where, f"cannot read {what}: {str(exc).removeprefix(f'{where}: ')}") from None
    except OSError as exc:
        raise InputError(where, f"cannot open {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(where, f"{what} is {kind(st.st_mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def look(path: Path | str, what: str = "file") -> os.stat_result | None:
    """What stands at ``path`` (its links followed), None when nothing does (or a directory on the way
    cannot be searched), looked up as :func:`open_regular` walks. A look by name (``Path.is_file``) follows
    another user's link as this process (root): what comes of it next would tell that user whether a file
    exists where they cannot look. A link the walk refuses is an ``InputError`` saying why, the same words
    whether its target exists."""
    where = str(path)
    try:
        return look_unplanted(where)  # a file on the way: nothing is there, as for the kernel (ENOTDIR)
    except UnsafeLocation as exc:
        raise InputError(where, f"cannot read {what}: {str(exc).removeprefix(f'{where}: ')}") from None
    except OSError:
        return None


def lexists(path: Path | str, what: str = "file") -> bool:
    """``os.path.lexists(path)``; where another user named the launch, answered from a walk judged as them
    (the last link not followed), never by name as root: a directory on the way they could not enter is an
    ``InputError``, the same words whether anything is there."""
    where = str(path)
    if not in_namers_scope():
        return os.path.lexists(where)
    try:
        return look_unplanted(where, follow_last=False) is not None
    except UnsafeLocation as exc:
        raise InputError(where, f"cannot look for {what}: {str(exc).removeprefix(f'{where}: ')}") from None
    except OSError:
        return False


def names_in(path: Path | str, what: str = "directory") -> list[str]:
    """The names in the directory at ``path``, listed through a descriptor :func:`open_unplanted` opened:
    one the launch's owner (or a link's) could enter but not list is refused, the same words whatever it
    holds, never listed for them as this process. One this user cannot list: none, as a glob finds none."""
    where = str(path)
    try:
        fd = open_unplanted(where, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except UnsafeLocation as exc:
        raise InputError(where, f"cannot list {what}: {str(exc).removeprefix(f'{where}: ')}") from None
    except OSError:
        return []
    try:
        return os.listdir(fd)
    except OSError:
        return []
    finally:
        os.close(fd)


def glob_walked(pattern: str, what: str) -> list[str]:
    """``glob.glob(pattern)`` (an absolute pattern), level by level as every read walks: a directory a
    wildcard matches in is listed through :func:`names_in` (refused where a launch's owner could not list
    it), every candidate looked up through :func:`look` (refused where they could not look), so a file below
    the first wildcard, in a directory only root may enter, is never told apart from its absence. Raises
    ``InputError`` where refused; ``what`` names the pattern's origin in its words."""
    current = ["/"]
    parts = [c for c in pattern.split("/") if c]
    for i, comp in enumerate(parts):
        found: list[str] = []
        for d in current:
            if glob.has_magic(comp):
                hidden_ok = comp.startswith(".")  # as glob(3): a leading dot is matched only by one
                names = [n for n in names_in(d, f"the directory {what} lists") if hidden_ok or n[:1] != "."]
                candidates = [os.path.join(d, n) for n in sorted(fnmatch.filter(names, comp))]
            else:
                candidates = [os.path.join(d, comp)]
            for c in candidates:
                st = look(c, f"a path {what} names")
                if st is not None and (i == len(parts) - 1 or stat.S_ISDIR(st.st_mode)):
                    found.append(c)
        current = found
    return sorted(current)


T = TypeVar("T")
V = TypeVar("V")


class Below(list[tuple[Path, V]]):
    """What a walk below a directory found; ``cut`` where it stopped at its limit of names or depth with
    more below, so a reader that judges the whole tree (humming's modules) gives no verdict from a part."""

    cut: bool = False


# how deep files_below goes in another user's tree: one descriptor is held per level (a real install is
# a dozen levels deep; a tree a namer made thousands deep only costs them their own descriptors' worth)
_BELOW_DEPTH = 128


def files_below(root: Path, suffix: str, limit: int = 100_000) -> list[Path]:
    """``root.rglob("*" + suffix)`` for a tree a launch's owner named: the top opened as :func:`names_in`
    opens it, each directory below opened from its parent's descriptor (``O_NOFOLLOW``: a link to a
    directory is not entered, as ``rglob`` enters none) and entered only where they could list and search
    it, so nothing is listed where they could not list; at most ``limit`` names are looked at, at most
    ``_BELOW_DEPTH`` levels deep, each name once, never walked again from ``/`` (a tree thousands of levels
    deep costs a listing per directory, not a walk per name). The files are for a walked read
    (``read_head``), which judges each again: for many, :func:`read_below`. Outside such a scope, ``rglob``
    itself (root's own install: as fast as the kernel lists it)."""
    if not in_namers_scope():
        return sorted(root.rglob("*" + suffix))
    return [path for path, _none in _below(root, suffix, limit, lambda _fd, _name, _path: None)]


def read_below(
    root: Path, suffix: str, cap: int, use: Callable[[bytes], T], limit: int = 100_000
) -> Below[T | OSError]:
    """Each file :func:`files_below` finds, in its order, with ``use`` of its first ``cap`` bytes (as
    :func:`read_head` reads them) or the ``OSError`` reading it raised. In a namers' scope each is read
    from its directory's descriptor as the listing goes (``O_NOFOLLOW``; a regular file every namer could
    read, by mode bits and ACL), never walked again from ``/`` per file (a walk per file is minutes on a
    deep, wide tree a namer made). Outside such a scope, at most ``limit`` files are read (``cut`` past
    them)."""
    if not in_namers_scope():
        out: Below[T | OSError] = Below()
        files = files_below(root, suffix)
        out.cut = len(files) > limit
        for path in files[:limit]:
            try:
                out.append((path, use(read_head(path, cap))))
            except OSError as exc:
                out.append((path, exc))
        return out

    def at(dfd: int, name: str, path: Path) -> T | OSError:
        try:
            return use(_read_at(dfd, name, path, cap))
        except OSError as exc:
            return exc

    return _below(root, suffix, limit, at)


def _read_at(dfd: int, name: str, path: Path, cap: int) -> bytes:
    """:func:`read_head` of ``name`` in the directory open at ``dfd``, judged as a namer: a file that is not
    regular is never opened (a device or a FIFO acts on an open), one a namer could not read is refused."""
    if not stat.S_ISREG((lst := os.stat(name, dir_fd=dfd, follow_symlinks=False)).st_mode):
        raise OSError(errno.EINVAL, f"{kind(lst.st_mode)}, not a regular file", str(path))
    fd = os.open(name, _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0), dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since it was looked at
            raise OSError(errno.EINVAL, f"{kind(st.st_mode)}, not a regular file", str(path))
        if why := namers_refusal(str(path), st, os.R_OK, "read the file", fd):
            raise UnsafeLocation(why)
        os.set_blocking(fd, True)
        return read_upto(fd, cap)
    finally:
        os.close(fd)


def _below(root: Path, suffix: str, limit: int, at: Callable[[int, str, Path], V]) -> Below[V]:
    """The walk of :func:`files_below` in a namers' scope: each file found, sorted, with ``at`` of (its
    directory's descriptor, its name, its path), called while that descriptor is open; ``cut`` where a
    name or a directory was left for the limits."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    found: Below[V] = Below()
    try:
        top = open_unplanted(str(root), flags)
    except OSError:  # refused (UnsafeLocation) or nothing there: as names_in, none
        return found
    seen = 0
    # each level: its descriptor, its path, the subdirectories of it still to enter
    levels: list[tuple[int, Path, list[str]]] = []

    def enter(fd: int, where: Path) -> None:
        nonlocal seen
        subdirs: list[str] = []
        try:
            if namers_refusal(str(where), os.fstat(fd), os.R_OK | os.X_OK, "list it", fd) is None:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if seen >= limit:
                            found.cut = True
                            break
                        seen += 1
                        try:
                            is_dir = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        if is_dir:
                            subdirs.append(entry.name)
                        elif entry.name.endswith(suffix):
                            found.append((where / entry.name, at(fd, entry.name, where / entry.name)))
        except OSError:
            subdirs = []
        levels.append((fd, where, sorted(subdirs, reverse=True)))

    enter(top, root)
    try:
        while levels:
            fd, where, subdirs = levels[-1]
            if not subdirs or seen >= limit or len(levels) > _BELOW_DEPTH:
                found.cut = found.cut or bool(subdirs)
                os.close(levels.pop()[0])
                continue
            name = subdirs.pop()
            try:
                child = os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            except OSError:  # gone, or swapped for a link or a file since it was listed
                continue
            enter(child, where / name)
    finally:
        for fd, _where, _subdirs in levels:
            os.close(fd)
    found.sort(key=lambda pair: pair[0])
    return found


def looks_like(path: Path | str, test: Callable[[int], bool], what: str = "file") -> bool:
    """``test`` (``stat.S_ISDIR``, ``stat.S_ISREG``) of what :func:`look` finds at ``path``; True where the
    walk refuses a link on the way (whoever goes on to read it is told why, as for any file there)."""
    try:
        st = look(path, what)
    except InputError:
        return True
    return st is not None and test(st.st_mode)


def read_bounded(path: Path | str, cap: int, what: str = "file", *, names: bool = False) -> bytes:
    """The whole content of a regular file of at most ``cap`` bytes; anything else is an ``InputError``.

    The size is checked before reading (``st_size``) and again while reading (a file that grows, or lies
    about its size as ``/proc`` files do, still yields at most ``cap + 1`` bytes before it is refused).
    ``names``: a launch input whose words name other files, read as its owner could (``named_by``)."""
    return read_bounded_stat(path, cap, what, names=names)[0]


def read_bounded_stat(
    path: Path | str, cap: int, what: str = "file", *, names: bool = False
) -> tuple[bytes, os.stat_result]:
    """:func:`read_bounded`, with the status of the file read (its owner is that file's, never what the
    name holds by the time it is asked again)."""
    where = str(path)
    fd = open_regular(path, what)
    try:
        st = os.fstat(fd)
        if names:
            named_by(st.st_uid, f"the {what} {where}")
        size = st.st_size
        if size > cap:
            raise InputError(where, f"{what} is {size} bytes, over the {cap}-byte cap")
        try:
            data = read_upto(fd, cap + 1)
        except OSError as exc:
            raise InputError(where, f"cannot read {what}: {exc.strerror or exc}") from None
        if len(data) > cap:
            raise InputError(where, f"{what} grew past the {cap}-byte cap while being read")
        return data, st
    finally:
        os.close(fd)


class FileAbsent(InputError):
    """The file is not there (found by the trusted walk, which follows no link another user planted):
    callers that accept an absent file (an optional env file) tell it from the other refusals."""


def read_trusted_bounded(
    path: Path | str, cap: int, what: str = "file", *, trusted_uids: Collection[int] = (), names: bool = False
) -> bytes:
    """:func:`read_bounded` for a file the verdict trusts (an env file, a pack's data file): also refused,
    as an ``InputError`` naming it, when it or a directory above it could have been written by anyone but
    root, the reading user and ``trusted_uids`` (``validator.trusted_files``)."""
    where = str(path)
    try:
        return read_trusted_file(path, cap, what=what, trusted_uids=trusted_uids, names=names)
    except FileNotFoundError:
        raise FileAbsent(where, f"cannot read {what}: no such file") from None
    except UnsafeLocation as exc:
        raise InputError(where, str(exc).removeprefix(f"{where}: ")) from None


def read_head(path: Path | str, cap: int) -> bytes:
    """At most the first ``cap`` bytes of a regular file, for readers that need only its beginning (or
    scan source files) and treat an unreadable file as absent: every failure is an ``OSError`` (a FIFO or
    a device is ``EINVAL``), so their ``except OSError`` keeps working, and ``path.read_bytes()[:cap]``,
    which reads all of ``/dev/zero`` before slicing, is never needed."""
    fd = open_unplanted(str(path), _OPEN_FLAGS)  # walked as every input is (UnsafeLocation is an OSError)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{kind(st.st_mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
        return read_upto(fd, cap)
    finally:
        os.close(fd)


def read_text_bounded(
    path: Path | str, cap: int = TEXT_CAP, what: str = "file", *, names: bool = False
) -> str:
    """:func:`read_bounded` decoded as UTF-8; bad UTF-8 is an ``InputError`` naming the line."""
    data = read_bounded(path, cap, what, names=names)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(str(path), f"{what} is not valid UTF-8 (byte {exc.start})", line) from None


def json_values(obj: Any, stop_after: int) -> int:
    """How many values (container members) ``obj`` holds, counted level by level; stops early once past
    ``stop_after`` (returning a figure above it), so a hostile document costs no more than the bound."""
    level: list[Any] = [obj] if isinstance(obj, (dict, list, tuple)) else []
    count = 0
    while level:
        children: list[Any] = []
        for cur in level:
            members = cur.values() if isinstance(cur, dict) else cur
            count += len(members)
            if count > stop_after:
                return count
            children.extend(members)
        level = [c for c in children if isinstance(c, (dict, list, tuple))]
    return count


def json_loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads`` with CPython's cyclic garbage collector paused: each full collection rescans every
    live container, so building millions of small ones (a hostile 8 MiB ``[[1],[1],...]``) turns a linear
    parse superlinear. A parse makes no reference cycles; the collector is resumed after it, and only if
    it was running."""
    running = gc.isenabled()
    if running:
        gc.disable()
    try:
        return json.loads(text, **options)
    finally:
        if running:
            gc.enable()


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key[:60]!r}")
            seen.add(key)
    return out


def parse_json(
    text: str | bytes, where: str, max_depth: int = MAX_JSON_DEPTH, *, unique_keys: bool = False
) -> Any:
    """``json.loads`` whose every failure on hostile text is an ``InputError``, and whose result nests at
    most ``max_depth`` containers deep (so recursive consumers of it cannot hit ``RecursionError``).
    ``unique_keys``: an object naming a key twice is refused (a document read as evidence has one value
    per field, not the last of several)."""
    try:
        doc = json_loads(text, object_pairs_hook=_unique) if unique_keys else json_loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    except RecursionError:
        raise InputError(where, "JSON nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise InputError(where, f"JSON is not valid UTF-8 (byte {exc.start})") from None
    except ValueError as exc:  # int() digit limit ("Exceeds the limit (4300 digits) ..."), a duplicate key
        raise InputError(where, f"invalid JSON: {str(exc).splitlines()[0][:120]}") from None
    if json_depth(doc, max_depth) > max_depth:
        raise InputError(where, f"JSON nested more than {max_depth} levels deep")
    return doc


def json_depth(obj: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Container nesting depth of ``obj`` (a scalar is 0), computed level by level without recursion;
    stops early past ``limit`` (returning ``limit + 1``) so a hostile document costs no more than the
    limit. One list per level, no object per container: a document of millions of small containers
    costs about as much as parsing it."""
    level: list[Any] = [obj] if isinstance(obj, (dict, list, tuple)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return limit + 1
        children: list[Any] = []
        for cur in level:
            children.extend(cur.values() if isinstance(cur, dict) else cur)
        level = [c for c in children if isinstance(c, (dict, list, tuple))]
    return depth


def load_json_file(path: Path | str, cap: int = JSON_CAP, what: str = "JSON file") -> Any:
    """A bounded read of a JSON file plus :func:`parse_json`; every failure an ``InputError``."""
    return parse_json(read_text_bounded(path, cap, what), str(path))
