"""FlashInfer as the server will load it: versions, and whether the CUTLASS MoE kernels are precompiled.

On GB10 the ``flashinfer_mxfp4`` path JIT-compiles ``fused_moe_120`` on first use, which while the weights
load has OOM-killed Sparks. Found where the server looks (``flashinfer/jit/env.py``, ``jit/core.py``): the
workspace cache (SGLang 0.5.23 defaults ``FLASHINFER_WORKSPACE_BASE`` to ``SGLANG_CACHE_DIR``), the package's
AOT data or ``flashinfer-jit-cache``, for GB10's archs only. What a cubin or jit-cache package of another
version does is read from the installed ``jit/env.py``, never assumed (0.6.x raises, 0.7.x ignores and
downloads or JIT-compiles; ``tests/test_flashinfer_releases.py``).
"""

from __future__ import annotations

import ast
import stat
from collections.abc import Mapping
from pathlib import Path

from validator.bounded_files import glob_walked, look, looks_like, names_in, read_head
from validator.errors import InputError
from validator.facts import FLASHINFER, HOST, LAUNCH, FlashInferFacts
from validator.sources.gathering import Gathering, Unreadable, preflight_source
from validator.sources.host.dists import find_dists

MODULE = "fused_moe_120"  # flashinfer's SM120-family CUTLASS fused-MoE module (sm_120 / sm_121)
BASE_ENV = "FLASHINFER_WORKSPACE_BASE"
SGLANG_CACHE_ENV = "SGLANG_CACHE_DIR"
SGLANG_CACHE_DEFAULT = "~/.cache/sglang"
VERSION_CHECK_ENV = "FLASHINFER_DISABLE_VERSION_CHECK"
_SO = f"{MODULE}/{MODULE}.so"


def _expand(path: str, home: Path) -> Path:
    """``os.path.expanduser`` as the server process would do it, with ``home`` as its ``~``."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:] if len(path) > 1 else home
    return Path(path)


def workspace_base(env: Mapping[str, str], home: Path, sglang_redirects: bool | None) -> tuple[Path, str]:
    """(the base FlashInfer appends ``.cache/flashinfer`` to, how it was derived)."""
    if env.get(BASE_ENV):
        return Path(env[BASE_ENV]), f"{BASE_ENV}={env[BASE_ENV]}"
    if sglang_redirects:
        raw = env.get(SGLANG_CACHE_ENV) or SGLANG_CACHE_DEFAULT
        return _expand(raw, home), f"SGLang sets {BASE_ENV} to {SGLANG_CACHE_ENV} ({raw})"
    return home, f"{BASE_ENV} unset: the server's home {home}"


def _sm12x(arch_dir: str) -> bool:
    """An arch directory name (``121a``, ``120f``, ``90a_120f``) that includes the sm_12x family."""
    return any(part.startswith(("120", "121")) for part in arch_dir.split("_"))


def _is(path: Path, test: int) -> bool:
    """Whether what stands at ``path`` is of file type ``test`` (``stat.S_IFDIR``, ``S_IFREG``), looked up
    as the launch's owners could (``bounded_files.look``: where they could not look, nothing is)."""
    try:
        found = look(path, "FlashInfer's cache")
    except InputError:
        return False
    return found is not None and stat.S_IFMT(found.st_mode) == test


def _subdirs(path: Path) -> list[Path]:
    """The directories in ``path``, listed as the launch's owners could list it (``names_in``): the cache
    directory is the launch environment's to name, never listed as root for another user."""
    try:
        names = names_in(path, "FlashInfer's cache directory")
    except InputError:
        return []
    return sorted(path / n for n in names if _is(path / n, stat.S_IFDIR))


def _jit_kernels(cache_dir: Path, version: str) -> list[Path]:
    archs = [p for p in _subdirs(cache_dir / version) if _sm12x(p.name)]
    return [so for a in archs if _is(so := a / "cached_ops" / _SO, stat.S_IFREG)]


def _aot_kernels(site_dirs: list[Path], version: str | None, jit_cache_version: str | None) -> list[Path]:
    """AOT builds the server would load before any JIT: inside the flashinfer package, or from
    flashinfer-jit-cache (``jit_cache_version`` None: not installed, or not one the release accepts)."""
    found: list[Path] = []
    for d in site_dirs:  # the interpreter's own words (another user's, for their launch): walked
        so = d / "flashinfer" / "data" / "aot" / _SO
        if _is(so, stat.S_IFREG):
            found.append(so)
            break
    if jit_cache_version and version:
        for d in site_dirs:
            for depth in ("", "*/", "*/*/"):
                pattern = d / "flashinfer_jit_cache" / f"{depth}{_SO}"
                try:
                    matched = glob_walked(str(pattern), "FlashInfer's cache")
                except InputError:
                    continue
                found += [Path(p) for p in matched if _is(Path(p), stat.S_IFREG)]
            if found:
                break
    return found


ENV_PY = "flashinfer/jit/env.py"
_ENV_CAP = 2 << 20  # the module is about 16 KB in 0.7.4


def _env_tree(site_dirs: list[Path]) -> ast.Module | None:
    """The installed FlashInfer's ``jit/env.py``, parsed (None: not there or not readable)."""
    for d in site_dirs:
        path = d / ENV_PY
        if looks_like(path, stat.S_ISREG, "FlashInfer's jit/env.py"):  # True where refused: the read says why
            try:
                return ast.parse(read_head(path, _ENV_CAP))
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                return None
    return None


def _mismatch(tree: ast.Module | None, functions: tuple[str, ...], checks: tuple[str, ...]) -> str | None:
    """What the first of ``functions`` env.py defines does when a companion package's version differs:
    "ignored" when every comparison in it (a ``raise``, or a call to one of ``checks``) sits in a ``try``
    that catches ``RuntimeError``; "raises" when one does not; None when it holds neither."""
    if tree is None:
        return None
    defined = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    fn = next((defined[name] for name in functions if name in defined), None)
    if fn is None:
        return None
    caught: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("RuntimeError", "Exception") for h in node.handlers
        ):
            caught |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    compares = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Raise)
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in checks)
    ]
    if not compares:
        return None
    return "ignored" if all(id(n) in caught for n in compares) else "raises"


def cubin_mismatch(site_dirs: list[Path]) -> str | None:
    """What the installed FlashInfer's ``_get_cubin_dir`` does with a flashinfer-cubin of another version:
    "raises" at import (0.6.x), "ignored" with cubins downloaded on demand (0.7.x); None: not readable."""
    return _mismatch(_env_tree(site_dirs), ("_get_cubin_dir",), ("_check_cubin_version",))


def jit_cache_mismatch(site_dirs: list[Path]) -> str | None:
    """What it does with a flashinfer-jit-cache of another version: 0.6.x's ``_get_aot_dir`` raises at
    import; 0.7.x's ``_get_aot_providers`` ignores the shim (the kernels are JIT-compiled instead)."""
    return _mismatch(
        _env_tree(site_dirs),
        ("_get_aot_dir", "_get_aot_providers"),
        ("_check_jit_cache_version", "_check_jit_cache_provider_version"),
    )


def jit_cache_matches(jit_cache_version: str, version: str, behaviour: str | None) -> bool:
    """Whether the release accepts that flashinfer-jit-cache: 0.7.x the same version or it with a CUDA
    suffix (``0.7.2+cu130``); 0.6.x any version that starts with its own (``startswith``)."""
    if behaviour == "ignored":
        return jit_cache_version == version or jit_cache_version.startswith(f"{version}+")
    return jit_cache_version.startswith(version)


def read_flashinfer(
    env: Mapping[str, str],
    *,
    site_dirs: list[Path],
    home: Path,
    sglang_redirects: bool | None,
) -> FlashInferFacts:
    """``env`` is the server's environment, ``site_dirs`` its interpreter's, ``home`` its user's home."""
    dists = find_dists(
        site_dirs, ("flashinfer-python", "flashinfer", "flashinfer-cubin", "flashinfer-jit-cache")
    )
    python = dists.get("flashinfer_python") or dists.get("flashinfer")
    cubin = dists.get("flashinfer_cubin")
    jit_cache = dists.get("flashinfer_jit_cache")
    version = python[1] if python else None
    base, rule = workspace_base(env, home, sglang_redirects)
    cache_dir = base / ".cache" / "flashinfer"
    notes: list[str] = []
    jit_cache_refused: str | None = None
    kernels: list[Path] = []
    elsewhere: list[Path] = []
    if python is None:
        where = ", ".join(map(str, site_dirs)) or "no site dir"
        notes.append(f"flashinfer-python is not installed in {where}")
    elif version is None:
        notes.append(f"{python[0]}: no Version in METADATA")
    else:
        jit_behaviour = jit_cache_mismatch(site_dirs) if jit_cache and jit_cache[1] else None
        accepted = (
            jit_cache is not None
            and bool(jit_cache[1])
            and jit_cache_matches(str(jit_cache[1]), version, jit_behaviour)
        )
        if jit_cache is not None and jit_cache[1] and not accepted:
            jit_cache_refused = jit_behaviour or "unknown"
        kernels = _aot_kernels(site_dirs, version, jit_cache[1] if accepted and jit_cache else None)
        kernels += _jit_kernels(cache_dir, version)
        sglang_default = _expand(SGLANG_CACHE_DEFAULT, home) / ".cache" / "flashinfer"
        others = {home / ".cache" / "flashinfer", sglang_default}
        for other in sorted(others - {cache_dir}):
            elsewhere += _jit_kernels(other, version)
        stale = [p.name for p in _subdirs(cache_dir) if p.name != version]
        for old in stale[:8]:
            elsewhere += _jit_kernels(cache_dir, old)
    return FlashInferFacts(
        python_version=version,
        cubin_version=cubin[1] if cubin else None,
        jit_cache_version=jit_cache[1] if jit_cache else None,
        cache_dir=cache_dir,
        cache_dir_rule=rule,
        kernels=kernels,
        elsewhere=elsewhere,
        version_check_disabled=bool(env.get(VERSION_CHECK_ENV)),
        cubin_mismatch=cubin_mismatch(site_dirs) if cubin and python and cubin[1] != version else None,
        jit_cache_mismatch=jit_cache_refused,
        note="; ".join(notes) or None,
    )


def _flashinfer_path(g: Gathering) -> bool:
    """FlashInfer's MoE kernels matter only on the flashinfer_mxfp4 path ('auto' resolves to it here)."""
    return g.installed() and g.launch.args.get("moe_runner_backend") in ("flashinfer_mxfp4", "auto")


@preflight_source(FLASHINFER, 60, needs=(LAUNCH, HOST), applies=_flashinfer_path)
def gather(g: Gathering) -> None:
    """FlashInfer where the server's interpreter finds it, its cache where the server looks (the named
    account's home, else the launch environment's HOME)."""
    launch, sg, host = g.launch, g.sglang, g.facts.host
    host_home = host.home if host is not None else None
    home = host_home if g.service_user or not launch.env.get("HOME") else Path(launch.env["HOME"])
    try:
        g.facts.flashinfer = read_flashinfer(
            launch.env,
            site_dirs=sg.site_dirs,
            home=home or Path("/nonexistent"),
            sglang_redirects=sg.redirects_flashinfer_cache,
        )
    except OSError as exc:
        raise Unreadable(str(exc)) from None
