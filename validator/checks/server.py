"""Server checks: ``server.ready`` (up and serving its state), ``server.process`` (which process was judged)
and ``server.log`` (its log as evidence).

A log holding no start (empty, ``copytruncate``d, rotated, another server's) would read as "no FP8 line",
i.e. a BF16 head: a critical false alarm. So it is a source error, reported here. Its ``accept len`` of
exactly 1.00 over many intervals is the broken-draft signature and must not pass silently.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from validator.checks import base as check
from validator.facts import LOG, NOTHING_ACCEPTED, PROBE, PROCESS, PROGRESS, SERVER, Facts, LogFacts, Progress
from validator.report import Status
from validator.server_settings import logged_settings


@check.builtin("server.ready", "check")
def server_ready(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    s = facts.server
    if s is None:
        return check.errored(facts.errors.get(SERVER, "the server could not be reached"), [SERVER])
    ev: dict[str, Any] = {
        "url": s.url,
        "version": s.settings.version,
        "server_info_endpoint": s.server_info_endpoint,
    }
    if not s.healthy:
        return check.failed("the server does not answer /health with 200", [SERVER], **ev)
    return check.passed(f"server ready (SGLang {ev['version']})", [SERVER], **ev)


@check.builtin("server.progress", "check")
def server_progress(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The server completes work: ``/health`` 200 is no proof (it is served by the HTTP process, not the
    scheduler). A stall fails; nothing that could tell is ``error``, never a pass."""
    if facts.server is None:
        return check.no_server(facts)
    p = facts.progress
    if p is None:
        why = facts.errors.get(PROGRESS) or (
            "no evidence of progress: no traffic seen on /metrics and no full check has sent a request yet"
        )
        return check.errored(why, [PROGRESS])
    ev: dict[str, Any] = {"source": p.source, "state": p.state.value}
    if p.stalled_for_s is not None:
        ev["stalled_for_s"] = round(p.stalled_for_s, 1)
    if p.in_flight is not None:
        ev["requests_in_flight"] = p.in_flight
    if p.request_tokens is not None:
        ev["request_tokens"] = p.request_tokens
    if p.state is Progress.ADVANCING:
        return check.passed(p.detail, [PROGRESS], **ev)
    if p.state is Progress.STALLED:
        return check.failed(f"the server is stalled: {p.detail}", [PROGRESS], **ev)
    return check.errored(p.detail, [PROGRESS], **ev)


@check.builtin("server.process", "preflight")
def server_process(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """Which process was judged: the report's answer to "is this the server I meant?"."""
    proc = facts.process
    if proc is None:
        return check.skipped("no running server was read (check with no --url, or --pid, reads one)")
    started = (
        dt.datetime.fromtimestamp(proc.start_time, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if proc.start_time is not None
        else None
    )
    ev: dict[str, Any] = {
        "pid": proc.pid,
        "user": proc.user or proc.uid,
        "exe": proc.exe,
        "cwd": str(proc.cwd) if proc.cwd else None,
        "started": started,
        "systemd_unit": proc.systemd_unit,
        "container_id": proc.container_id,
        "environment": "read" if proc.env is not None else proc.env_error,
    }
    held = (
        f"unit {proc.systemd_unit}"
        if proc.systemd_unit
        else f"container {proc.container_id[:12]}"
        if proc.container_id
        else "no unit or container"
    )
    env = "" if proc.env is not None else f"; environment not readable: {proc.env_error}"
    return check.Outcome(
        Status.INFO,
        f"process {proc.pid} ({proc.user or proc.uid}, {held}, started {started}) runs {proc.exe}{env}",
        ev,
        [PROCESS],
    )


MIN_LOG_INTERVALS = 5
# resolved arguments that name one server process's deployment; a log whose start differs in one of them
# is some other server's log
_IDENTITY_KEYS = ("port", "model_path", "served_model_name", "tp_size")


def log_shows_broken_draft(log: LogFacts) -> int | None:
    """The number of recent decode intervals when all of them accepted nothing (accept len 1.00) and there
    are at least ``MIN_LOG_INTERVALS``; None otherwise."""
    samples = log.decode_samples
    if len(samples) < MIN_LOG_INTERVALS:
        return None
    return len(samples) if max(s.accept_len for s in samples) <= NOTHING_ACCEPTED else None


@check.builtin("server.log", "check", remedies=("crashed",))
def server_log(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if LOG in facts.errors:
        return check.errored(facts.errors[LOG], [LOG])
    log = facts.log
    if log is None:
        return check.skipped("no --log given", [LOG])
    ev: dict[str, Any] = {
        "source": log.path,
        "start_at": log.run_start_line,
        "starts_read": log.runs,
        "lines_read": log.lines_total,
        "bytes_read": log.bytes_read,
        "bytes_skipped": log.bytes_skipped,
        "truncations": log.truncations,
        "rotations": log.rotations,
        "ready_line_seen": log.ready,
        "decode_intervals": log.decode_sample_count,
        "log_mean_accept_len": round(mean, 3) if (mean := log.mean_accept_len) is not None else None,
    }
    if log.note:
        ev["note"] = log.note
    if log.start_failure is not None:
        ev["start_failure"] = log.start_failure
    logged = logged_settings(log)
    if facts.server is not None and logged is not None and log.server_args is not None:
        info, raw = facts.server.settings, facts.server.server_info
        differ = [
            f"{k} {getattr(logged, k)!r} in the log, {getattr(info, k)!r} on the server"
            for k in _IDENTITY_KEYS
            if k in log.server_args and k in raw and getattr(logged, k) != getattr(info, k)
        ]
        if differ:
            return check.errored(
                f"{log.path}: the last start in the log is not this server's ({'; '.join(differ)})",
                [LOG, SERVER],
                **ev,
            )
    if log.crash is not None:  # the start was ready, then a component died: the server is gone
        ev["crash"] = log.crash
        return check.failed(
            f"{log.path}: the server died after it was ready: {log.crash}", [LOG], "crashed", **ev
        )
    broken = log_shows_broken_draft(log)
    probe = facts.probe
    if broken is not None and probe is not None and (probe.accept_length or 0.0) > NOTHING_ACCEPTED:
        return check.failed(
            f"the log shows accept len 1.00 in all of its last {broken} decode intervals, but the probe "
            f"measured {probe.accept_length:.2f}: real traffic accepts no draft token",
            [LOG, PROBE],
            **ev,
        )
    where = "" if log.run_start_line is None else f" (read from offset {log.run_start_line})"
    if log.start_failure is not None and facts.server is None:  # evidence of a start that died
        return check.passed(f"{log.path} holds the last start{where}, which died before ready", [LOG], **ev)
    if facts.server is None:  # a start is read, but nothing shows it is a running server's
        return check.errored(
            f"{log.path} holds a start{where}, but no server answered to show it is the running one's",
            [LOG, SERVER],
            **ev,
        )
    return check.passed(f"{log.path} holds the running server's start{where}", [LOG], **ev)
