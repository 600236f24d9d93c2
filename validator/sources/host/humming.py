"""Evidence about humming-kernels as the *service user's* server will see it, without importing it.

Humming JIT-compiles MoE kernels on first use; unwritable cache directories fail the first requests deep in
CUDA graph capture. Defaults as humming-kernels 0.1.19 ``humming/utils/jit.py``: ``HUMMING_CACHE_DIR`` and
``HUMMING_TMP_DIR`` verbatim, else under the server user's ``~/.humming/``; created on demand, so a missing
one is fine when its nearest ancestor is writable.
"""

from __future__ import annotations

import ast
import os
import pwd
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from validator.bounded_files import look, looks_like, names_in, read_below
from validator.errors import InputError
from validator.facts import HUMMING, LAUNCH, HummingFacts
from validator.sources.gathering import Gathering, Unreadable, preflight_source
from validator.sources.host.dists import find_dists
from validator.trusted_files import allows, in_namers_scope, look_unplanted, open_unplanted

DIST_NAME = "humming_kernels"  # normalized distribution name of ``humming-kernels``
CACHE_ENV = "HUMMING_CACHE_DIR"
TMP_ENV = "HUMMING_TMP_DIR"


class UnknownUser(LookupError):
    """The named service user does not exist here: whether it can write the cache cannot be judged, and
    saying "not writable" would send the operator to fix permissions instead of the name."""


def read_humming(
    env: Mapping[str, str],
    *,
    site_dirs: list[Path] | None,
    service_user: str | None,
    user_from: str = "--service-user",
) -> HummingFacts:
    """``env`` is the server's environment; ``site_dirs`` its interpreter's (None: this interpreter's).
    Raises ``UnknownUser`` when ``service_user`` (given by ``user_from``) does not exist on this host."""
    notes: list[str] = []
    dirs = site_dirs if site_dirs is not None else _own_site_dirs()
    found = find_dists(dirs, [DIST_NAME]).get(DIST_NAME)
    version = installed_version(dirs, notes, found)
    user = _user(service_user, notes)
    if service_user and user is None:
        raise UnknownUser(
            f"{user_from} {service_user!r} does not exist on this host: the cache's writability cannot be "
            "judged (create the user, fix the name, or run preflight on the server's host)"
        )
    home = _home(env, user, service_user)
    cache_dir = _configured(env, CACHE_ENV, home, "cache", notes)
    tmp_dir = _configured(env, TMP_ENV, home, "tmp", notes)
    gb10, gb10_detail = (
        gb10_bandwidth_safe(found[0].parent / "humming") if found and version is not None else (None, None)
    )
    return HummingFacts(
        installed=version is not None,
        version=version,
        cache_dir=cache_dir,
        cache_writable=writable_by(cache_dir, user),
        tmp_dir=tmp_dir,
        tmp_writable=writable_by(tmp_dir, user),
        cached_kernels=count_cached_kernels(cache_dir),
        service_user=service_user,
        note="; ".join(notes) or None,
        gb10_bandwidth_safe=gb10,
        gb10_bandwidth_detail=gb10_detail,
    )


_NVML_ERRORS = {"NVMLError", "NVMLError_NotSupported", "Exception", "BaseException"}
_QUERY = "NVML_CLOCK_MEM"
_MAX_ENTRIES = 20_000  # humming 0.1.19 has 77 Python files
_FILE_CAP = 2_000_000
# the modules that mention _QUERY are parsed (about 1 MB/s for dense code): humming 0.1.19's few are a
# few KB; 200 of another user's 2 MB modules took root's preflight 372 s (red team 19), 20,000 hours
_PARSE_CAP = 1_000_000
_READ_CAP = 64 * 1024 * 1024  # of all its modules (humming 0.1.19's: well under 1 MB)


class _OverRead(Exception):
    """The modules read so far are over ``_READ_CAP`` bytes: the scan stops, with no verdict."""


def gb10_bandwidth_safe(package: Path) -> tuple[bool | None, str]:
    """Whether the installed humming survives GB10's NVML, which has no memory clock: an unguarded
    ``nvmlDeviceGetMaxClockInfo(..., NVML_CLOCK_MEM)`` kills the engine at start (inclusionAI/humming#48).
    Read from the code, not the version: every query counts unless a ``try`` catches NVML's error or the
    function returns first for (12, 1). Returns (verdict, what the code showed); None if unreadable."""
    # each module read once from its directory's descriptor (bounded_files.read_below), never a walk per file;
    # only the modules that mention the query are parsed, at most _PARSE_CAP bytes of them in all
    parsed, read = [0], [0]

    def budgeted(data: bytes) -> list[tuple[str, str | None]] | str:
        read[0] += len(data)
        if read[0] > _READ_CAP:  # ends the walk: thousands of modules at the file cap are minutes of reading
            raise _OverRead
        if len(data) < _FILE_CAP and _QUERY.encode() in data:
            parsed[0] += len(data)
            if parsed[0] > _PARSE_CAP:
                return f"and the other modules that mention {_QUERY} are over {_PARSE_CAP} bytes together"
        return _module_queries(data)

    try:
        found = read_below(package, ".py", _FILE_CAP, budgeted, limit=_MAX_ENTRIES)
    except _OverRead:
        return None, f"humming's modules are over {_READ_CAP} bytes together, not read whole"
    if found.cut:  # a query in what was left would go unseen: no verdict from a part
        return None, f"humming's package holds over {_MAX_ENTRIES} entries, not read whole"
    if not found:
        return None, f"{package} holds no Python module"
    unguarded: list[str] = []
    guarded: list[str] = []
    for path, queries in found:
        rel = f"humming/{path.relative_to(package)}"
        if isinstance(queries, OSError):
            return None, f"{rel} could not be read ({queries.strerror or queries})"
        if isinstance(queries, str):
            return None, f"{rel} {queries}"
        for where, how in queries:
            (guarded if how else unguarded).append(f"{rel}:{where}" + (f": {how}" if how else ""))
    if unguarded:
        return False, f"{', '.join(unguarded[:3])} queries NVML's memory clock with no fallback"
    if guarded:
        return True, "; ".join(guarded[:3])
    return True, f"no module of humming queries NVML's memory clock ({len(found)} Python files read)"


def _module_queries(data: bytes) -> list[tuple[str, str | None]] | str:
    """The memory-clock queries of one module's first ``_FILE_CAP`` bytes, or why it cannot be judged."""
    if len(data) >= _FILE_CAP:  # a query past the cap would go unseen: no verdict from a part
        return f"is over {_FILE_CAP} bytes, not read whole"
    if _QUERY.encode() not in data:
        return []
    try:
        return _queries(ast.parse(data))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # nesting past the parser's limits
        return f"mentions {_QUERY} but is not valid Python"


def _queries(tree: ast.Module) -> list[tuple[str, str | None]]:
    """(``line in function``, how it is guarded or None) for every memory-clock query in the module."""
    last: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            last[stmt.name] = stmt
    out: list[tuple[str, str | None]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            scope: ast.AST = stmt
            name = stmt.name
        elif isinstance(stmt, ast.ClassDef | ast.Try | ast.If | ast.With):
            scope, name = stmt, getattr(stmt, "name", "module level")
        else:
            continue
        for call in _query_calls(scope):
            where = f"{call.lineno} in {name}"
            if scope is not last.get(name, scope):
                out.append((where, "replaced by a later definition of the same function"))
            else:
                out.append((where, _guard(scope, call)))
    return out


def _query_calls(scope: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(scope)
        if isinstance(n, ast.Call) and any(_names_query(a) for a in [*n.args, *(k.value for k in n.keywords)])
    ]


def _names_query(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == _QUERY) or (
        isinstance(node, ast.Name) and node.id == _QUERY
    )


def _guard(scope: ast.AST, call: ast.Call) -> str | None:
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Try)
            and any(_catches_nvml(h) for h in node.handlers)
            and any(call is n for stmt in node.body for n in ast.walk(stmt))
        ):
            return "inside a try that catches NVML's error"
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.If)
            and node.lineno < call.lineno
            and _mentions_sm121(node.test)
            and _returns(node.body)
        ):
            return f"returns at line {node.lineno} for compute capability (12, 1), before the query"
    return None


def _mentions_sm121(test: ast.expr) -> bool:
    for n in ast.walk(test):
        if isinstance(n, ast.Tuple) and [getattr(e, "value", None) for e in n.elts] == [12, 1]:
            return True
    return False


def _returns(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, ast.Return) for stmt in body)


def _catches_nvml(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "") for t in types}
    return bool(names & _NVML_ERRORS)


def _own_site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def installed_version(
    site_dirs: list[Path], notes: list[str], found: tuple[Path, str | None] | None
) -> str | None:
    """Version from ``found``, the first ``humming_kernels-*.dist-info/METADATA`` in ``site_dirs``
    (importlib.metadata's order), once its ``humming/`` package is there too."""
    if found is None:
        notes.append(
            "humming-kernels is not installed in " + (", ".join(map(str, site_dirs)) or "no site dir")
        )
        return None
    info, version = found
    if version is None:
        notes.append(f"{info}: no Version in METADATA")
        return None
    if not looks_like(info.parent / "humming" / "__init__.py", stat.S_ISREG, "humming's package"):
        notes.append(
            f"humming-kernels {version} is recorded in {info.parent} but its humming/ package is missing"
        )
        return None
    return version


def _user(service_user: str | None, notes: list[str]) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(service_user) if service_user else pwd.getpwuid(os.geteuid())
    except KeyError:
        notes.append(f"service user {service_user!r} does not exist on this host")
        return None


def _home(env: Mapping[str, str], user: pwd.struct_passwd | None, service_user: str | None) -> Path:
    """A named service user gets the home systemd gives it (``User=`` sets ``HOME``); otherwise the
    server inherits ``HOME`` from the environment."""
    if service_user and user is not None:
        return Path(user.pw_dir)
    if env.get("HOME"):
        return Path(env["HOME"])
    return Path(user.pw_dir) if user is not None else Path("/nonexistent")


def _configured(env: Mapping[str, str], var: str, home: Path, leaf: str, notes: list[str]) -> Path:
    value = env.get(var)
    if value is None:
        return home / ".humming" / leaf
    if not os.path.isabs(value):
        notes.append(
            f"{var}={value!r} is relative: humming uses it as given, from the server's working directory"
        )
    return Path(value)


def writable_by(path: Path, user: pwd.struct_passwd | None) -> bool:
    """Whether ``user`` can create files in ``path`` (or create ``path`` under its nearest existing
    ancestor). Ourselves: ``os.access``; another user: ownership and mode bits along the way."""
    if user is None:
        return False
    target = path
    while True:  # looked up as the launch's owners could (bounded_files.look): a file where they cannot
        try:  # look, there or not, leaves it unknown, never "not writable" only when it is there
            found = look(target, "humming's cache directory")
        except InputError:
            return False
        if found is not None:
            break
        if target.parent == target:
            return False
        target = target.parent
    if not stat.S_ISDIR(found.st_mode):
        return False
    if user.pw_uid == os.geteuid():  # from the walk, never asked again by name
        try:
            return look_unplanted(str(target), os.W_OK | os.X_OK) is not None
        except OSError:
            return False
    if _read_only_mount(target):
        return False
    if user.pw_uid == 0:
        return True
    groups = set(os.getgrouplist(user.pw_name, user.pw_gid))
    # every directory on the way must be searchable, the last one writable too
    for i, d in enumerate([target, *target.parents]):
        need_w = i == 0
        try:
            st = look(d, "humming's cache directory")
        except InputError:
            return False
        if st is None or not allows(st, user.pw_uid, groups, os.X_OK | (os.W_OK if need_w else 0)):
            return False
    return True


def _read_only_mount(path: Path) -> bool:
    try:
        if not in_namers_scope():
            return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
        fd = open_unplanted(str(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the directory walked
    except OSError:
        return False
    try:
        return bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)
    except OSError:
        return False
    finally:
        os.close(fd)


def count_cached_kernels(cache_dir: Path) -> int:
    """Compiled kernels: ``<cache>/<md5>/kernel.cubin`` (humming/jit/compiler.py); 0 = cold start."""
    try:  # listed as the launch's owners could list it (bounded_files.names_in), never as root for them
        names = names_in(cache_dir, "humming's cache directory")
        return sum(1 for n in names if _is_file(cache_dir / n / "kernel.cubin"))
    except (InputError, OSError):
        return 0


def _is_file(path: Path) -> bool:
    found = look(path, "a cached kernel")
    return found is not None and stat.S_ISREG(found.st_mode)


@preflight_source(HUMMING, 30, needs=(LAUNCH,))
def gather(g: Gathering) -> None:
    """humming-kernels as the server's interpreter finds it, read only with that interpreter's site
    directories: without the server's environment, this process's packages prove nothing."""
    if g.hidden_install is not None:
        raise Unreadable(g.hidden_install)
    sg = g.sglang
    if sg.root is None:
        return
    user_from = "--service-user" if g.inputs.service_user else "the unit's User="
    try:
        g.facts.humming = read_humming(
            g.launch.env, site_dirs=sg.site_dirs or None, service_user=g.service_user, user_from=user_from
        )
    except (OSError, UnknownUser) as exc:
        raise Unreadable(str(exc)) from None
