"""The sidecar's successor rule (``ProcessTarget``) case by case, over what discovery returns: the real
types, with the scan itself replaced by a list (the real scan, the real sidecar and a real second user are
in tests/test_sidecar_follows.py). The PIDs are above the kernel's pid_max: never alive, so each scan
looks for a successor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from validator.daemon import process_watch
from validator.daemon.process_watch import ProcessTarget
from validator.sources.host.process import ProcessFacts
from validator.sources.host.server_processes import Discovery, Endpoint, Ignored, ServerProcess

BASE = 1 << 23  # above /proc/sys/kernel/pid_max's ceiling (4,194,304): no such process


def server(n: int, uid: int, port: int | None, *, rank: int = 0, nnodes: int = 1) -> ServerProcess:
    facts = ProcessFacts(pid=BASE + n, argv=["python3"], env={}, uid=uid, start_ticks=n)
    return ServerProcess(
        process=facts,
        kind="sglang",
        command=["python3", "-m", "sglang.launch_server"],
        http=Endpoint("127.0.0.1", port) if port is not None else None,
        argv_port=30000,
        node_rank=rank,
        nnodes=nnodes,
    )


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Discovery]]:
    """Each ``find`` takes the next discovery from the list."""
    queue: list[Discovery] = []
    monkeypatch.setattr(process_watch, "discover", lambda users=(): queue.pop(0))
    yield queue


def followed(target: ProcessTarget, scans: list[Discovery], *servers: ServerProcess) -> int | None:
    scans.append(Discovery(servers=list(servers), processes=len(servers)))
    found = target.find()
    return None if found is None else found.process.pid - BASE


def test_follows_the_socket_holder_of_the_same_user_only(scans: list[Discovery]) -> None:
    target = ProcessTarget(pid=BASE + 1)
    assert followed(target, scans, server(1, 0, 30000)) == 1
    # the next scan: a root process on another port, one holding nothing, another user's on the port
    assert followed(target, scans, server(2, 0, 31000), server(3, 0, None), server(4, 1001, 30000)) is None
    assert f"PID {BASE + 4} (UID 1001): not the server's user" in target.why_none
    assert target.take_change() == f"server process PID {BASE + 1} exited"
    assert followed(target, scans, server(4, 1001, 30000), server(5, 0, 30000)) == 5
    assert target.take_change() is None  # the exit was said; the successor is no second restart


def test_two_that_qualify_are_ambiguous_and_neither_is_followed(scans: list[Discovery]) -> None:
    target = ProcessTarget(pid=BASE + 1)
    assert followed(target, scans, server(1, 0, 30000)) == 1
    assert followed(target, scans, server(2, 0, 30000), server(3, 0, 30000)) is None
    assert f"processes {BASE + 2}, {BASE + 3} all qualify" in target.why_none


def test_a_server_user_is_followed_and_a_worker_by_its_rank(scans: list[Discovery]) -> None:
    target = ProcessTarget(pid=BASE + 1, users=(1001,))
    assert followed(target, scans, server(1, 0, None, rank=1, nnodes=2)) == 1
    assert (
        followed(
            target, scans, server(2, 1001, None, rank=2, nnodes=2), server(3, 1001, None, rank=1, nnodes=2)
        )
        == 3
    )
    assert followed(target, scans, server(4, 1002, None, rank=1, nnodes=2)) is None


def test_discoverys_ignored_claimants_of_the_port_are_named(scans: list[Discovery]) -> None:
    target = ProcessTarget(pid=BASE + 1)
    assert followed(target, scans, server(1, 0, 30000)) == 1
    squatter = Ignored(BASE + 9, 1001, "sv-attacker", 30000, "other-user", "another user's process")
    scans.append(Discovery(servers=[], processes=1, ignored=[squatter]))
    assert target.find() is None
    assert f"PID {BASE + 9} (sv-attacker, --port 30000): another user's process" in target.why_none
