"""sd_notify over a real datagram socket: abstract and path addresses, watchdog settings, no-op outside
systemd."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from validator.daemon.notify import Notifier


def test_abstract_socket_and_watchdog_interval() -> None:
    name = f"spark-validate-test-{os.getpid()}"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind("\0" + name)
    rx.settimeout(2)
    try:
        n = Notifier(
            {"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}
        )
        assert n.enabled and n.watchdog_interval_s == 15.0
        assert n.ready("ready: verdict none")
        assert rx.recv(4096).decode().splitlines()[:2] == ["READY=1", "STATUS=ready: verdict none"]
        assert n.status("line one\nline two")  # a newline cannot inject another field
        assert rx.recv(4096) == b"STATUS=line one line two"
        n.close()
    finally:
        rx.close()


def test_path_socket_watchdog_for_another_pid_and_no_socket(socket_dir: Path) -> None:
    # socket_dir: a short path (AF_UNIX's 108 bytes; pytest's tmp_path grows with its run counter)
    path = socket_dir / "n.sock"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(str(path))
    rx.settimeout(2)
    try:
        n = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"})
        assert n.watchdog_interval_s is None  # the watchdog is meant for another process
        assert n.stopping()
        assert rx.recv(4096).startswith(b"STOPPING=1\n")
    finally:
        rx.close()
    path.unlink()
    assert n.watchdog() is False  # the receiver is gone: sending fails quietly, never raises
    off = Notifier({})
    assert not off.enabled and off.ready("x") is False and off.sent == 0
