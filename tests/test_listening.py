"""The listening-socket reader: real sockets held by real processes, a real second user who may not read
root's descriptors, and fixture /proc trees for what a live host cannot be made to show on demand (thousands
of processes, a process that vanished mid-scan, a hidepid mount, a /proc without socket tables)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.second_user import User, call_as, ensure_user
from validator.sources.host import listening as L

_LISTENER = """
import os, socket, subprocess, sys, time
fam = socket.AF_INET6 if sys.argv[1] == "::1" else socket.AF_INET
s = socket.socket(fam); s.bind((sys.argv[1], 0)); s.listen()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(s.getsockname()[1], child.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture(scope="module")
def second_user() -> User:
    return ensure_user()


def _spawn(host: str) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    proc = subprocess.Popen([sys.executable, "-c", _LISTENER, host], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port, child = (int(x) for x in proc.stdout.readline().split())
        yield proc, port, child
    finally:
        proc.kill()
        proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, UnboundLocalError):
            os.kill(child, 9)


@pytest.fixture
def server4() -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    yield from _spawn("127.0.0.1")


@pytest.fixture
def server6() -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    yield from _spawn("::1")


def test_a_real_listener_is_found_with_its_child_as_descendant(
    server4: tuple[subprocess.Popen[str], int, int],
) -> None:
    proc, port, child = server4
    found = L.listeners(port, address="127.0.0.1")
    assert found.pids == (proc.pid,)
    assert [(s.family, s.address, s.port, s.uid) for s in found.sockets] == [
        ("tcp", "127.0.0.1", port, os.geteuid())
    ]
    assert found.why_not_visible() is None
    assert L.is_descendant_or_self(child, found.pids)
    assert L.is_descendant_or_self(proc.pid, found.pids)
    assert child in L.descendants(proc.pid)
    # this test process is the listener's parent, not its descendant: a sibling never binds
    assert not L.is_descendant_or_self(os.getpid(), found.pids)
    # another address on the same port is not this socket
    assert L.listeners(port, address="127.0.0.2").sockets == ()


def test_ipv6_listener(server6: tuple[subprocess.Popen[str], int, int]) -> None:
    proc, port, _ = server6
    found = L.listeners(port, address="::1")
    assert found.pids == (proc.pid,)
    assert found.sockets[0].family == "tcp6"


def test_nothing_listening_is_an_empty_answer_not_an_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]  # bound, never listening
    try:
        found = L.listeners(port)
    finally:
        s.close()
    assert found.sockets == () and found.pids == () and found.why_not_visible() is None


def test_another_users_descriptors_are_not_visible_and_say_so(
    server4: tuple[subprocess.Popen[str], int, int], second_user: User
) -> None:
    _, port, _ = server4
    found = call_as(second_user, lambda: L.listeners(port, address="127.0.0.1"))
    assert found.sockets and found.pids == ()
    why = found.why_not_visible()
    assert why is not None and "not readable by this user" in why and f"UID {os.geteuid()}" in why


# --- fixture /proc trees -----------------------------------------------------------------------------


def _tcp_line(n: int, inode: int, port: int, state: str = "0A", uid: int = 1000) -> str:
    return (
        f"{n:4d}: 0100007F:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000 "
        f"{uid:5d}        0 {inode} 1 0000000000000000 100 0 0 10 0\n"
    )


def _fake_proc(root: Path, *, processes: int, holder: int, inode: int, port: int) -> Path:
    proc = root / "proc"
    (proc / "net").mkdir(parents=True)
    header = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    )
    (proc / "net" / "tcp").write_text(
        header + _tcp_line(0, inode, port) + _tcp_line(1, inode + 1, port, state="01")
    )
    (proc / "stat").write_text("cpu 0 0 0 0\nbtime 1700000000\n")
    for pid in range(2, processes + 2):
        d = proc / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (python3 (x) y) S {pid - 1 if pid > 2 else 1} " + "0 " * 40 + "\n")
        os.symlink("/dev/null", d / "fd" / "0")
        os.symlink(f"socket:[{inode + 7}]", d / "fd" / "1")
        if pid == holder:
            os.symlink(f"socket:[{inode}]", d / "fd" / "5")
    return proc


def test_thousands_of_processes_are_scanned_in_bounded_time(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, processes=3000, holder=2500, inode=4242, port=30000)
    start = time.monotonic()
    found = L.listeners(30000, proc=proc)
    elapsed = time.monotonic() - start
    assert found.pids == (2500,)
    assert found.scan is not None and found.scan.processes == 3000
    assert elapsed < 5, elapsed
    # the tree: a chain 2 <- 3 <- ... ; 2999's ancestors include 2500
    assert L.is_descendant_or_self(2999, {2500}, proc=proc)
    assert not L.is_descendant_or_self(2400, {2500}, proc=proc)


def test_a_bound_past_the_limits_is_an_error_not_a_partial_answer(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, processes=50, holder=40, inode=11, port=30001)
    with pytest.raises(L.ListeningError, match=r"more than 20 processes"):
        L.listeners(30001, proc=proc, limits=L.Limits(max_processes=20))
    with pytest.raises(L.ListeningError, match=r"more than 30 open descriptors"):
        L.listeners(30001, proc=proc, limits=L.Limits(max_descriptors=30))
    with pytest.raises(L.ListeningError, match=r"took over 0 s"):
        L.listeners(30001, proc=proc, limits=L.Limits(deadline_s=0))


def test_a_process_that_vanished_mid_scan_is_skipped_and_counted(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, processes=10, holder=8, inode=77, port=30002)
    (proc / "5" / "fd" / "0").unlink()
    (proc / "5" / "fd" / "1").unlink()
    (proc / "5" / "fd").rmdir()  # the /proc/5 entry listed, its fd table gone: it exited
    os.symlink("socket:[999]", proc / "6" / "fd" / "9")
    found = L.listeners(30002, proc=proc)
    assert found.pids == (8,)
    assert found.scan is not None and found.scan.vanished == 1


def test_hidepid_is_named_when_the_owner_is_not_visible(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, processes=3, holder=99, inode=55, port=30003)
    (proc / "self").mkdir()
    (proc / "self" / "mountinfo").write_text(
        f"22 27 0:21 / {os.path.realpath(proc)} rw,relatime - proc proc rw,hidepid=invisible\n"
    )
    found = L.listeners(30003, proc=proc)
    assert found.pids == ()
    why = found.why_not_visible()
    assert why is not None and "hidepid=invisible" in why and "UID 1000" in why


def test_a_listener_in_no_visible_process_names_the_namespace(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, processes=3, holder=99, inode=56, port=30004)
    why = L.listeners(30004, proc=proc).why_not_visible()
    assert why is not None and "another PID namespace" in why


def test_no_socket_table_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    with pytest.raises(L.ListeningError, match=r"proc/net/tcp: not found \(is /proc mounted\?\)"):
        L.listeners(80, proc=tmp_path / "proc")
    assert L.ListeningError("x").exit_code == 69


def test_host_root_moves_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_proc(tmp_path, processes=3, holder=3, inode=57, port=30005)
    monkeypatch.setenv("SPARK_VALIDATE_HOST_ROOT", str(tmp_path))
    assert L.proc_root() == tmp_path / "proc"
    assert L.listeners(30005).pids == (3,)
