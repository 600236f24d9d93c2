"""A warm fork-server ("zygote") for the tests' ``python -m validator ARGS`` children: the child is a real
process, started without an interpreter start or an import.

Why: most of the suite's CPU is the long tail of CLI children, and most of each child's CPU is the
interpreter's start and the imports (pydantic, httpx, structlog, prometheus_client, tree_sitter, the
validator itself), not the command. A zygote is a process that has imported all of that once; for each
command it forks, and the fork becomes the child.

What the child is, as a process: its own PID, a child of the test process (the zygote forks through an
intermediate that exits, and the test process is a child subreaper for that instant, so the kernel
reparents the child to it: ``Popen.wait``, exit statuses, signals, ``RUSAGE_CHILDREN`` are a real child's);
stdin, stdout and stderr are the caller's real descriptors, passed over a unix socket (``SCM_RIGHTS``);
the environment is replaced wholesale, the working directory, umask, ``sys.argv`` and ``sys.path[0]`` are
the command's; every other descriptor is closed; exit codes follow the interpreter's rules
(``SystemExit``, an uncaught exception is its traceback and 1, an uncaught ``KeyboardInterrupt`` dies of
SIGINT), after non-daemon threads and ``atexit`` functions. The validator's ``functools`` caches are
emptied first, as ``tests/support/in_process.py`` does for an in-process run.

What it is not, so such tests keep a real exec: ``/proc/PID/cmdline`` and ``environ`` are the zygote's;
``sys.modules`` holds every module of the validator and its libraries; the interpreter's start-up (the
import path, ``PYTHON*`` variables, the locale) happened once, for the zygote. A command is therefore
served only when the variables that shape the interpreter (``PYTHON*``, ``LC_*``, ``LANG``,
``LANGUAGE``, and the libraries' ``PYDANTIC_*``, ``PROMETHEUS_*``) equal a zygote's: one zygote per
distinct set, at most :data:`MAX_SERVERS` per test process. Anything else (another program, extra
descriptors, ``preexec_fn``, a new session, another user, a missing working directory, a working
directory holding a module the zygote imported from elsewhere) is exec'd as before.

Which tests may use it is decided in one place, tests/conftest.py (``WARM_CHILDREN``): tests whose
subject is the verdict, the exit code or the output. ``SPARK_VALIDATE_ZYGOTE=0`` turns it off.

Each zygote lives in a new private (0700) directory, answers only its parent (``SO_PEERCRED``), and
exits when its parent's end of a lifeline pipe closes; nothing is shared between xdist workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ENV_SWITCH = "SPARK_VALIDATE_ZYGOTE"
MAX_SERVERS = 3
_SHAPING_PREFIXES = ("PYTHON", "LC_", "PYDANTIC_", "PROMETHEUS_")
_SHAPING_NAMES = frozenset({"LANG", "LANGUAGE"})
_PR_SET_CHILD_SUBREAPER = 36
_HEADER = struct.Struct("!Q")
_START_TIMEOUT_S = 120.0
_SPAWN_TIMEOUT_S = 60.0


def interpreter_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` that shape an interpreter at its start or at an import."""
    return tuple(
        sorted((k, v) for k, v in env.items() if k in _SHAPING_NAMES or k.startswith(_SHAPING_PREFIXES))
    )


# ---- client: the test process ------------------------------------------------------------------------------

_opted_in = False
_lock = threading.Lock()


@contextlib.contextmanager
def opted_in(on: bool) -> Iterator[None]:
    """For the length of one test (tests/conftest.py): whether its ``python -m validator`` children may be
    forked from a zygote."""
    global _opted_in
    saved, _opted_in = _opted_in, on
    try:
        yield
    finally:
        _opted_in = saved


def enabled() -> bool:
    return _opted_in and os.environ.get(ENV_SWITCH, "1") != "0"


@dataclass
class _Server:
    proc: subprocess.Popen[bytes]
    directory: Path
    lifeline: int

    @property
    def socket_path(self) -> str:
        return str(self.directory / "sock")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.lifeline)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.directory, ignore_errors=True)


_servers: dict[tuple[tuple[str, str], ...], _Server | None] = {}
served = 0  # children this process got from a zygote (tests/test_zygote.py checks the zygote was used)


def _start(env: Mapping[str, str], dirty: Sequence[str] = ()) -> _Server | None:
    """A new zygote whose environment is ``env``; None where it does not come up (then children exec).
    ``dirty``: a validator command the zygote runs in its own process before it serves (tests/test_zygote.py
    proves with it that a child starts with empty caches whatever the zygote did)."""
    directory = Path(tempfile.mkdtemp(prefix="sv-zygote-"))
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    try:
        with (directory / "zygote.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.zygote", str(directory), str(read_end), *dirty],
                env=dict(env), cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                pass_fds=(read_end,),
            )  # fmt: skip
    finally:
        os.close(read_end)
    server = _Server(proc, directory, write_end)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], _START_TIMEOUT_S)
    if not ready or proc.stdout.readline() != b"ready\n":
        server.stop()
        return None
    return server


def _server_for(env: Mapping[str, str]) -> _Server | None:
    key = interpreter_key(env)
    if key not in _servers:
        if len(_servers) >= MAX_SERVERS:
            return None
        _servers[key] = _start(env)
    return _servers[key]


def stop_all() -> None:
    """Every zygote of this process stopped and reaped (its CPU counted as this process's children's)."""
    for server in _servers.values():
        if server is not None:
            server.stop()
    _servers.clear()


def _subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("zygote closed the connection")
        data += chunk
    return data


def _spawn(server: _Server, request: dict[str, Any], fds: Sequence[int]) -> int | None:
    """The PID of the command's child, now a child of this process; None where the zygote refused it."""
    body = json.dumps(request).encode()
    with _lock, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(_SPAWN_TIMEOUT_S)
        conn.connect(server.socket_path)
        _subreaper(True)
        try:
            socket.send_fds(conn, [_HEADER.pack(len(body))], list(fds))
            conn.sendall(body)
            (size,) = _HEADER.unpack(_recv_exact(conn, _HEADER.size))
            reply = json.loads(_recv_exact(conn, size))
        finally:
            _subreaper(False)
    pid = reply.get("pid")
    if not isinstance(pid, int):
        return None
    global served
    served += 1
    return pid


class ZygotePopen(subprocess.Popen[Any]):
    """``subprocess.Popen`` whose child comes from a zygote (or is exec'd, where the zygote refuses)."""

    def __init__(self, server: _Server, args: Sequence[str], **kwargs: Any) -> None:
        self._server = server
        super().__init__(list(args), **kwargs)

    def _execute_child(  # type: ignore[override]
        self, args: list[str], executable: Any, preexec_fn: Any, close_fds: bool, pass_fds: Any,
        cwd: Any, env: Any, startupinfo: Any, creationflags: Any, shell: bool,
        p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int, errread: int, errwrite: int,
        restore_signals: bool, gid: Any, gids: Any, uid: Any, umask: int, start_new_session: bool,
        process_group: int,
    ) -> None:  # fmt: skip
        plain = (
            executable is None and preexec_fn is None and close_fds and not pass_fds and not shell
            and gid is None and gids is None and uid is None and umask < 0 and not start_new_session
            and process_group == -1
        )  # fmt: skip
        where = os.fspath(cwd) if cwd is not None else os.getcwd()
        pid = None
        if plain and os.path.isdir(where):
            mask = os.umask(0o022)
            os.umask(mask)
            request = {
                "argv": list(args),
                "env": dict(os.environ if env is None else env),
                "cwd": os.path.abspath(where),
                "umask": mask,
            }
            fds = (
                p2cread if p2cread != -1 else 0,
                c2pwrite if c2pwrite != -1 else 1,
                errwrite if errwrite != -1 else 2,
            )
            with contextlib.suppress(OSError):
                pid = _spawn(self._server, request, fds)
        if pid is None:
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid,
                gids, uid, umask, start_new_session, process_group,
            )  # fmt: skip
            return
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]


def _validator_command(args: Sequence[str]) -> bool:
    return len(args) >= 3 and args[0] == sys.executable and args[1:3] == ["-m", "validator"]


def run(
    args: Sequence[str], *, env: Mapping[str, str], cwd: str | Path, timeout: float | None
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)``, its
    child forked from a zygote where this test opted in and the command allows it."""
    args = list(args)
    server = _server_for(env) if enabled() and _validator_command(args) else None
    if server is None:
        return subprocess.run(
            args, capture_output=True, text=True, env=dict(env), cwd=cwd, timeout=timeout, check=False
        )
    with ZygotePopen(
        server, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env), cwd=cwd
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            exc.stdout, exc.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
    assert code is not None
    return subprocess.CompletedProcess(args, code, stdout, stderr)


# ---- server: the zygote ------------------------------------------------------------------------------------

# Commands run once each, in throwaway forks, so that the zygote imports what they import lazily (a
# library's backend on first use); the zygote itself never runs a command.
_WARM_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("check", "--url", "http://127.0.0.1:1", "--format", "json", "--wait", "0", "--no-probe"),
    ("preflight", "--format", "json", "--launch-cmd", "python -m sglang.launch_server --model-path /m"),
    ("rules", "list"),
)


def _run_module(argv: Sequence[str]) -> int:
    """``python -m validator ARGV[3:]`` in this process, up to the status the interpreter would exit with
    (before its exit steps)."""
    import runpy
    import traceback

    sys.argv = ["validator", *argv[3:]]
    try:
        runpy.run_module("validator", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
        return 1
    return 0


def _run_command(argv: Sequence[str]) -> int:
    """:func:`_run_module`, then what the interpreter does at exit: wait for non-daemon threads, run the
    ``atexit`` functions, flush the standard streams (a failed flush is exit 120)."""
    import atexit

    code = _run_module(argv)
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120
    return code


def _reopen_stdio() -> None:
    """New ``sys.stdin``/``stdout``/``stderr`` over descriptors 0-2, made as the interpreter makes them at
    start (encoding and errors as the zygote's, which the same locale variables gave; line buffering from
    this descriptor's ``isatty``; stderr always line buffered)."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    made = []
    for fd, old in ((0, sys.__stdin__), (1, sys.__stdout__), (2, sys.__stderr__)):
        assert old is not None
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        buffer = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        line = fd == 2 or (fd == 1 and raw.isatty())
        wrapper = io.TextIOWrapper(
            buffer, encoding=old.encoding, errors=old.errors, newline="\n",
            line_buffering=line and not unbuffered, write_through=unbuffered and fd != 0,
        )  # fmt: skip
        made.append(wrapper)
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the command's descriptors, directory, environment and arguments, run it,
    and exit with its status; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.umask(int(request["umask"]))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()
        _reopen_stdio()
        sys.orig_argv[:] = list(request["argv"])
        from tests.support.in_process import _as_a_fresh_process

        _as_a_fresh_process()
        code = _run_command(request["argv"])
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    else:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code & 0xFF if code >= 0 else 1)


def _shadowed(cwd: str) -> str | None:
    """A module the zygote imported that a real interpreter started in ``cwd`` would import from there
    instead (``-m`` puts the working directory first on the import path)."""
    try:
        names = os.listdir(cwd)
    except OSError as exc:
        return f"cannot list {cwd}: {exc}"
    for entry in names:
        name = entry[:-3] if entry.endswith(".py") else entry
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if module is not None and (origin is None or not origin.startswith(os.path.join(cwd, entry))):
            return f"{cwd}/{entry} would shadow {name}"
    return None


def _serve_one(conn: socket.socket) -> None:
    header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
    try:
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if pid != os.getppid() or len(header) != _HEADER.size or len(fds) != 3:
            return
        (size,) = _HEADER.unpack(header)
        request = json.loads(_recv_exact(conn, size))
        refused = _shadowed(request["cwd"])
        if refused is None and threading.active_count() != 1:
            refused = "the zygote has threads"
        if refused is not None:
            reply: dict[str, Any] = {"refused": refused}
        else:
            reply = {"pid": _fork_child(request, fds)}
        body = json.dumps(reply).encode()
        conn.sendall(_HEADER.pack(len(body)) + body)
    finally:
        for fd in fds:
            os.close(fd)


def _fork_child(request: dict[str, Any], fds: list[int]) -> int:
    """Fork the command's child through an intermediate that exits, so that the child is reparented to the
    subreaper that asked (the test process); it starts once that has happened."""
    go_read, go_write = os.pipe()
    pid_read, pid_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(go_write)
            os.close(pid_read)
            child = os.fork()
            if child == 0:
                os.close(pid_write)
                os.read(go_read, 1)
                os.close(go_read)
                _become(request, fds)
            os.write(pid_write, str(child).encode())
        finally:
            os._exit(0)
    os.close(go_read)
    os.close(pid_write)
    os.waitpid(middle, 0)
    with os.fdopen(pid_read, "rb") as f:
        child = int(f.read())
    os.write(go_write, b"g")
    os.close(go_write)
    return child


def _harvest(argv: Sequence[str], scratch: str) -> set[str]:
    """The modules a command imports, run in a throwaway fork (output discarded, bounded)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.chdir(scratch)
            signal.alarm(30)
            with contextlib.suppress(BaseException):
                _run_command([sys.executable, "-m", "validator", *argv])
            os.write(write_end, "\n".join(sys.modules).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        names = f.read().decode().split("\n")
    os.waitpid(pid, 0)
    return {n for n in names if n and not n.endswith("__main__")}


def _warm() -> None:
    """Import the validator (every module), the simulator's and sidecar's server libraries, and what the
    usual commands import lazily; then freeze the heap, so that forks share it instead of copying it."""
    import gc
    import importlib
    import pkgutil

    import validator

    for info in pkgutil.walk_packages(validator.__path__, "validator."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    for name in ("uvicorn", "starlette.applications", "anyio._backends._asyncio", "tests.support.in_process"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with tempfile.TemporaryDirectory(prefix="sv-zygote-warm-") as scratch:
        lazy: set[str] = set()
        for argv in _WARM_COMMANDS:
            lazy |= _harvest(argv, scratch)
    for name in sorted(lazy - set(sys.modules)):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    gc.collect()
    gc.freeze()


def main() -> None:
    directory, lifeline, dirty = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    _warm()
    if dirty:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = io.StringIO()
        try:
            _run_module([sys.executable, "-m", "validator", *dirty])
        finally:
            sys.stdout, sys.stderr = saved
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(directory / "sock"))
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, lifeline], [], [])
        if lifeline in readable:
            return
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(_SPAWN_TIMEOUT_S)
            try:
                _serve_one(conn)
            except (OSError, ValueError) as exc:
                print(f"zygote: request failed: {exc!r}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
