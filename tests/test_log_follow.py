# ruff: noqa: E501  (log lines are data, kept verbatim)
"""Following a server log as the sidecar does: real files grown, truncated (copytruncate), rotated and
removed by the test; the systemd journal through the real ``journalctl`` reading a real journal file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.prerequisite import missing
from tests.test_server_log import RUN_BROKEN, RUN_HEALTHY, TP, _args, _decode
from validator.errors import UnavailableError, UsageError
from validator.sources.server.log import (
    FileLogReader,
    JournalLogReader,
    open_log_reader,
    parse_log_spec,
)


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(ln + "\n" for ln in lines))


def test_copytruncate_keeps_the_running_servers_start(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    _append(log, RUN_HEALTHY)
    reader = FileLogReader(log)
    first = reader.poll()
    assert first.unusable() is None and first.fp8_lm_head_lines == 1 and first.decode_sample_count == 2
    os.truncate(log, 0)  # logrotate copytruncate: same inode, size 0, the server keeps appending
    _append(log, [_decode(3.10, 0.70, 59.0)])
    after = reader.poll()
    assert after.unusable() is None and after.truncations == 1
    assert after.fp8_lm_head_lines == 1 and after.server_args is not None  # the start read earlier stands
    assert [s.accept_len for s in after.decode_samples] == [3.05, 2.95, 3.10]


def test_truncation_followed_by_more_writes_than_before_is_noticed(tmp_path: Path) -> None:
    """After copytruncate the server may write past the old offset before the next poll: the size alone
    does not show the truncation, the bytes before the offset do."""
    log = tmp_path / "sglang.log"
    _append(log, RUN_HEALTHY)
    reader = FileLogReader(log)
    old_size = log.stat().st_size
    reader.poll()
    os.truncate(log, 0)
    _append(log, [_decode(2.50 + i / 100, 0.5, 50.0) for i in range(40)])
    assert log.stat().st_size > old_size
    after = reader.poll()
    assert after.truncations == 1 and after.decode_sample_count == 42
    assert after.decode_samples[-1].accept_len == pytest.approx(2.89)


def test_rotation_drains_the_old_file_then_follows_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    _append(log, RUN_HEALTHY)
    reader = FileLogReader(log)
    reader.poll()
    _append(log, [_decode(3.20, 0.7, 60.0)])  # written just before the rename
    log.rename(tmp_path / "sglang.log.1")  # logrotate create
    gone = reader.poll()  # between the rename and the new file: the start read earlier stands
    assert gone.unusable() is None and gone.note is not None and "read earlier" in gone.note
    _append(log, [_decode(3.30, 0.7, 60.0)])
    after = reader.poll()
    assert after.rotations == 1 and after.unusable() is None and after.fp8_lm_head_lines == 1
    assert [s.accept_len for s in after.decode_samples][-2:] == [3.20, 3.30]


def test_a_new_start_replaces_the_old_one_and_a_restart_needs_one(tmp_path: Path) -> None:
    from validator.sources.server.identity import ServerIdentity

    a, b = ServerIdentity(startup_time={"load": 52.4}), ServerIdentity(startup_time={"load": 61.0})
    log = tmp_path / "sglang.log"
    _append(log, RUN_HEALTHY)
    reader = FileLogReader(log)
    assert reader.poll(a).generation == 1 and reader.poll(a).unusable() is None
    stale = reader.poll(b)  # the server restarted; its start is not in the log yet
    assert stale.unusable() is not None and "previous server" in (stale.unusable() or "")
    assert reader.poll(ServerIdentity(startup_time={"load": 52.4}, pid=7)).unusable() is None  # same one
    _append(log, RUN_BROKEN)
    new = reader.poll(b)
    assert new.generation == 2 and new.unusable() is None
    assert new.fp8_lm_head_lines == 0 and new.flashinfer_override


def test_cost_follows_new_bytes_not_the_file_size(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    old_run = [_args("flashinfer_mxfp4"), *[_decode(1.0, 0.0, 24.0)] * 40_000]  # ~9 MB of an old start
    _append(log, [*old_run, *RUN_HEALTHY])
    reader = FileLogReader(log)
    facts = reader.poll()
    assert facts.unusable() is None and facts.fp8_lm_head_lines == 1 and facts.runs == 1
    assert facts.bytes_skipped > 8_000_000 and facts.bytes_read < 200_000  # parsed from just before it
    _append(log, [_decode(3.0, 0.66, 58.0)])
    more = reader.poll()
    assert more.bytes_read - facts.bytes_read == len(_decode(3.0, 0.66, 58.0)) + 1


def test_an_oversized_region_is_read_as_its_head_and_tail(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    _append(log, [*RUN_HEALTHY, *[_decode(2.0, 0.4, 40.0)] * 5000, _decode(3.5, 0.8, 70.0)])
    reader = FileLogReader(log, max_read=256 * 1024)
    facts = reader.poll()
    assert facts.bytes_read <= 256 * 1024 + 1024 and facts.bytes_skipped > 500_000
    assert facts.fp8_lm_head_lines == 1 and facts.ready  # the start's lines are in the head
    assert facts.decode_samples[-1].accept_len == 3.5  # the latest traffic is in the tail


def test_a_line_split_across_polls_is_read_once(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    _append(log, RUN_HEALTHY)
    reader = FileLogReader(log)
    reader.poll()
    line = _decode(3.40, 0.8, 61.0)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(line[:50])
    assert reader.poll().decode_sample_count == 2
    with log.open("a", encoding="utf-8") as fh:
        fh.write(line[50:] + "\n")
    facts = reader.poll()
    assert facts.decode_sample_count == 3 and facts.decode_samples[-1].accept_len == 3.40


def test_log_spec_parsing() -> None:
    assert parse_log_spec("/var/log/sglang.log") == Path("/var/log/sglang.log")
    assert parse_log_spec("journal:sglang.service") == "journal:sglang.service"
    assert isinstance(open_log_reader("journal:sglang@0.service"), JournalLogReader)
    for bad in ("journal:", "journal:-H remote", "journal:a b", "journal:--all"):
        with pytest.raises(UsageError):
            parse_log_spec(bad)


def test_a_huge_journal_unit_is_named_in_a_short_line() -> None:
    """A 5,000-character ``journal:`` value was echoed whole in the one-line usage error."""
    proc = run_cli("check", "--url", "http://127.0.0.1:9", "--log", "journal:" + "a" * 5000, timeout=30)
    assert proc.returncode == 2 and "5008 characters" in proc.stderr, proc.stderr[:300]
    assert len(proc.stderr) < 400 and len(proc.stderr.splitlines()) == 1, proc.stderr[:300]


# ---- the journal, read by the real journalctl from a real journal file ----

JOURNAL_REMOTE = Path("/usr/lib/systemd/systemd-journal-remote")  # apt: systemd-journal-remote (.ci/run)


class FakeHost:
    """A systemd host in a directory: ``systemctl`` answers the unit's InvocationID from a file, and
    ``journalctl`` is the real one reading a journal file that ``systemd-journal-remote`` writes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        self.journal = root / "system.journal"
        self.invocation_file = root / "invocation"
        self.boot = uuid.uuid4().hex
        self.t = 1_796_000_000_000_000
        real = shutil.which("journalctl")
        if real is None or not JOURNAL_REMOTE.exists():
            missing("journalctl or systemd-journal-remote not found (apt: systemd systemd-journal-remote)")
        (self.bin / "journalctl").write_text(f'#!/bin/sh\nexec {real} --file="{self.journal}" "$@"\n')
        (self.bin / "systemctl").write_text(
            "#!/bin/sh\n"
            f'[ -s "{self.invocation_file}" ] || {{ echo "Unit sglang.service could not be found." >&2; exit 1; }}\n'
            f'cat "{self.invocation_file}"\n'
        )
        for tool in ("journalctl", "systemctl"):
            (self.bin / tool).chmod(0o755)

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}"}

    def start(self) -> str:
        invocation = uuid.uuid4().hex
        self.invocation_file.write_text(invocation + "\n")
        return invocation

    def log(self, invocation: str, messages: list[str | bytes]) -> None:
        """Append entries as the server's stdout would reach journald (binary-safe export format)."""
        out = bytearray()
        for msg in messages:
            self.t += 1000
            out += (
                f"__REALTIME_TIMESTAMP={self.t}\n__MONOTONIC_TIMESTAMP={self.t // 1000}\n"
                f"_BOOT_ID={self.boot}\n_SYSTEMD_UNIT=sglang.service\n"
                f"_SYSTEMD_INVOCATION_ID={invocation}\nSYSLOG_IDENTIFIER=python3\n"
            ).encode()
            body = msg.encode() if isinstance(msg, str) else msg
            if isinstance(msg, bytes) or "\n" in msg:
                out += b"MESSAGE\n" + len(body).to_bytes(8, "little") + body + b"\n"
            else:
                out += b"MESSAGE=" + body + b"\n"
            out += b"\n"
        export = self.root / "export.bin"
        export.write_bytes(bytes(out))
        subprocess.run(
            [str(JOURNAL_REMOTE), f"--output={self.journal}", str(export)],
            check=True,
            capture_output=True,
            timeout=30,
        )


def test_journal_reads_the_current_invocation_incrementally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = FakeHost(tmp_path)
    monkeypatch.setenv("PATH", host.env()["PATH"])
    old = host.start()
    host.log(old, RUN_BROKEN)
    current = host.start()
    host.log(current, [*RUN_HEALTHY, "x" * 70_000])  # a long entry (journalctl prints it with --all)
    reader = JournalLogReader("sglang.service")
    facts = reader.poll()
    assert facts.unusable() is None and facts.path == "journal:sglang.service"
    assert facts.fp8_lm_head_lines == 1 and not facts.flashinfer_override  # only this invocation
    assert facts.server_args is not None and facts.server_args["api_key"] == "<redacted>"
    assert facts.lines_total == len(RUN_HEALTHY) + 1
    read = facts.bytes_read
    host.log(current, [_decode(3.25, 0.7, 60.0), b"accept len: \xff\xfe bad utf-8"])
    more = reader.poll()
    assert more.lines_total == facts.lines_total + 2  # continued from the cursor, not re-read
    assert more.decode_samples[-1].accept_len == 3.25 and more.bytes_read - read < 2000
    # a new invocation is a new server start: the previous one's facts go
    nxt = host.start()
    host.log(nxt, [f"{TP} Load weight begin. avail mem=119.62 GB"])
    fresh = reader.poll()
    assert "current invocation has logged no server start" in (fresh.unusable() or "")
    host.log(nxt, [_args("humming")])
    assert reader.poll().unusable() is None


def test_journal_failures_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(tmp_path)
    monkeypatch.setenv("PATH", host.env()["PATH"])
    with pytest.raises(UnavailableError, match=r"^journal:sglang.service: systemctl failed: Unit sglang"):
        JournalLogReader("sglang.service").poll()
    host.start()  # an invocation, but no journal file yet
    with pytest.raises(UnavailableError, match=r"^journal:sglang.service: journalctl failed: "):
        JournalLogReader("sglang.service").poll()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UnavailableError, match="systemctl not found"):
        JournalLogReader("sglang.service").poll()


def test_check_reads_the_journal_of_a_simulated_server(tmp_path: Path) -> None:
    """``check --log journal:UNIT`` end to end: the simulator's own log lines, delivered through the
    journal, prove the FP8 head."""
    from tests.support.sim_process import sim_process, wait_healthy

    host = FakeHost(tmp_path)
    with sim_process(tmp_path) as sim:
        wait_healthy(sim.url)  # its start-up lines are all written by then
        invocation = host.start()
        host.log(invocation, sim.log.read_text(encoding="utf-8").splitlines())
        res = run_cli(
            "check", "--url", sim.url, "--no-probe", "--log", "journal:sglang.service", "--format", "json",
            env=host.env(), timeout=120,
        )  # fmt: skip
    report = json.loads(res.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["server.log"]["status"] == "pass", by_id["server.log"]
    assert by_id["server.log"]["evidence"]["source"] == "journal:sglang.service"
    assert by_id["lm_head.fp8"]["status"] == "pass" and "log" in by_id["lm_head.fp8"]["sources"]


def test_a_start_dead_in_the_current_invocation_is_judged_at_once(tmp_path: Path) -> None:
    """The journal is read by invocation, and a restart is a new one: a start that died in the current
    invocation is this attempt's, even if it died before the check began, so ``check`` does not wait out
    --wait for it and judges its logged ring (a file log cannot tell it from an earlier attempt)."""
    from tests.support.loopback import free_port
    from tests.test_start_failure import ARGS, CRASH, LOADED, RING

    host = FakeHost(tmp_path)
    scheduler, sigquit = CRASH.rstrip("\n").split("\n[")
    host.log(host.start(), [ARGS.rstrip("\n"), LOADED.rstrip("\n"), scheduler, "[" + sigquit])
    res = run_cli(
        "check", "--url", f"http://127.0.0.1:{free_port()}", "--wait", "600", "--format", "json",
        "--rules", "ling-3.0-flash-dgx-spark-dspark", "--log", "journal:sglang.service",
        env=host.env(), timeout=90,
    )  # fmt: skip
    by_id = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    assert res.returncode == 78, res.stdout[-2000:]
    assert "failed to start" in by_id["server.ready"]["message"] and RING in by_id["server.ready"]["message"]
    assert by_id["spec.dspark"]["status"] == "fail" and by_id["spec.dspark"]["sources"] == ["log"]


def test_the_bulk_path_counts_what_a_line_by_line_parse_counts(tmp_path: Path) -> None:
    """Routine traffic is counted with C-speed scans; the facts must equal feeding every line."""
    from validator.sources.server.log_state import LogParser

    access = '[2026-11-29 15:00:02] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK'
    lines = [*RUN_HEALTHY]
    for i in range(30_000):  # ~7 MB: routine chunks, some with an error or a bad number in them
        lines.append(_decode(1.0 + (i % 300) / 100, 0.5, 50.0) if i % 7 else access)
        if i in (12_345, 29_990):
            lines.append(f"{TP} RuntimeError: CUDA error {i}")
        if i == 29_995:
            lines.append("accept len: 1.2.3, accept rate: 0.1")
    log = tmp_path / "sglang.log"
    _append(log, lines)
    ref = LogParser(str(log))
    pos = 0
    for line in lines:
        ref.feed(line, pos)
        pos += len(line.encode()) + 1
    want = ref.snapshot()
    reader = FileLogReader(log)
    got = reader.poll()
    for name in ("decode_sample_count", "lines_total", "fp8_lm_head_lines", "ready"):
        assert getattr(got, name) == getattr(want, name), name
    assert got.decode_samples == want.decode_samples  # values and byte offsets
    _append(log, lines[-5000:])  # and incrementally
    for line in lines[-5000:]:
        ref.feed(line, pos)
        pos += len(line.encode()) + 1
    assert reader.poll().decode_samples == ref.snapshot().decode_samples


def test_a_poll_of_prefill_lines_alone_ends_an_overrides_claim_on_the_next_start(tmp_path: Path) -> None:
    """The override line is logged while resolving a start's arguments, before its ``server_args=``; one
    logged while a server runs is claimed by the next start only until a running server's line follows.
    A poll that read only batch lines without an acceptance figure (prefill, or a server without MTP) was
    counted in bulk and never ended that claim, so a later start was judged to have had the override:
    the incremental read must say what one line-by-line parse says."""
    from validator.sources.server.log_state import LogParser

    prefill = f"{TP} Prefill batch, #new-seq: 1, #new-token: 2304, #cached-token: 0, cuda graph: False"
    polls = [[*RUN_HEALTHY, RUN_BROKEN[0]], [prefill] * 20_000, RUN_HEALTHY]
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    reader, ref, pos = FileLogReader(log), LogParser(str(log)), 0
    for lines in polls:
        _append(log, lines)
        got = reader.poll()
        for line in lines:
            ref.feed(line, pos)
            pos += len(line.encode()) + 1
    assert ref.snapshot().runs == got.runs == 2
    assert got.flashinfer_override is ref.snapshot().flashinfer_override is False
