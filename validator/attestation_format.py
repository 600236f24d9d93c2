"""The attestation document: its one definition, where it lives, how it is written, and when to trust it.

The in-process plugin (``validator.plugin``) builds it inside each SGLang scheduler process; the simulator
builds the same document for its simulated server; ``check`` and the sidecar validate what they read
against these same dataclasses (``validator.sources.attestation`` runs pydantic over them). Nothing else
defines the schema string, the location rules or the writer. Standard library only: the plugin runs inside
SGLang, where importing pydantic (or anything heavy) is not ours to do.

Location (contract v2, "Attestation location and trust"): ``$SPARK_VALIDATE_ATTESTATION``, else
``$RUNTIME_DIRECTORY/attestation.json`` (systemd ``RuntimeDirectory=``), else
``/run/spark-validate/attestation.json`` where that can be created, else
``$XDG_RUNTIME_DIR/spark-validate/attestation.json``; never a shared directory such as ``/tmp``.

Writing: the directory is created 0700 (0750 with ``$SPARK_VALIDATE_ATTESTATION_GROUP``) and opened with
``O_NOFOLLOW``; a directory this process does not own, or that its group or others can write, is refused
(issue 12 item 1: a pre-created ``/tmp/spark-validate`` let a local user swap the temporary file for a
symlink and have the server's user ``chmod`` any of its files to 0644). The temporary file is created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to the opened directory, its mode set with ``fchmod`` on the open
descriptor (never by name), fsync'd, renamed over the target inside the same directory descriptor, and the
directory fsync'd. Nothing here opens the target path itself, so a FIFO planted there cannot block the
server's start-up.

Trust (the ``attestation.trust`` check): :func:`binding_problems` says why a document read from disk does not
describe the server behind a URL: wrong owner or mode, a writer that is not running (PID and its /proc start
time, always compared, whatever the document's hostname or nulls say), another host, another HTTP host or
port than the URL and ``/server_info``, another SGLang build, another weight load. It is pure, so the live
job can refuse an untrusted document as evidence and the check can report the same reasons.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

# grp, ipaddress, secrets and urllib are imported where used: preflight imports this module (through
# validator.facts) and never writes or judges an attestation.

SCHEMA: Final = "spark-validate.attestation/v2"  # also the Literal of Attestation.schema below
ENV_PATH = "SPARK_VALIDATE_ATTESTATION"
ENV_GROUP = "SPARK_VALIDATE_ATTESTATION_GROUP"  # a group name or GID allowed to read the directory
FILE_NAME = "attestation.json"
RUN_DIR = Path("/run/spark-validate")
XDG_SUBDIR = "spark-validate"
MAX_BYTES = 256 * 1024  # a real document is about 3 KB
MAX_DEPTH = 12  # the document nests 5 deep; a reader refuses deeper
# PID start times come from clock ticks (10 ms) on both sides; a second covers rounding and clock steps.
START_TIME_TOLERANCE_S = 1.0
# Weight-load seconds are the same float on both sides for one run; a previous run differs by far more.
LOAD_WEIGHT_TOLERANCE_S = 0.05
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH

HookStatus = Literal["ran", "not_reached", "failed"]
RAN: HookStatus = "ran"
NOT_REACHED: HookStatus = "not_reached"
FAILED: HookStatus = "failed"
HOOK_NAMES = ("model_loaded", "init_lm_head")
ENV_KEYS = (
    "SGLANG_ENABLE_FP8_LM_HEAD",
    "SPARK_VALIDATE_SHARE_LM_HEAD",
    "SGLANG_PLUGINS",
    "HUMMING_CACHE_DIR",
    "HUMMING_TMP_DIR",
)


class _Strict:
    """Base of every record of the document, for the reader's rules: pydantic reads ``__pydantic_config__``
    on standard-library dataclasses (through their bases), so the reader is strict (no "1" for 1, no 1 for
    true, no NaN or infinity: NaN compares false with everything, so a NaN start time would match any
    process) and rejects unknown fields, without this module importing pydantic."""

    __pydantic_config__: ClassVar[Any] = {"strict": True, "extra": "forbid", "allow_inf_nan": False}


@dataclass(frozen=True)
class Writer(_Strict):
    """The tool that wrote the document and its version (a reader can tell which writer's rules apply)."""

    tool: str
    version: str


@dataclass(frozen=True)
class Process(_Strict):
    """The scheduler process that wrote the document: what binds the file to one server run."""

    pid: int
    start_time: float | None  # epoch seconds, from /proc/<pid>/stat; None only where /proc is absent
    hostname: str
    uid: int  # effective UID of the writer: the file's owner must be it (or root)
    tp_rank: int | None
    tp_size: int | None
    load_weight_s: float | None = None  # target + draft weight-load seconds (ModelRunner.weight_load_time)


@dataclass(frozen=True)
class Server(_Strict):
    """The HTTP address SGLang was told to serve on (``ServerArgs.host``/``port``), for binding to a URL."""

    host: str | None
    port: int | None


@dataclass(frozen=True)
class SGLangInfo(_Strict):
    """The SGLang build the scheduler process runs: its version; whether its ``Envs`` declares
    ``SGLANG_ENABLE_FP8_LM_HEAD`` (the Ling-3.0 patch: stock 0.5.23 ignores the variable silently); whether
    the NEXTN draft class has ``set_lm_head_from_target``. None where the process could not tell."""

    version: str | None
    declares_fp8_lm_head: bool | None
    nextn_has_set_lm_head_from_target: bool | None


@dataclass(frozen=True)
class LmHead(_Strict):
    """One model's LM head as loaded: module and ``quant_method`` classes, the weight's dtype and shape, and
    whether FP8 scales are attached (a head read as BF16 while holding FP8 codes is the integration trap)."""

    module_class: str | None
    quant_method: str | None
    weight_dtype: str | None
    weight_shape: list[int] | None
    has_weight_scale: bool
    has_input_scale: bool


@dataclass(frozen=True)
class Moe(_Strict):
    """A model's MoE layers, counted by quant method class and by the runner backend each layer really got
    (counts rather than one entry per layer, so the document stays a few KB)."""

    layers: int
    quant_methods: dict[str, int]
    runner_backends: dict[str, int]


@dataclass(frozen=True)
class ModelInfo(_Strict):
    """What the plugin saw of one loaded model, the target or the draft: its class, LM head and MoE layers."""

    model_class: str | None
    lm_head: LmHead | None
    moe: Moe | None


@dataclass(frozen=True)
class LmHeadSharing(_Strict):
    """How the draft got its LM head, as the draft worker's set-up left it.

    ``worker`` names the draft worker class whose set-up was observed (``EagleDraftWorker``,
    ``DSparkWorkerV2``, ...). DSpark's worker shares the target's module by construction
    (``attach_shared_modules``) unless the draft declares ``uses_own_vocab_modules``, in which case the
    draft's own head is expected and ``shared_module`` is False for a healthy server: ``own_vocab_modules``
    tells the two apart.
    """

    shared_module: bool | None
    shared_weight: bool | None
    remedy_applied: bool
    worker: str | None = None
    own_vocab_modules: bool | None = None  # DSpark: the draft model's uses_own_vocab_modules
    shared_embed: bool | None = None  # DSpark: the draft's embed_tokens is the target's module


@dataclass(frozen=True)
class Attestation(_Strict):
    """Schema ``spark-validate.attestation/v2``: one scheduler process's account of its loaded models."""

    schema: Literal["spark-validate.attestation/v2"]
    written_at: str
    writer: Writer
    process: Process
    server: Server
    sglang: SGLangInfo
    env: dict[str, str | None]
    target: ModelInfo | None
    draft: ModelInfo | None
    lm_head: LmHeadSharing
    hooks: dict[str, HookStatus]
    errors: list[str] = field(default_factory=list)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def to_json(doc: Attestation) -> bytes:
    """The document as written: indented JSON, keys in definition order, one trailing newline."""
    return (json.dumps(dataclasses.asdict(doc), indent=2) + "\n").encode()


# --- location ----------------------------------------------------------------------------------------


class UnsafeLocation(OSError):
    """The attestation's directory or file cannot be written (or read) safely; the message says why."""


def _run_dir_usable(run_dir: Path) -> bool:
    """``/run/spark-validate`` "where that can be created": it exists as our own directory, or /run lets us
    create it. A directory someone else owns there is not ours to use (the writer would refuse it)."""
    try:
        st = os.lstat(run_dir)
    except FileNotFoundError:
        return os.access(run_dir.parent, os.W_OK | os.X_OK)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def default_path(env: Mapping[str, str] | None = None, *, run_dir: Path | None = None) -> Path | None:
    """Where rank 0 writes, by the contract's order; None when no private runtime directory exists (the
    plugin then writes nothing rather than fall back to a shared directory)."""
    env = os.environ if env is None else env
    run_dir = RUN_DIR if run_dir is None else run_dir
    explicit = env.get(ENV_PATH, "").strip()
    if explicit:
        return Path(explicit)
    runtime = env.get("RUNTIME_DIRECTORY", "").split(":")[0].strip()  # systemd joins several with ':'
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / FILE_NAME
    if _run_dir_usable(run_dir):
        return run_dir / FILE_NAME
    xdg = env.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / XDG_SUBDIR / FILE_NAME
    return None


def rank_path(base: Path, tp_rank: int | None) -> Path:
    """TP rank 0 writes ``base``; rank N > 0 writes ``<stem>.tp<N>.json`` beside it (ranks never share one
    file)."""
    if not tp_rank:
        return base
    return base.with_name(f"{base.stem}.tp{tp_rank}{base.suffix or '.json'}")


def attestation_path(tp_rank: int | None = 0, env: Mapping[str, str] | None = None) -> Path | None:
    base = default_path(env)
    return None if base is None else rank_path(base, tp_rank)


def configured_gid(env: Mapping[str, str] | None = None) -> int | None:
    """The group of ``$SPARK_VALIDATE_ATTESTATION_GROUP`` (a name or a GID), None when unset."""
    env = os.environ if env is None else env
    raw = env.get(ENV_GROUP, "").strip()
    if not raw:
        return None
    if raw.isdigit():
        return int(raw)
    import grp

    try:
        return grp.getgrnam(raw).gr_gid
    except KeyError:
        raise UnsafeLocation(f"{ENV_GROUP}={raw!r}: no such group") from None


# --- writing -----------------------------------------------------------------------------------------

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _dir_problem(st: os.stat_result, *, uid: int) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != uid:
        return f"is owned by UID {st.st_uid}, not by this process (UID {uid})"
    if st.st_mode & _WRITABLE_BY_OTHERS:
        return f"is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_private_dir(directory: Path, *, gid: int | None = None) -> int:
    """A descriptor on ``directory``, created 0700 (0750 and group ``gid``) when missing, after checking on
    the descriptor that this process owns it and nobody else can write it. The caller closes it."""
    uid = os.geteuid()
    created = False
    try:
        os.mkdir(directory, 0o700)  # never more than 0700 while it is being created
        created = True
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(directory.parent, mode=0o700, exist_ok=True)
        os.mkdir(directory, 0o700)
        created = True
    try:
        dfd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except OSError as exc:
        raise UnsafeLocation(f"{directory}: cannot open the directory: {exc.strerror or exc}") from None
    try:
        problem = _dir_problem(os.fstat(dfd), uid=uid)
        if problem is not None:
            raise UnsafeLocation(f"{directory} {problem}; refusing to write the attestation there")
        if created:  # mkdir's mode went through the umask: set exactly what the contract says
            if gid is not None:
                os.fchown(dfd, -1, gid)
            os.fchmod(dfd, 0o750 if gid is not None else 0o700)
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def write_document(path: Path, doc: Attestation | bytes, *, gid: int | None = None) -> None:
    """Atomically replace ``path`` with ``doc``: a reader sees the old document or the new one, never half
    of one, and no name in the directory is ever followed, opened or chmod'ed except our own new file."""
    data = doc if isinstance(doc, bytes) else to_json(doc)
    import secrets

    dfd = open_private_dir(path.parent, gid=gid)
    try:
        tmp = f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if gid is not None:
                    os.fchown(fd, -1, gid)
                os.fchmod(fd, 0o640 if gid is not None else 0o644)
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
    finally:
        os.close(dfd)


# --- reading: file facts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FileFacts:
    """What the reader saw of the file and its directory (on the opened descriptors, not by name)."""

    path: str
    uid: int
    mode: int  # permission bits
    size: int
    dir_uid: int
    dir_mode: int


def read_file(path: Path, max_bytes: int = MAX_BYTES) -> tuple[bytes, FileFacts]:
    """The bytes of a regular, non-symlink file of at most ``max_bytes`` in a directory, with what the
    reader saw of both. Never blocks (a FIFO opens with ``O_NONBLOCK`` and is refused on ``fstat``).

    Raises FileNotFoundError when nothing is there and UnsafeLocation for anything else it refuses (a FIFO,
    a device, a symlink, a file over the cap, a file or directory others can write)."""
    where = str(path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY | _O_DIRECTORY | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnsafeLocation(f"{path.parent}: cannot open the directory: {exc.strerror or exc}") from None
    try:
        dst = os.fstat(dfd)
        if dst.st_mode & _WRITABLE_BY_OTHERS:
            raise UnsafeLocation(
                f"{path.parent} is writable by its group or others (mode {stat.S_IMODE(dst.st_mode):04o}): "
                "anyone could have written the attestation there"
            )
        try:
            lst = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise UnsafeLocation(f"{where}: cannot stat: {exc.strerror or exc}") from None
        if not stat.S_ISREG(lst.st_mode):
            raise UnsafeLocation(f"{where} is {_kind(lst.st_mode)}, not a regular file")
        try:
            flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
            fd = os.open(path.name, flags, dir_fd=dfd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise UnsafeLocation(f"{where}: cannot open: {exc.strerror or exc}") from None
        try:
            st = os.fstat(fd)  # the file actually opened, whatever was swapped in since the stat
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeLocation(f"{where} is {_kind(st.st_mode)}, not a regular file")
            if st.st_mode & _WRITABLE_BY_OTHERS:
                raise UnsafeLocation(
                    f"{where} is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
                )
            if st.st_size > max_bytes:
                raise UnsafeLocation(f"{where} is {st.st_size} bytes, over the {max_bytes}-byte cap")
            chunks: list[bytes] = []
            total = 0
            while total <= max_bytes:
                chunk = os.read(fd, max_bytes + 1 - total)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            if total > max_bytes:
                raise UnsafeLocation(f"{where} grew past the {max_bytes}-byte cap while being read")
            facts = FileFacts(
                path=where,
                uid=st.st_uid,
                mode=stat.S_IMODE(st.st_mode),
                size=total,
                dir_uid=dst.st_uid,
                dir_mode=stat.S_IMODE(dst.st_mode),
            )
            return b"".join(chunks), facts
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def _kind(mode: int) -> str:
    kinds = {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
        stat.S_IFDIR: "a directory",
        stat.S_IFLNK: "a symbolic link",
    }
    return kinds.get(stat.S_IFMT(mode), "not a regular file")


# --- trust -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessFacts:
    """The attested PID as this host's /proc shows it now."""

    pid: int
    running: bool
    start_time: float | None
    uid: int | None  # effective UID of the running process


@dataclass(frozen=True)
class AttestationTrust:
    """Everything ``attestation.trust`` judges: the validated document and what was observed around it."""

    document: Attestation
    file: FileFacts
    process: ProcessFacts
    hostname: str  # this host's name, where the reader ran


_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_address(url: str) -> tuple[str | None, int | None]:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname, port


def _hosts_match(bound: str, url_host: str) -> bool:
    if bound in _WILDCARD_HOSTS:
        return True  # bound to every interface: any address of this host reaches it
    if bound.lower() == url_host.lower():
        return True
    return _is_loopback(bound) and _is_loopback(url_host)


def _server_load_weight(server_info: Mapping[str, Any]) -> float | None:
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        st = states[0].get("startup_time")
        if isinstance(st, dict):
            value = st.get("load_weight")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None


def binding_problems(
    trust: AttestationTrust, url: str | None, server_info: Mapping[str, Any] | None
) -> list[str]:
    """Why the document does not prove anything about the server at ``url``; empty when it does.

    Every test runs, whatever the document says about itself: a null or a foreign hostname is a problem,
    never a reason to skip a test (issue 12 item 2: a file with a foreign hostname and nulls made a broken
    server pass)."""
    doc, file, proc = trust.document, trust.file, trust.process
    problems: list[str] = []
    # Who wrote it: the owner of the file and of its directory must be the server's user or root.
    server_uid = proc.uid
    allowed = {0} | ({server_uid} if server_uid is not None else set())
    if file.uid not in allowed:
        problems.append(
            f"the file is owned by UID {file.uid}, neither the server's user (UID {server_uid}) nor root"
        )
    if file.dir_uid not in allowed:
        problems.append(
            f"its directory is owned by UID {file.dir_uid}, neither the server's user (UID {server_uid}) "
            "nor root"
        )
    if file.mode & _WRITABLE_BY_OTHERS or file.dir_mode & _WRITABLE_BY_OTHERS:
        problems.append(
            f"the file or its directory is writable by others ({file.mode:04o}, {file.dir_mode:04o})"
        )
    if doc.process.uid != file.uid and file.uid != 0:
        problems.append(
            f"written by UID {doc.process.uid} per the document, but the file is owned by UID {file.uid}"
        )
    # Which process: the PID must be running here, with the start time recorded, under the writer's UID.
    if doc.process.hostname != trust.hostname:
        problems.append(
            f"written on host {doc.process.hostname!r}, read on {trust.hostname!r}: run the check where the "
            "server runs (its PIDs must be visible)"
        )
    if not proc.running or proc.start_time is None:
        problems.append(f"the writing process (PID {doc.process.pid}) is not running on this host")
    elif doc.process.start_time is None:
        problems.append(f"the document records no start time for PID {doc.process.pid}")
    elif not abs(proc.start_time - doc.process.start_time) <= START_TIME_TOLERANCE_S:  # NaN: a mismatch
        problems.append(
            f"PID {doc.process.pid} now belongs to a process started at {proc.start_time:.2f}, not the "
            f"writer (started {doc.process.start_time:.2f})"
        )
    elif proc.uid is not None and proc.uid != doc.process.uid:
        problems.append(
            f"PID {doc.process.pid} runs as UID {proc.uid}, the document says UID {doc.process.uid}"
        )
    # Which server: the HTTP address the plugin recorded, against the URL and the server's own report.
    problems.extend(_address_problems(doc, url, server_info))
    if server_info is not None:
        problems.extend(_run_problems(doc, server_info))
    return problems


def _address_problems(doc: Attestation, url: str | None, server_info: Mapping[str, Any] | None) -> list[str]:
    bound_host, bound_port = doc.server.host, doc.server.port
    if bound_host is None or bound_port is None:
        return ["the document records no HTTP host and port for its server"]
    problems: list[str] = []
    url_host, url_port = _url_address(url) if url else (None, None)
    if url_host is None or url_port is None:
        problems.append(f"no URL to bind the document to ({url!r})")
    else:
        if url_port != bound_port:
            problems.append(f"written by a server on port {bound_port}, the URL is port {url_port}")
        if not _hosts_match(bound_host, url_host):
            problems.append(f"written by a server bound to {bound_host!r}, the URL names {url_host!r}")
    if server_info is None:
        problems.append("the server's /server_info is not available to bind the document to")
        return problems
    info_host, info_port = server_info.get("host"), server_info.get("port")
    if not isinstance(info_port, int) or isinstance(info_port, bool) or not isinstance(info_host, str):
        problems.append("/server_info does not report the server's host and port")
    elif (info_host, info_port) != (bound_host, bound_port):
        problems.append(
            f"written by a server on {bound_host}:{bound_port}, /server_info reports {info_host}:{info_port}"
        )
    return problems


def _run_problems(doc: Attestation, server_info: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    version = server_info.get("version")
    if version is not None and doc.sglang.version is not None and str(version) != doc.sglang.version:
        problems.append(f"written by SGLang {doc.sglang.version}, the server reports {version}")
    tp_size = server_info.get("tp_size")
    if isinstance(tp_size, int) and doc.process.tp_size is not None and tp_size != doc.process.tp_size:
        problems.append(f"written with tp_size {doc.process.tp_size}, the server reports {tp_size}")
    server_load = _server_load_weight(server_info)
    if (
        server_load is not None
        and doc.process.load_weight_s is not None
        and doc.process.tp_rank in (0, None)
        and not abs(server_load - doc.process.load_weight_s) <= LOAD_WEIGHT_TOLERANCE_S  # NaN: a mismatch
    ):
        problems.append(
            f"weights loaded in {doc.process.load_weight_s:.2f} s per the attestation, "
            f"{server_load:.2f} s per /server_info: another server run"
        )
    return problems
