"""The warm fork-server (tests/support/zygote.py) is held to a real exec: the same ``python -m validator``
command run both ways gives the same exit code, stdout and stderr (its clock aside), for usage and input
errors, the rule pack commands, preflight passing and failing (JSON and text), a check with nothing
listening and a live check against a real simulator process; the environment, the working directory and
colour switches reach the child; the child is a real child of the test process (its parent, its own
descriptors only, signals and exit statuses as an exec'd one's); a cache the zygote filled before the fork
is empty in the child; and nobody but the test process that started it can get a child from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import zygote
from tests.support.cli import REPO
from tests.support.second_user import User, run_as
from tests.support.sim_process import sim_process
from tests.test_preflight import Server, _server

CLOCK_FIELDS = frozenset(
    {"generated_at", "started_at", "finished_at", "duration_s", "elapsed_s", "duration_ms"}
)
SECONDS = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms)\b")


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK_FIELDS}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def _comparable(out: str) -> Any:
    if out.strip().startswith("{"):
        return _without_clock(json.loads(out))
    return SECONDS.sub("N s", out)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_VALIDATE_API_KEY"}
    return {**env, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **extra}


def _both(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The command exec'd, then forked from the zygote (which must have served it)."""
    env = _env() if env is None else env
    cmd = [sys.executable, "-m", "validator", *args]
    real = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False)
    before = zygote.served
    with zygote.opted_in(True):
        warm = zygote.run(cmd, env=env, cwd=cwd, timeout=120)
    assert zygote.served == before + 1, "the zygote did not serve the command"
    return real, warm


def _same(*args: str, rc: int, env: dict[str, str] | None = None, cwd: Path = REPO) -> str:
    real, warm = _both(*args, env=env, cwd=cwd)
    assert "Traceback" not in real.stderr + warm.stderr, (real.stderr[-2000:], warm.stderr[-2000:])
    assert (real.returncode, warm.returncode) == (rc, rc), (real.stderr[-600:], warm.stderr[-600:])
    assert SECONDS.sub("N s", warm.stderr) == SECONDS.sub("N s", real.stderr)
    assert _comparable(warm.stdout) == _comparable(real.stdout)
    return real.stdout + real.stderr


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("patched"), "patched")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("stock"), "stock", fp8_lm_head=False, share_hook=False)


@pytest.mark.parametrize(
    ("args", "rc"),
    [
        (("--version",), 0),
        (("no-such-command",), 2),
        (("check", "--no-such-option"), 2),
        (("rules", "list"), 0),
        (("rules", "show", "spec.accept_length"), 0),
        (("rules", "--rules", "no-such-pack", "list"), 65),
        (("check", "--url", "http://127.0.0.1:1", "--format", "json", "--wait", "0", "--no-probe"), 69),
        (("check", "--url", "http://127.0.0.1:1", "--format", "text", "--wait", "0", "--no-probe"), 69),
    ],
)
def test_a_command_gives_what_an_exec_gives(args: tuple[str, ...], rc: int) -> None:
    _same(*args, rc=rc)


def test_preflight_passes_and_fails_as_an_exec(patched: Server, stock: Server) -> None:
    _same("preflight", "--format", "json", "--launch-cmd", patched.cmd(), rc=0, env=_env(**patched.env))
    _same("preflight", "--format", "text", "--launch-cmd", patched.cmd(), rc=0, env=_env(**patched.env))
    _same("preflight", "--format", "json", "--launch-cmd", stock.cmd(), rc=78, env=_env(**stock.env))


def test_a_live_check_of_a_real_simulator_is_judged_as_by_an_exec(tmp_path: Path) -> None:
    with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as sim:
        out = _same(
            "check", "--url", sim.url, "--format", "json", "--no-probe",
            "--attestation", str(sim.attestation), "--log", str(sim.log), rc=78,
        )  # fmt: skip
    assert '"verdict": "fail"' in out


def test_the_environment_and_the_directory_are_the_commands(tmp_path: Path) -> None:
    """Colour comes from the environment at run time, and a relative path from the working directory:
    one zygote serves both, each as its own exec would be."""
    text = ("check", "--url", "http://127.0.0.1:1", "--format", "text", "--wait", "0", "--no-probe")
    colour = _same(*text, rc=69, env={**_env(), "FORCE_COLOR": "1", "NO_COLOR": ""})
    plain = _same(*text, rc=69)
    assert "\x1b[" in colour and "\x1b[" not in plain
    pack = (REPO / "validator" / "data" / "rules" / "ling-3.0-flash-baseline.yaml").read_text()
    (tmp_path / "mine.yaml").write_text(pack.replace("severity: critical", "severity: warning", 1))
    lint = _same("rules", "lint", "mine.yaml", rc=0, cwd=tmp_path)
    listed = _same("rules", "--rules", "./mine.yaml", "list", rc=0, cwd=tmp_path)
    assert "mine.yaml" in lint + listed


def _listening() -> socket.socket:
    """A loopback socket that accepts connections and never answers: a server that hangs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def _fd_targets(pid: int) -> dict[int, str]:
    fds = Path(f"/proc/{pid}/fd")
    found = {}
    for entry in fds.iterdir():
        try:
            found[int(entry.name)] = os.readlink(entry)
        except OSError:
            continue
    return found


def _ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


# SIGINT is left out: where it lands decides between exit 130 and a KeyboardInterrupt in asyncio's
# shutdown (a real process showed both), so the two runs could differ by timing alone.
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP], ids=lambda s: s.name)
def test_the_child_is_a_real_child_and_dies_of_a_signal_as_an_exec_does(sig: signal.Signals) -> None:
    """Where this run ignores the signal (SIGHUP under nohup: an ignored disposition is inherited across
    fork and exec alike), both children must outlive it; they are then ended with SIGTERM."""
    ignored = signal.getsignal(sig) == signal.SIG_IGN
    hang = _listening()
    try:
        url = f"http://127.0.0.1:{hang.getsockname()[1]}"
        cmd = [sys.executable, "-m", "validator", "check", "--url", url, "--wait", "60", "--format", "json"]
        env = _env()
        with zygote.opted_in(True):
            server = zygote._server_for(env)
        assert server is not None
        codes = []
        for proc in (
            subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
            zygote.ZygotePopen(
                server, cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ),
        ):
            with proc:
                assert _ppid(proc.pid) == os.getpid()
                assert proc.pid != server.proc.pid
                # once the check is under way (its first connection reached the hanging server)
                hang.settimeout(60)
                conn, _ = hang.accept()
                conn.close()
                if isinstance(proc, zygote.ZygotePopen):
                    mine = _fd_targets(proc.pid)
                    given = {mine.get(fd) for fd in (0, 1, 2)}
                    zygotes = set(_fd_targets(server.proc.pid).values()) - given
                    assert not zygotes & set(mine.values()), "the child holds a descriptor of the zygote's"
                proc.send_signal(sig)
                outlived = False
                if ignored:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=1)
                    outlived = proc.poll() is None
                    proc.send_signal(signal.SIGTERM)
                _out, err = proc.communicate(timeout=30)
                codes.append((outlived, proc.returncode, b"Traceback" in err))
        assert codes[1] == codes[0]
    finally:
        hang.close()


def test_a_cache_the_zygote_filled_is_empty_in_the_child(tmp_path: Path) -> None:
    """The zygote reads a pack (cached by path) before it serves; the pack then changes. The child must
    read it again, as a new process would: with the validator's caches left as the zygote had them it
    lists the old severity."""
    pack = tmp_path / "pack.yaml"
    original = (REPO / "validator" / "data" / "rules" / "ling-3.0-flash-baseline.yaml").read_text()
    pack.write_text(original)
    env = _env()
    server = zygote._start(env, dirty=("rules", "--rules", str(pack), "list"))
    assert server is not None
    try:
        cmd = [sys.executable, "-m", "validator", "rules", "--rules", str(pack), "list"]
        old = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)
        pack.write_text(original.replace("severity: critical", "severity: warning"))
        real = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)
        with zygote.ZygotePopen(
            server, cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            out, err = proc.communicate(timeout=60)
        assert real.returncode == 0 and real.stdout != old.stdout, "the change must show in the listing"
        assert (proc.returncode, out, err) == (real.returncode, real.stdout, real.stderr)
    finally:
        server.stop()


@pytest.fixture
def own_zygote() -> Iterator[zygote._Server]:
    server = zygote._start(_env())
    assert server is not None
    try:
        yield server
    finally:
        server.stop()


def test_only_the_process_that_started_it_gets_a_child(own_zygote: zygote._Server, attacker: User) -> None:
    """The zygote's directory is private; another process of the same user that reaches the socket gets
    nothing forked; another user cannot reach it."""
    info = own_zygote.directory.stat()
    assert (info.st_mode & 0o777, info.st_uid) == (0o700, os.getuid())
    path = own_zygote.socket_path
    request = json.dumps({"argv": [sys.executable, "-m", "validator", "--version"], "env": {}, "cwd": "/",
                          "umask": 0o22}).encode()  # fmt: skip
    sibling = (
        "import socket, struct, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({path!r})\n"
        f"body = {request!r}\n"
        "s.settimeout(20)\n"
        "try:\n"
        "    socket.send_fds(s, [struct.pack('!Q', len(body))], [0, 1, 2])\n"
        "    s.sendall(body)\n"
        "    print(repr(s.recv(100)))\n"
        "except (ConnectionResetError, BrokenPipeError):\n"
        "    print('closed')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", sibling], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("b''", "closed"), "a process that is not the zygote's parent got an answer"
    theirs = run_as(
        attacker,
        ["/usr/bin/python3", "-c", f"import socket; socket.socket(socket.AF_UNIX).connect({path!r})"],
    )
    assert theirs.returncode != 0 and b"PermissionError" in theirs.stderr, theirs.stderr
    # and the zygote still serves its parent
    with zygote.ZygotePopen(
        own_zygote, [sys.executable, "-m", "validator", "--version"], env=_env(), cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.startswith("spark-validate ")


def test_the_warm_children_table_names_tests_that_exist() -> None:
    """A renamed module or test must not leave its entry behind, opting nothing in (or out) silently."""
    from tests.conftest import COLD_CHILDREN, WARM_CHILDREN

    for entry in WARM_CHILDREN | COLD_CHILDREN:
        module, _, test = entry.partition("::")
        path = REPO / "tests" / f"{module}.py"
        assert path.is_file(), entry
        if test:
            assert f"def {test}(" in path.read_text(), entry


def test_a_module_planted_in_the_working_directory_is_run_as_python_would_run_it(tmp_path: Path) -> None:
    """``python -m`` puts the working directory first on the import path, so a ``validator`` package
    there is what a real interpreter runs. The zygote, which imported the checkout's, refuses the command
    and it is exec'd: the planted package runs, as it would have."""
    planted = tmp_path / "validator"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text("import sys\nprint('the planted package')\nsys.exit(3)\n")
    cmd = [sys.executable, "-m", "validator", "--version"]
    env = _env()
    real = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False)
    before = zygote.served
    with zygote.opted_in(True):
        warm = zygote.run(cmd, env=env, cwd=tmp_path, timeout=60)
    assert zygote.served == before, "the zygote served a command whose working directory shadows it"
    assert (real.returncode, real.stdout) == (3, "the planted package\n")
    assert (warm.returncode, warm.stdout, warm.stderr) == (real.returncode, real.stdout, real.stderr)
