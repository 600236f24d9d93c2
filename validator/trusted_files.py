"""Files the verdict trusts: written only into a private directory, read only through directories that
nobody but root and the trusted users can write.

Whoever can write a trusted file (rule pack, flag table, attestation, waiver, env file) can turn a FAIL into
a PASS. :func:`write_private`: only through directories root or this process owns and nobody else can
write (what the readers demand), into a 0700 directory opened ``O_NOFOLLOW`` and refused unless ours; a
temporary file ``O_EXCL | O_NOFOLLOW`` in it, ``fchmod``, fsync, rename within the directory descriptor.
:func:`read_guarded`: walk from ``/`` with ``openat`` and ``O_NOFOLLOW``, links resolved by hand, each
directory recorded from its descriptor; :func:`chain_problems` refuses any writable by others, sticky
``/tmp`` included (sticky stops renaming our entries, not planting theirs). Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
import struct
from collections import deque
from collections.abc import Collection, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_PATH = getattr(os, "O_PATH", 0)
WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH
MAX_SYMLINKS = 40  # the kernel's own limit (MAXSYMLINKS)
PATH_MAX = 4096  # the kernel's limit on a path, its terminating NUL included


class UnsafeLocation(OSError):
    """A trusted file's directory or the file itself cannot be written (or read) safely; says why."""


def kind(mode: int) -> str:
    """What kind of file ``mode`` is, for messages."""
    kinds = {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
        stat.S_IFDIR: "a directory",
        stat.S_IFLNK: "a symbolic link",
        stat.S_IFREG: "a regular file",
    }
    return kinds.get(stat.S_IFMT(mode), "of an unknown kind")


# --- writing -----------------------------------------------------------------------------------------


def _dir_problem(st: os.stat_result, *, uid: int) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != uid:
        return f"is owned by UID {st.st_uid}, not by this process (UID {uid})"
    if st.st_mode & WRITABLE_BY_OTHERS:
        return f"is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


class _Shared(UnsafeLocation):
    """A directory on the way that someone other than root and this process could change (the writer's
    walk stops at it, before looking at anything inside it)."""


def _way_problem(d: DirFacts) -> str | None:
    """Why the writer must not pass through ``d``: its owner (another user) or anyone who can write it
    could rename what is made below it and put theirs in its place, and the readers
    (:func:`chain_problems`) refuse every file below it anyway."""
    if d.uid not in (0, os.geteuid()):
        return f"directory {d.path} on the way is owned by UID {d.uid}, not by root or this process"
    if d.mode & WRITABLE_BY_OTHERS:
        return f"directory {d.path} on the way is writable by its group or others (mode {d.mode:04o})"
    return None


def _planted(holder: DirFacts, owner: int, trusted: Collection[int] | None) -> str | None:
    """Why a link in ``holder`` (the link owned by ``owner``) may be someone else's choice: the directory
    is another user's, or others can write it (sticky keeps a link of root's or a trusted user's). A
    reader stops there, before following it: where it points is not looked at, so a refusal tells
    nothing of a directory its planter cannot list."""
    allowed = {0, os.geteuid()} if trusted is None else {0, *trusted}
    if trusted is not None and holder.uid not in allowed:  # None: only where others can write
        return f"which UID {holder.uid} owns"
    if holder.mode & WRITABLE_BY_OTHERS and not (holder.mode & stat.S_ISVTX and owner in allowed):
        return f"which is writable by its group or others (mode {holder.mode:04o})"
    return None


def allows(st: os.stat_result, uid: int, groups: Collection[int], need: int, fd: int | None = None) -> bool:
    """Whether ``st`` grants ``uid`` (in ``groups``) every bit of ``need`` (``os.R_OK``, ``os.W_OK``,
    ``os.X_OK``) as the kernel decides: the mode bits' owner, group or other class, or, given the file's
    descriptor ``fd``, its access ACL where it has one (a named user or group, the mask)."""
    if uid == 0:
        return True
    acl = None if fd is None else _access_acl(fd)
    if acl is None:
        shift = 6 if st.st_uid == uid else 3 if st.st_gid in groups else 0
        return (st.st_mode >> shift) & need == need
    mask = next((perm for tag, perm, _ in acl if tag == _ACL_MASK), 7)
    for tag, perm, ident in acl:  # posix_acl_permission's order: the owner, a named user, the groups, other
        if tag == _ACL_USER_OBJ and st.st_uid == uid:
            return perm & need == need
        if tag == _ACL_USER and ident == uid:
            return perm & mask & need == need
    in_group = False
    for tag, perm, ident in acl:
        if (tag == _ACL_GROUP_OBJ and st.st_gid in groups) or (tag == _ACL_GROUP and ident in groups):
            if perm & mask & need == need:
                return True
            in_group = True
    return not in_group and any(tag == _ACL_OTHER and perm & need == need for tag, perm, _ in acl)


# the tags of an access ACL's entries (linux/posix_acl.h), in the order the kernel keeps them
_ACL_USER_OBJ = 0x01
_ACL_USER = 0x02
_ACL_GROUP_OBJ = 0x04
_ACL_GROUP = 0x08
_ACL_MASK = 0x10
_ACL_OTHER = 0x20


def _access_acl(fd: int) -> list[tuple[int, int, int]] | None:
    """The access ACL of the file open at ``fd``, as (tag, permission bits, UID or GID) entries; None when
    it has none (the mode bits say it all). One that cannot be read or parsed grants nothing."""
    try:
        try:
            raw = os.getxattr(fd, "system.posix_acl_access")
        except OSError as exc:  # an O_PATH descriptor (a file never opened for reading): through /proc
            if exc.errno != errno.EBADF:
                raise
            raw = os.getxattr(f"/proc/self/fd/{fd}", "system.posix_acl_access")
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        return []
    if len(raw) < 4 or (len(raw) - 4) % 8 or struct.unpack_from("<I", raw)[0] != 2:
        return []
    return [struct.unpack_from("<HHI", raw, at) for at in range(4, len(raw), 8)]


def _groups(uid: int) -> tuple[int, ...]:
    """The groups of ``uid`` (none known for a UID without a passwd entry: only the other class)."""
    try:
        pw = pwd.getpwuid(uid)
        return tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except (KeyError, OSError):
        return ()


class Planters(dict[int, tuple[str, tuple[int, ...]]]):
    """Who chose where an untrusted read goes: each other user whose own directory held a link the walk
    followed, or whose file named the path (:func:`read_as`), as UID -> (how, that user's groups). Nothing
    is read for another user with more privilege than theirs: the way must be one they could enter, the
    file one they could read."""

    def refusal(
        self, path: str, st: os.stat_result, need: int, what: str, fd: int | None = None
    ) -> str | None:
        for uid, (how, groups) in self.items():
            if not allows(st, uid, groups, need, fd):
                return (
                    f"{path}: {how}, who could not {what}: nothing is read for another user that they could "
                    "not read"
                )
        return None


_NAMERS: ContextVar[Planters | None] = ContextVar("spark_validate_namers", default=None)


@contextlib.contextmanager
def read_as(namers: Mapping[int, tuple[str, tuple[int, ...]]]) -> Iterator[Planters]:
    """Within it, a path may have been named by a file another user owns (a launcher, what it sources, a
    running server's argv): every untrusted or trusted read walks as if they had planted a link at ``/``
    (:class:`Planters`), and :func:`named_by` adds the owners of files read inside it."""
    token = _NAMERS.set(scope := Planters(namers))
    try:
        yield scope
    finally:
        _NAMERS.reset(token)


def named_by(uid: int, what: str) -> None:
    """``what``, read in a :func:`read_as` scope, is UID ``uid``'s and may name other files: from here on
    nothing is read there that ``uid`` could not read (root's and this process's own files name freely)."""
    namers = _NAMERS.get()
    if namers is not None and uid not in (0, os.geteuid()):
        how = (f"{what}, which may have named it, is UID {uid}'s", _groups(uid))
        runners = _RUNNERS.get()
        if runners is not None and uid in runners:  # it runs the program, and named it too: it stays
            runners.discard(uid)
            namers[uid] = how
        namers.setdefault(uid, how)


# UIDs that run the launch's program in the current :func:`running_as` block without having named it
_RUNNERS: ContextVar[set[int] | None] = ContextVar("spark_validate_runners", default=None)


@contextlib.contextmanager
def running_as(uid: int | None, what: str) -> Iterator[None]:
    """Within it, in a :func:`read_as` scope, ``what`` runs as UID ``uid`` (a unit's ``User=``): what its
    program reads and tests is walked as that user could, as for a namer, though they named nothing
    (:func:`namers` leaves them out); after it they are a namer only if a file of theirs was read."""
    namers = _NAMERS.get()
    if uid is None or namers is None or uid in (0, os.geteuid()) or uid in namers:
        yield
        return
    namers[uid] = (f"{what} runs as UID {uid}", _groups(uid))
    runners = {uid}
    token = _RUNNERS.set(runners)
    try:
        yield
    finally:
        _RUNNERS.reset(token)
        if uid in runners:
            namers.pop(uid, None)


def _mkdir_private(name: str, dir_fd: int) -> bool:
    """Make ``name`` 0700 under ``dir_fd``; True when made here. A umask that masks the owner's own bits
    (0777) leaves a directory its maker cannot enter unless root: they are set back through a descriptor
    on what stands at the name (``/proc/self/fd``), never by name, which could be swapped in between, and
    only while it has no group or other bits: a directory of ours swapped in with any keeps its mode."""
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        return False
    if not _O_PATH:
        return True
    try:  # what stands at ``name`` now, unfollowed: a link or a file swapped in fails here
        fd = os.open(name, _O_PATH | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return True  # the caller's own open of ``name`` judges it
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        # only what mkdir(0700) could have made: an older directory of ours renamed in with group or other
        # bits keeps them (one others can write is then refused by the caller, as before)
        if st.st_uid == os.geteuid() and mode & 0o077 == 0 and mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):  # no /proc: the caller's open fails, naming the directory
                os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)
    finally:
        os.close(fd)
    return True


def _parent_of(directory: Path, what: str) -> tuple[int, str]:
    """A descriptor on the directory that holds ``directory`` (the caller closes it) and its last name,
    reached by :func:`_walk` through directories only root and this process can change (each judged before
    anything in it is looked at, a link in it included), each missing one made 0700 through its parent's
    descriptor. A path checked first and opened by name later could be swapped in between."""
    target = str(directory)
    try:  # joined, never normalised: "link/.." is the link's parent, as the kernel and the readers go
        target = target if os.path.isabs(target) else os.path.join(os.getcwd(), target)
    except OSError as exc:  # a relative path, and the working directory is gone
        raise UnsafeLocation(f"{directory}: no working directory to resolve it in: {exc.strerror}") from None
    if not _components(os.path.normpath(target)):  # "/" itself: judged on its descriptor as any other
        return os.open("/", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC), "."
    for _ in range(4096):
        try:
            try:
                pfd, name, _here, _chain = _walk(target, last_as_is=True, private=True)
            except _Missing as exc:
                where = str(exc.filename)
                try:  # swapped or removed since the first walk: still a refusal naming the directory
                    mfd, missing, _h, _c = _walk(where, missing_last=True, private=True)
                    try:
                        _mkdir_private(missing, mfd)
                    finally:
                        os.close(mfd)
                except UnsafeLocation:
                    raise
                except OSError as err:
                    raise UnsafeLocation(
                        f"{directory}: cannot make {where} on the way: {err.strerror or err}"
                    ) from None
                continue
        except _Shared as refused:
            raise UnsafeLocation(f"{directory}: {refused}; refusing to write {what} there") from None
        except UnsafeLocation:
            raise
        except OSError as exc:
            raise UnsafeLocation(
                f"{directory}: cannot open a directory on the way: {exc.strerror or exc}"
            ) from None
        return pfd, name
    raise UnsafeLocation(f"{directory}: too many missing directories on the way")


def open_private_dir(directory: Path, *, gid: int | None = None, what: str = "the file") -> int:
    """A descriptor on ``directory``, created 0700 (0750 and group ``gid``) when missing, after checking on
    the descriptor that this process owns it and nobody else can write it (reached by :func:`_parent_of`).
    A path through a symbolic link someone else could have planted is refused before anything is created:
    the directory (and the file) would be made wherever the link points."""
    uid = os.geteuid()
    pfd, name = _parent_of(directory, what)
    try:
        try:
            created = _mkdir_private(name, pfd)  # never more than 0700 while it is being created
        except OSError as exc:
            raise UnsafeLocation(f"{directory}: cannot make the directory: {exc.strerror or exc}") from None
        try:
            dfd = os.open(
                name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=pfd
            )
        except OSError as exc:
            raise UnsafeLocation(f"{directory}: cannot open the directory: {exc.strerror or exc}") from None
    finally:
        os.close(pfd)
    try:
        st = os.fstat(dfd)
        problem = _dir_problem(st, uid=uid)
        if problem is not None:
            raise UnsafeLocation(f"{directory} {problem}; refusing to write {what} there")
        if gid is not None and (created or st.st_gid != gid or stat.S_IMODE(st.st_mode) != 0o750):
            # the group named reads it, whether made now or by an earlier run without one (ours, checked)
            try:
                os.fchown(dfd, -1, gid)  # refused unless root or a member of the group
                os.fchmod(dfd, 0o750)
            except OSError as exc:
                raise UnsafeLocation(f"{directory}: cannot give it group {gid}: {exc.strerror}") from None
        elif created:  # mkdir's mode went through the umask: set exactly what was asked
            os.fchmod(dfd, 0o700)
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def write_private(
    path: Path, data: bytes, *, gid: int | None = None, mode: int = 0o644, what: str = "the file"
) -> None:
    """Atomically replace ``path`` with ``data``: a reader sees the old content or the new, never half of
    it, and no name in the directory is ever followed, opened or chmod'ed except our own new file. Every
    failure is an UnsafeLocation naming the path (a full disk, a directory standing at the name)."""
    dfd = open_private_dir(path.parent, gid=gid, what=what)
    tmp = f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if gid is not None:
                    os.fchown(fd, -1, gid)
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on a directory; renamed anyway
            os.fsync(dfd)
    except OSError as exc:
        raise UnsafeLocation(f"{path}: cannot write {what}: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)


# --- reading -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DirFacts:
    """One directory on the way to a file, as seen on its opened descriptor."""

    path: str
    uid: int
    mode: int  # permission bits, sticky and set-id bits included


@dataclass(frozen=True)
class FileFacts:
    """What the reader saw of a file and of every directory it went through to reach it."""

    path: str
    uid: int
    mode: int  # permission bits
    size: int
    dir_uid: int  # the directory holding the file
    dir_mode: int
    chain: tuple[DirFacts, ...] = ()  # from "/" down to the directory holding the file


def _join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


class NotADirectory(UnsafeLocation):
    """A component on the way is a file, not a directory (``ENOTDIR``): nothing lies beyond it."""


class _Missing(FileNotFoundError):
    """A component of the path is not there; ``visited`` holds the directories walked before it."""

    visited: list[DirFacts]


def _walk(
    path: str,
    *,
    follow_last: bool = True,
    missing_last: bool = False,
    last_as_is: bool = False,
    private: bool = False,
    links_from: Collection[int] | None = None,
    shared_links: Planters | None = None,
) -> tuple[int, str, str, list[DirFacts]]:
    """Open each directory of ``path`` from ``/`` without following a link the kernel could swap; return the
    (caller-closed) descriptor of the last one, the last component, its physical path and every directory
    visited. ``missing_last`` allows an absent last component, ``last_as_is`` returns the last one's parent
    whatever the last is (the caller opens it ``O_NOFOLLOW``); ``private`` stops at the first directory
    :func:`_way_problem` refuses (``_Shared``), before anything in it is looked at; ``links_from`` (root and
    these UIDs) follows no link someone else could have planted (:func:`_planted`); ``shared_links``, no
    link in a directory others can write (whoever owns it), and past a link in another user's directory
    (recorded there) no directory that user could not enter."""
    if len(os.fsencode(path)) >= PATH_MAX:  # as the kernel refuses it; each component costs a lookup
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), path)
    absolute = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    pending = deque(_components(absolute))
    if not pending:
        raise UnsafeLocation(f"{path}: names the root directory, not a file")
    flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
    root = os.open("/", flags)
    stack: list[tuple[int, str]] = [(root, "/")]
    visited: dict[str, DirFacts] = {}
    judges = shared_links if shared_links is not None or private else Planters(_NAMERS.get() or {})

    def record(where: str, st: os.stat_result, fd: int) -> None:
        visited[where] = facts = DirFacts(where, st.st_uid, stat.S_IMODE(st.st_mode))
        if private and (problem := _way_problem(facts)) is not None:
            raise _Shared(problem)
        if judges and (why := judges.refusal(path, st, os.X_OK, f"enter {where}", fd)):
            raise UnsafeLocation(why)

    links = 0
    try:
        record("/", os.fstat(root), root)
        while True:
            name = pending.popleft()
            dfd, here = stack[-1]
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                if not pending:
                    raise UnsafeLocation(f"{path}: ends in '..', not a file")
                continue
            if last_as_is and not pending:
                return os.dup(dfd), name, here, list(visited.values())
            # where each name is looked up, not only where a directory is opened: '..' after a link (or a
            # link to an absolute path) goes back to a directory opened before its planter was known
            if shared_links and (
                why := shared_links.refusal(path, os.fstat(dfd), os.X_OK, f"enter {here}", dfd)
            ):
                raise UnsafeLocation(why)
            try:
                lst = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                if missing_last and not pending:
                    return os.dup(dfd), name, here, list(visited.values())
                missing = _Missing(2, "No such file or directory", _join(here, name))
                missing.visited = list(visited.values())
                raise missing from None
            if stat.S_ISLNK(lst.st_mode) and not pending and not follow_last:
                raise UnsafeLocation(f"{path} is a symbolic link, not a regular file")
            if stat.S_ISLNK(lst.st_mode) and _NAMERS.get() and (here == "/proc" or here.startswith("/proc/")):
                # /proc/self, /proc/N/cwd: what a process's link names depends on who follows it (this
                # process's own working directory, or a ptrace check a namer would fail): never theirs
                raise UnsafeLocation(f"{path}: {_join(here, name)} is a process's link, not theirs to follow")
            if stat.S_ISLNK(lst.st_mode):
                planted = links_from is not None or shared_links is not None
                if planted and (why := _planted(visited[here], lst.st_uid, links_from)):
                    raise UnsafeLocation(
                        f"{path}: {_join(here, name)} is a symbolic link in {here}, {why}: anyone could "
                        "have planted it"
                    )
                holder = visited[here].uid
                if shared_links is not None and holder not in (0, os.geteuid()):
                    how = f"{_join(here, name)} is a symbolic link in a directory of UID {holder}"
                    shared_links.setdefault(holder, (how, _groups(holder)))
                links += 1
                if links > MAX_SYMLINKS:
                    raise UnsafeLocation(f"{path}: more than {MAX_SYMLINKS} symbolic links")
                target = os.readlink(name, dir_fd=dfd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                pending.extendleft(reversed(_components(target)))
                if not pending:
                    raise UnsafeLocation(f"{path}: a symbolic link to the root directory")
                continue
            if not pending:
                fd = os.dup(dfd)
                return fd, name, here, list(visited.values())
            if not stat.S_ISDIR(lst.st_mode):
                raise NotADirectory(f"{_join(here, name)} is {kind(lst.st_mode)}, not a directory")
            try:
                sub = os.open(name, flags, dir_fd=dfd)
            except OSError as exc:
                raise UnsafeLocation(
                    f"{_join(here, name)}: cannot open the directory: {exc.strerror or exc}"
                ) from None
            st = os.fstat(sub)
            if not stat.S_ISDIR(st.st_mode):  # swapped since the stat
                os.close(sub)
                raise NotADirectory(f"{_join(here, name)} is not a directory")
            where = _join(here, name)
            stack.append((sub, where))
            record(where, st, sub)
    finally:
        for fd, _ in stack:
            os.close(fd)


def walk_unplanted(path: str) -> tuple[int, str, Planters]:
    """:func:`_walk` to a file that need not be trusted (a launcher, a checkpoint's config), following no
    link in a directory others can write, where anyone could have planted it (sticky keeps root's and this
    user's). A link in a directory its owner alone can write is that owner's (the server user's
    ``current`` release link), and followed only where that owner could go (:class:`Planters`)."""
    planters = Planters(_NAMERS.get() or {})
    dfd, name, _here, _chain = _walk(path, shared_links=planters)
    return dfd, name, planters


def open_unplanted(path: str, flags: int) -> int:
    """``os.open`` of the last component of ``path`` (``O_NOFOLLOW``), walked as :func:`walk_unplanted`
    walks; the file opened must be one every planter of a link on the way could read."""
    dfd, name, planters = walk_unplanted(path)
    try:
        lst = os.stat(name, dir_fd=dfd, follow_symlinks=False) if planters else None
        if (
            lst
            and not stat.S_ISREG(lst.st_mode)
            and (why := planters.refusal(path, lst, os.R_OK, "read the file"))
        ):
            # judged before the open too: opening a device or a FIFO already acts on it (a watchdog
            # starts, a tape rewinds, a writer waiting on the FIFO is let through); mode bits alone
            raise UnsafeLocation(why)
        fd = os.open(name, flags | _O_NOFOLLOW, dir_fd=dfd)
    finally:
        os.close(dfd)
    if planters and (why := planters.refusal(path, os.fstat(fd), os.R_OK, "read the file", fd)):
        os.close(fd)
        raise UnsafeLocation(why)
    return fd


def stat_unplanted(path: str) -> os.stat_result:
    """``os.stat(path)``, walked as :func:`walk_unplanted` walks (UnsafeLocation at a planted link)."""
    dfd, name, _planters = walk_unplanted(path)
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    finally:
        os.close(dfd)


def look_unplanted(
    path: str, access: int = os.F_OK, *, follow_last: bool = True, theirs: bool = False
) -> os.stat_result | None:
    """What stands at ``path`` (its last link followed unless ``follow_last`` is False), as a shell's file
    test, ``cd`` or ``execvp`` finds it, looked up as :func:`walk_unplanted` walks and never by name: None
    where nothing does (a name missing, a file on the way) or where this process lacks ``access`` to it; any
    other error raised, as ``Path.exists`` raises it. :class:`UnsafeLocation` where the walk refuses (a link
    anyone could have planted; in a :func:`read_as` scope, a directory a namer could not enter: the answer is
    theirs to know, not ours to tell), in the same words whether anything is there. With ``theirs``, also
    where this process has ``access`` and a namer of the scope would not, by the file's mode bits and its
    access ACL (read through a descriptor on what was looked at, never by name): a shell test in their
    script gets their answer, not root's."""
    planters = Planters(_NAMERS.get() or {})
    try:
        if not _components(path) and path.startswith("/"):  # "/" itself: no walk names it
            dfd, name = os.open("/", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC), "."
        elif follow_last:
            dfd, name, planters = walk_unplanted(path)
        else:
            dfd, name, _here, _chain = _walk(path, last_as_is=True, shared_links=planters)
    except (NotADirectory, FileNotFoundError):
        return None
    try:  # the directory it is looked up in, judged again: a '..' may have climbed back past a link
        if why := planters.refusal(path, os.fstat(dfd), os.X_OK, "look there", dfd):
            raise UnsafeLocation(why)
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if access != os.F_OK and not os.access(name, access, dir_fd=dfd, follow_symlinks=False):
            return None
        if theirs and access != os.F_OK and _NAMERS.get():
            how = (_O_PATH or os.O_RDONLY | os.O_NONBLOCK) | _O_NOFOLLOW | _O_CLOEXEC  # never opened to read
            fd = os.open(name, how, dir_fd=dfd)
            try:
                now = os.fstat(fd)
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                    raise UnsafeLocation(f"{path}: changed while it was looked at")
                if why := Planters(_NAMERS.get() or {}).refusal(path, now, access, "have it", fd):
                    raise UnsafeLocation(why)
            finally:
                os.close(fd)
        return st
    except (NotADirectoryError, FileNotFoundError):
        return None
    finally:
        os.close(dfd)


def in_namers_scope() -> bool:
    """Whether this is a :func:`read_as` scope in which another user named the launch."""
    return bool(_NAMERS.get())


def namers() -> tuple[int, ...]:
    """The other users who named the launch in the current :func:`read_as` scope (none outside one); not
    one that only runs it (:func:`running_as`)."""
    runners = _RUNNERS.get() or set()
    return tuple(uid for uid in _NAMERS.get() or {} if uid not in runners)


def namers_refusal(path: str, st: os.stat_result, need: int, what: str, fd: int | None = None) -> str | None:
    """Why a namer of the current :func:`read_as` scope could not ``what`` (``need``: ``os.R_OK`` ...) the
    file ``st`` is (``fd`` open on it, for its ACL); None outside such a scope or where every one could."""
    return Planters(_NAMERS.get() or {}).refusal(path, st, need, what, fd)


def realpath(path: Path | str) -> Path:
    """``os.path.realpath(path)``; where another user named the launch (:func:`read_as`), the physical path
    :func:`walk_unplanted`'s walk arrives at (links followed by hand, each judged as them), never resolved
    by name as root, and ``OSError`` where the walk refuses or finds nothing."""
    if not _NAMERS.get():
        return Path(os.path.realpath(path))
    dfd, name, here, _chain = _walk(str(path), shared_links=Planters(_NAMERS.get() or {}))
    os.close(dfd)
    return Path(_join(here, name))


def hidden_from_namers(path: str) -> bool:
    """Whether, in a :func:`read_as` scope, ``path`` lies where a namer could not look (or through a link
    anyone could have planted)."""
    if not _NAMERS.get():
        return False
    try:
        look_unplanted(path)
    except UnsafeLocation:
        return True
    except OSError:
        pass
    return False


def read_upto(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of ``fd``, read in chunks to its end: a file that grows, or lies about its
    size as ``/proc`` files do, is read no further (a caller asks one byte over its cap to see that)."""
    parts: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(1 << 20, limit - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def read_guarded(
    path: Path | str,
    max_bytes: int,
    *,
    what: str = "file",
    follow_last: bool = True,
    private: bool = False,
    links_from: Collection[int] | None = None,
) -> tuple[bytes, FileFacts]:
    """The bytes of the regular file at ``path`` (at most ``max_bytes``) and what was seen on the way.

    Never blocks. Raises FileNotFoundError when absent, UnsafeLocation for a FIFO, device, directory, file
    over the cap or anything group/other-writable; ownership is judged by :func:`chain_problems`, or, with
    ``private`` (a file of this process's own), on the way as the writer does: a link in a directory
    someone else could change is then never followed, and a refusal tells nothing of what lies beyond."""
    where = str(path)
    try:
        dfd, name, parent, chain = _walk(
            where, follow_last=follow_last, private=private, links_from=links_from
        )
    except _Shared as exc:
        raise UnsafeLocation(f"{where}: {exc}") from None
    except (FileNotFoundError, UnsafeLocation):
        raise
    except OSError as exc:
        raise UnsafeLocation(f"{where}: cannot open a directory on the way: {exc.strerror or exc}") from None
    try:
        dst = os.fstat(dfd)
        if dst.st_mode & WRITABLE_BY_OTHERS:
            raise UnsafeLocation(
                f"{parent} is writable by its group or others (mode {stat.S_IMODE(dst.st_mode):04o}): "
                f"anyone could have written the {what} there"
            )
        try:
            fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY, dir_fd=dfd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise UnsafeLocation(f"{where}: cannot open: {exc.strerror or exc}") from None
        try:
            st = os.fstat(fd)  # the file actually opened, whatever was swapped in since the walk
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeLocation(f"{where} is {kind(st.st_mode)}, not a regular file")
            namers = None if private else _NAMERS.get()
            if namers and (why := namers.refusal(where, st, os.R_OK, "read the file", fd)):
                raise UnsafeLocation(why)
            if st.st_mode & WRITABLE_BY_OTHERS:
                raise UnsafeLocation(
                    f"{where} is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
                )
            if st.st_size > max_bytes:
                raise UnsafeLocation(f"{where} is {st.st_size} bytes, over the {max_bytes}-byte cap")
            try:
                data = read_upto(fd, max_bytes + 1)
            except OSError as exc:  # /proc/self/mem (EIO), a directory swapped in on some filesystems
                raise UnsafeLocation(f"{where}: cannot read: {exc.strerror or exc}") from None
            if len(data) > max_bytes:
                raise UnsafeLocation(f"{where} grew past the {max_bytes}-byte cap while being read")
            facts = FileFacts(
                path=where,
                uid=st.st_uid,
                mode=stat.S_IMODE(st.st_mode),
                size=len(data),
                dir_uid=dst.st_uid,
                dir_mode=stat.S_IMODE(dst.st_mode),
                chain=tuple(chain),
            )
            return data, facts
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def chain_problems(facts: FileFacts, trusted_uids: Collection[int], *, below: str | None = None) -> list[str]:
    """Who other than root and ``trusted_uids`` could have written the file: each directory on its way
    (those at or under ``below`` only, when given) and the file itself must be owned by one of them and
    writable by nobody else. Empty when the file can be trusted."""
    allowed = {0, *trusted_uids}
    who = " or ".join(f"UID {u}" for u in sorted(allowed))
    problems: list[str] = []
    for d in facts.chain:
        if below is not None and not (d.path == below or d.path.startswith(below.rstrip("/") + "/")):
            continue
        if d.uid not in allowed:
            problems.append(f"directory {d.path} is owned by UID {d.uid}, not {who}")
        elif d.mode & WRITABLE_BY_OTHERS:
            sticky = ", sticky" if d.mode & stat.S_ISVTX else ""
            problems.append(
                f"directory {d.path} is writable by its group or others (mode {d.mode:04o}{sticky})"
            )
    if facts.uid not in allowed:
        problems.append(f"{facts.path} is owned by UID {facts.uid}, not {who}")
    if facts.mode & WRITABLE_BY_OTHERS:
        problems.append(f"{facts.path} is writable by its group or others (mode {facts.mode:04o})")
    return problems


def replaceable_by_others(path: Path | str, owner: int, trusted_uids: Collection[int]) -> str | None:
    """Why someone other than root and ``trusted_uids`` could have put another file at ``path``, an existing
    file ``owner`` owns (an append-only log, where :func:`chain_problems` is too strict): a directory on the
    way owned by another user, or writable by others unless sticky and what it holds there is trusted
    (sticky ``/tmp`` keeps a trusted user's file in place). None when only they could."""
    allowed = {0, *trusted_uids}
    try:
        dfd, _name, _here, chain = _walk(str(path), links_from=allowed)
    except OSError as exc:  # UnsafeLocation included: a planted link, a directory that cannot be walked
        return str(exc)
    os.close(dfd)
    held = [d.uid for d in chain[1:]] + [
        owner
    ]  # what each directory holds on the way (approximately, past links)
    for d, child in zip(chain, held, strict=True):
        if d.uid not in allowed:
            return f"directory {d.path} is owned by UID {d.uid}"
        if d.mode & WRITABLE_BY_OTHERS and not (d.mode & stat.S_ISVTX and child in allowed):
            return f"directory {d.path} is writable by its group or others (mode {d.mode:04o})"
    return None


def creatable_by_others(path: Path | str, trusted_uids: Collection[int]) -> list[str]:
    """Who other than root, this user and ``trusted_uids`` could create the absent file at ``path``
    (``EnvironmentFile=-``) before it is read; a missing directory is judged by the nearest existing one.
    Empty when only they could; raises UnsafeLocation for what cannot be walked."""
    target = str(path)
    seen: list[DirFacts] = []
    for _ in range(4096):  # each round starts at a shorter, physical path
        try:
            dfd, _name, _here, chain = _walk(
                target, missing_last=True, links_from={os.geteuid(), *trusted_uids}
            )
        except _Missing as exc:
            seen += exc.visited
            target = str(exc.filename)
            continue
        except FileNotFoundError:
            raise UnsafeLocation(f"{path}: cannot walk the directories on the way") from None
        except UnsafeLocation:
            raise
        except OSError as exc:
            why = exc.strerror or exc
            raise UnsafeLocation(f"{path}: cannot open a directory on the way: {why}") from None
        os.close(dfd)
        dirs = {d.path: d for d in [*seen, *chain]}
        facts = FileFacts(str(path), 0, 0, 0, 0, 0, chain=tuple(dirs.values()))
        return chain_problems(facts, {os.geteuid(), *trusted_uids})
    raise UnsafeLocation(f"{path}: too many missing directories on the way")


class UntrustedFile(UnsafeLocation):
    """A file the verdict would trust that someone else could have written; the message names it."""


def read_trusted_file(
    path: Path | str,
    max_bytes: int,
    *,
    what: str = "file",
    trusted_uids: Collection[int] | None = None,
    names: bool = False,
) -> bytes:
    """:func:`read_guarded` plus :func:`chain_problems` for the reading user (and root, and
    ``trusted_uids``); UntrustedFile names the file and the owner or directory nearest it that fails.
    ``names``: its words may name other files (an environment file): :func:`named_by` its owner."""
    uids = {os.geteuid(), *(trusted_uids or ())}
    data, facts = read_guarded(path, max_bytes, what=what, links_from=uids)
    problems = chain_problems(facts, uids)
    if problems:  # the problem nearest the file says most; the others are above it
        extra = f" (and {len(problems) - 1} more above it)" if len(problems) > 1 else ""
        raise UntrustedFile(f"{path}: not trusted as a {what}: {problems[-1]}{extra}")
    if names:
        named_by(facts.uid, f"the {what} {path}")
    return data
