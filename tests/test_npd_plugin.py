"""`spark-validate npd` as node-problem-detector runs a custom plugin, and the shipped plugin-monitor
config as NPD reads it.

``npd_run`` is NPD's ``plugin.run`` (kubernetes/node-problem-detector, pkg/custompluginmonitor/plugin/
plugin.go): exec the rule's path with its args, kill it at the timeout, read at most 4 KB of stdout, trim
it, cut it at ``max_output_length``, and map the exit status (0 OK, 1 NonOK, anything else Unknown).
``validate_config`` is NPD's ``ApplyConfiguration`` + ``Validate`` (pkg/custompluginmonitor/types/
config.go and types.go): the plugin is ``custom``, durations parse as Go's ``time.ParseDuration``, no rule
timeout exceeds the global one, every rule's path exists, and every permanent rule's condition has a
default condition; unknown keys (which Go's decoder would silently drop, so a misspelt key does nothing)
are refused too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import web
from tests.support.cli import REPO
from tests.support.deploy_tools import DEPLOY
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.namespaces import in_pid_namespace
from tests.support.sim_process import wait_healthy

CONFIG = DEPLOY / "kubernetes" / "npd-spark-validate.json"
MAX_PLUGIN_BUFFER = 4096  # plugin.go: maxCustomPluginBufferBytes
STATUS = {0: "OK", 1: "NonOK"}  # anything else: Unknown

# --- NPD's config, as config.go reads it ---------------------------------------------------------------

_GO_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TOP = {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
_PLUGIN_CONFIG = {"invoke_interval", "timeout", "max_output_length", "concurrency",
                  "enable_message_change_based_condition_update", "skip_initial_status"}  # fmt: skip
_RULE = {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
_CONDITION = {"type", "reason", "message"}


def go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (units ns..h, a sign, fractions; "0" alone), in seconds."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    if not body or _GO_DURATION.sub("", body) != "":
        raise ValueError(f"time: invalid duration {text!r}")
    total = 0.0
    for number, unit in _GO_DURATION.findall(body):
        if number in ("", "."):
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(number) * _UNITS[unit]
    return -total if text.startswith("-") else total


def validate_config(doc: dict[str, Any]) -> list[str]:
    problems: list[str] = []

    def keys(obj: Any, allowed: set[str], where: str) -> None:
        if not isinstance(obj, dict):
            problems.append(f"{where}: not an object")
            return
        problems.extend(f"{where}: unknown key {k!r}" for k in sorted(set(obj) - allowed))

    keys(doc, _TOP, "config")
    if doc.get("plugin") != "custom":
        problems.append(f'NPD does not support {doc.get("plugin")!r} plugin for now. Only support "custom"')
    pc = doc.get("pluginConfig", {})
    keys(pc, _PLUGIN_CONFIG, "pluginConfig")
    timeout = invoke = None
    try:
        timeout = go_duration(pc.get("timeout", "5s"))
        invoke = go_duration(pc.get("invoke_interval", "30s"))
    except ValueError as exc:
        problems.append(str(exc))
    for name in ("max_output_length", "concurrency"):
        if name in pc and (not isinstance(pc[name], int) or isinstance(pc[name], bool)):
            problems.append(f"pluginConfig.{name}: not an integer")
    if not isinstance(doc.get("source"), str) or not doc["source"]:
        problems.append("source: missing")
    conditions = doc.get("conditions", [])
    for i, cond in enumerate(conditions):
        keys(cond, _CONDITION, f"conditions[{i}]")
    for i, rule in enumerate(doc.get("rules", [])):
        keys(rule, _RULE, f"rules[{i}]")
        if rule.get("type") not in ("temporary", "permanent"):
            problems.append(f"rules[{i}].type: {rule.get('type')!r}")
        if "timeout" in rule:
            try:
                rule_timeout = go_duration(rule["timeout"])
            except ValueError as exc:
                problems.append(f"error in parsing rule timeout: {exc}")
            else:
                if timeout is not None and rule_timeout > timeout:
                    problems.append("plugin timeout is greater than global timeout")
        if not isinstance(rule.get("args", []), list):
            problems.append(f"rules[{i}].args: not a list")
        if not os.path.exists(str(rule.get("path"))):
            problems.append(f"rule path {rule.get('path')!r} does not exist")
        if rule.get("type") == "permanent" and not any(
            c.get("type") == rule.get("condition") for c in conditions
        ):
            problems.append(
                f"Permanent problem {rule.get('condition')} does not have preset default condition."
            )
    assert invoke is None or invoke >= 0
    return problems


# --- NPD's plugin run, as plugin.go does it ------------------------------------------------------------


def npd_run(path: str, args: list[str], timeout: float, max_output_length: int) -> tuple[str, str, float]:
    """(status, message, seconds) of one invocation."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    killed = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    output = out[:MAX_PLUGIN_BUFFER].decode("utf-8", "replace").strip()
    if killed:
        output = f"Timeout when running plugin {path!r}: output - {output!r}"
    output = output.encode()[:max_output_length].decode("utf-8", "ignore")
    return STATUS.get(proc.returncode, "Unknown") if not killed else "Unknown", output, time.monotonic() - t0


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The shipped config with its rule's path pointing at this checkout's CLI, as a deployer installs it."""
    doc = json.loads(CONFIG.read_text())
    wrapper = tmp_path_factory.mktemp("npd") / "spark-validate"
    repo, python = shlex.quote(str(REPO)), shlex.quote(sys.executable)  # the checkout's path may have spaces
    # NPD's state between runs goes to this test's own directory, not the host's /var/lib (npd_state)
    state = shlex.quote(str(tmp_path_factory.mktemp("npd-state")))
    wrapper.write_text(
        f'#!/bin/sh\nSTATE_DIRECTORY={state} PYTHONPATH={repo} exec {python} -m validator "$@"\n'
    )
    wrapper.chmod(0o755)
    doc["rules"][0]["path"] = str(wrapper)
    return str(wrapper), doc


def test_the_shipped_config_is_valid_for_npd(plugin: tuple[str, dict[str, Any]]) -> None:
    _, doc = plugin
    assert validate_config(doc) == []
    shipped = json.loads(CONFIG.read_text())
    # as shipped, only the install path is left to the deployer
    assert validate_config(shipped) == [f"rule path {shipped['rules'][0]['path']!r} does not exist"]
    rule = doc["rules"][0]
    assert rule["args"][0] == "npd"
    inner = float(rule["args"][rule["args"].index("--timeout") + 1])
    assert inner < go_duration(rule["timeout"]) <= go_duration(doc["pluginConfig"]["timeout"])
    limit = int(rule["args"][rule["args"].index("--max-output-length") + 1])
    assert limit == doc["pluginConfig"]["max_output_length"]


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("plugin",), "customs", "Only support"),
        (("rules", 0, "timeout"), "31s", "greater than global timeout"),
        (("rules", 0, "timeout"), "30 s", "invalid duration"),
        (("rules", 0, "condition"), "SomethingElse", "does not have preset default condition"),
        (("pluginConfig", "invoke_intervall"), "60s", "unknown key"),
        (("rules", 0, "path"), "/nonexistent/spark-validate", "does not exist"),
    ],
)
def test_the_validator_refuses_what_npd_refuses(
    plugin: tuple[str, dict[str, Any]], path: tuple[Any, ...], value: str, problem: str
) -> None:
    doc = json.loads(json.dumps(plugin[1]))
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    assert any(problem in p for p in validate_config(doc)), validate_config(doc)


@contextmanager
def _sim(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    port = free_port()
    cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), "--speed", "1000"]
    cmd += ["--startup-seconds", "0.1", *args]
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen(cmd, cwd=REPO, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, what="simulator", timeout=30)
        yield proc
    finally:
        stop(proc)


def _rule_args(doc: dict[str, Any], *extra: str) -> list[str]:
    args = list(doc["rules"][0]["args"])
    return [*args, *extra]


def test_a_passing_server_is_ok_within_the_message_limit(plugin: tuple[str, dict[str, Any]]) -> None:
    path, doc = plugin
    with _sim(env={"SGLANG_ENABLE_FP8_LM_HEAD": "1"}) as server:
        status, message, took = npd_run(path, _rule_args(doc, "--pid", str(server.pid)), 30, 80)
    assert status == "OK", message
    assert message.startswith("OK 1 server(s) pass") and len(message) <= 80
    assert took < 25


def test_a_failing_critical_check_is_a_problem_naming_it(plugin: tuple[str, dict[str, Any]]) -> None:
    path, doc = plugin
    with _sim("--scenario", "backend-auto", env={"SGLANG_ENABLE_FP8_LM_HEAD": "1"}) as server:
        status, message, _ = npd_run(path, _rule_args(doc, "--pid", str(server.pid)), 30, 80)
    assert status == "NonOK", message
    assert message.startswith("FAIL ") and f"moe.backend@{server.pid}" in message
    assert len(message.encode()) <= 80 and "\n" not in message


def test_a_long_message_is_cut_by_the_plugin_itself(plugin: tuple[str, dict[str, Any]]) -> None:
    path, doc = plugin
    with _sim("--scenario", "backend-auto", env={"SGLANG_ENABLE_FP8_LM_HEAD": "1"}) as server:
        args = _rule_args(doc, "--pid", str(server.pid))
        args[args.index("--max-output-length") + 1] = "16"
        proc = subprocess.run([path, *args], capture_output=True, timeout=60)
    line = proc.stdout.decode()
    assert proc.returncode == 1 and line.endswith("\n") and line.count("\n") == 1
    assert len(line.rstrip("\n")) == 16 and line.rstrip("\n").endswith("...")


def test_no_server_is_unknown(plugin: tuple[str, dict[str, Any]]) -> None:
    """In a PID namespace of its own (``unshare``, root in CI) the plugin finds no server: Unknown."""
    path, doc = plugin
    unshare, *args = in_pid_namespace([path, *_rule_args(doc)])
    status, message, _ = npd_run(unshare, args, 30, 80)
    assert status == "Unknown" and message.startswith("UNKNOWN no SGLang server process found"), message


def test_a_server_that_never_answers_is_unknown_before_npds_timeout(
    plugin: tuple[str, dict[str, Any]],
) -> None:
    """A process whose argv is a server's and whose port accepts but never answers: the plugin ends within
    its own --timeout (1 s here), well before NPD would kill it (5 s), and never says OK."""
    path, doc = plugin
    port = free_port()
    top = Path(tempfile.mkdtemp(prefix="sv-npd-"))
    (top / "sglang").mkdir()
    (top / "sglang" / "__init__.py").write_text("")
    (top / "sglang" / "launch_server.py").write_text(
        "import socket, sys, time\n"
        f"s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port})); s.listen(64)\n"
        "time.sleep(60)\n"
    )
    hung = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--port", str(port)],
        cwd=top, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_listening(port, hung, what="hung server", timeout=30)
        args = _rule_args(doc, "--pid", str(hung.pid))
        args[args.index("--timeout") + 1] = "1"
        status, message, took = npd_run(path, args, 5, 80)
    finally:
        stop(hung)
    # Within its own budget the plugin either gives up ("did not finish") or, its HTTP reads being bounded
    # by half the budget, reports what it proved without the server: this argv fails preflight outright.
    # Which one depends on how fast this machine starts it; never OK, and always before NPD's 5 s.
    assert status in ("Unknown", "NonOK"), message
    assert message.startswith("UNKNOWN did not finish within 1 s") or message.startswith(
        "FAIL moe.backend@"
    ), message
    assert took < 4.5


# --- a stall, told over two runs (npd_state) -------------------------------------------------------------


def _post(port: int, wait: bool = True) -> None:
    import threading

    import httpx

    def send() -> None:
        body = {"text": "x", "sampling_params": {"max_new_tokens": 200, "temperature": 0}}
        with contextlib.suppress(httpx.HTTPError):  # the simulator stopped under a held request
            web.post(f"http://127.0.0.1:{port}/generate", json=body, timeout=120)

    if wait:
        send()
    else:
        threading.Thread(target=send, daemon=True).start()


@contextmanager
def _sim_on(port: int, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), "--speed", "1000"]
    cmd += ["--startup-seconds", "0.1", "--enable-metrics", "--idle-metrics-interval", "1", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, what="simulator", timeout=30)
        # listening is not ready: a request sent before the warm-up ends does not count towards the stall's
        # trigger (--stall-after-requests), and the request meant to be held would pass straight through
        wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        yield proc
    finally:
        stop(proc)


STALL_AFTER = 5.0  # over the first run's own second look at /metrics (2 s): one run alone cannot tell


def test_two_runs_tell_a_stall_and_a_broken_draft_apart(
    plugin: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    """NPD's own way: the plugin run twice, its state kept between the runs. A server whose request waits
    with nothing completed is `FAIL server.progress` at the second run (one run, or runs with no state,
    cannot tell); a broken draft under traffic is `FAIL spec.accept_length`, never a stall."""
    path, doc = plugin
    state = tmp_path / "state"
    extra = ("--state-dir", str(state), "--stall-after", str(STALL_AFTER))
    port = free_port()
    with _sim_on(port, "--scenario", "stall", "--stall-after-requests", "1") as server:
        _post(port)  # completes: the server's counters exist
        _post(port, wait=False)  # held by the stalled scheduler
        args = _rule_args(doc, "--pid", str(server.pid), *extra)
        first = npd_run(path, args, 30, 80)
        stateless = npd_run(path, _rule_args(doc, "--pid", str(server.pid), "--no-state"), 30, 80)
        time.sleep(STALL_AFTER)
        second = npd_run(path, args, 30, 80)
    assert first[0] == "OK" and stateless[0] == "OK", (first, stateless)
    assert second[0] == "NonOK" and second[1] == f"FAIL server.progress@{server.pid}", second
    assert (state / "progress.json").stat().st_mode & 0o777 == 0o600
    assert state.stat().st_mode & 0o777 == 0o700
    port = free_port()
    with _sim_on(port, "--scenario", "draft-head-weight-only") as server:
        args = _rule_args(doc, "--pid", str(server.pid), *extra)
        _post(port)
        first = npd_run(path, args, 30, 80)
        _post(port)
        second = npd_run(path, args, 30, 80)
    assert second[0] == "NonOK" and f"spec.accept_length@{server.pid}" in second[1], (first, second)
    assert "server.progress" not in first[1] + second[1]


def _npd_state_run(plugin: tuple[str, dict[str, Any]], state: Path) -> subprocess.CompletedProcess[bytes]:
    """One plugin run that judges nothing (a PID that is no server) but loads and saves its state."""
    path, doc = plugin
    args = _rule_args(doc, "--pid", "999999999", "--timeout", "10", "--state-dir", str(state))
    return subprocess.run([path, *args], capture_output=True, timeout=60, check=False)


def test_a_state_file_another_user_could_write_is_never_used(
    plugin: tuple[str, dict[str, Any]], tmp_path: Path, attacker: Any, shared: Path
) -> None:
    """The second local user attacks the state between runs (it decides whether a stall is told): a
    directory of theirs where ours should be, a symbolic link planted for it, a file of theirs in ours,
    a FIFO, a huge file, garbage. Each is refused on stderr, the run answers its one line as ever, and
    only a directory of ours is written (0700, the file 0600, replacing what was refused)."""
    from tests.support.second_user import run_as

    # a directory anyone can write (the attacker creates entries in it)
    forged = b'{"version": 1, "boot_id": null, "servers": {}}'

    # their directory where ours should be: neither read nor written
    theirs = shared / "npd"
    assert run_as(attacker, ["mkdir", "-m", "0755", str(theirs)]).returncode == 0
    assert (
        run_as(attacker, ["sh", "-c", f"printf '%s' '{forged.decode()}' > {theirs}/progress.json"]).returncode
        == 0
    )
    res = _npd_state_run(plugin, theirs)
    assert res.stdout.decode().count("\n") == 1 and "not written" in res.stderr.decode(), res.stderr
    assert (theirs / "progress.json").read_bytes() == forged and (
        theirs / "progress.json"
    ).stat().st_uid == attacker.uid

    # a symbolic link they planted for our directory, to a directory of theirs
    target = shared / "elsewhere"
    assert run_as(attacker, ["mkdir", "-m", "0700", str(target)]).returncode == 0
    assert run_as(attacker, ["ln", "-s", str(target), str(shared / "linked")]).returncode == 0
    res = _npd_state_run(plugin, shared / "linked")
    assert "not written" in res.stderr.decode(), res.stderr

    # ours, below a directory anyone can write: never made there (no reader would trust it back)
    mine = shared / "mine"
    res = _npd_state_run(plugin, mine)
    assert res.returncode == 2 and res.stdout.decode().count("\n") == 1
    assert f"not written: {mine}: directory /tmp on the way is writable" in res.stderr.decode(), res.stderr
    assert not mine.exists()

    # a link of theirs toward a directory only root can read: nothing beyond the shared directory is
    # looked at, so what npd says is the same whether what the link points at exists or not
    secret = tmp_path / "rootonly"
    secret.mkdir(mode=0o700)
    (secret / "id_ed25519").write_text("key\n")
    said = []
    for probe in ("id_ed25519", "absent"):
        link = shared / f"p_{probe}"
        assert run_as(attacker, ["ln", "-s", str(secret / probe / "x"), str(link)]).returncode == 0
        said.append(_npd_state_run(plugin, link).stderr.decode().replace(probe, "NAME"))
    assert said[0] == said[1] and "regular file" not in said[0], said

    # ours, private: what lands in it is refused, then replaced by this run's
    private = tmp_path / "private"
    assert _npd_state_run(plugin, private).stderr == b""
    state = private / "progress.json"
    cases: list[tuple[str, Any]] = [
        ("another user", lambda: (state.write_bytes(forged), os.chown(state, attacker.uid, attacker.gid))),
        ("FIFO", lambda: (state.unlink(), os.mkfifo(state, 0o600))),
        ("over the", lambda: state.write_bytes(b" " * (1 << 20))),
        ("not JSON", lambda: state.write_bytes(b"{" * 5000)),
        ("symbolic link", lambda: (state.unlink(), state.symlink_to(shared / "mine" / "progress.json"))),
    ]
    for said, plant in cases:
        plant()
        res = _npd_state_run(plugin, private)
        assert res.returncode == 2 and res.stdout.decode().count("\n") == 1, res
        assert said in res.stderr.decode(), (said, res.stderr)
        st = os.lstat(state)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o600
        assert json.loads(state.read_bytes())["version"] == 1
        assert _npd_state_run(plugin, private).stderr == b""  # its own file is read back


_SWAPPER = """
import ctypes, os, select, sys
os.setgroups([]); os.setresgid({gid}, {gid}, {gid}); os.setresuid({uid}, {uid}, {uid})
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
print("ready", flush=True)
swaps = 0
for _ in range(20000):  # until the test closes stdin (bounded: 20000 * 1000 exchanges)
    for _ in range(1000):
        if libc.renameat2(-100, a, -100, b, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            sys.exit(f"renameat2: errno {{ctypes.get_errno()}}")
        swaps += 1
    if select.select([sys.stdin], [], [], 0)[0]:
        break
print(swaps, flush=True)
"""


def test_a_directory_swapped_for_a_link_while_the_state_is_written_is_never_written_through(
    tmp_path: Path, attacker: Any, shared: Path
) -> None:
    """The second local user races the state's writer (``--state-dir`` below a directory anyone can
    write): their own directory on the way, exchanged over and over (``renameat2 RENAME_EXCHANGE``) with a
    link of theirs to a root-only directory whose last name is the state directory's. A writer that checks
    the path's links and then creates and opens it by name follows the link swapped in between, and
    replaces root's ``progress.json`` there (before the fix: within ~200 writes). Each write, thousands of
    them, is made in the directory it checked or refused, and root's file is never touched."""
    from validator.commands.npd_state import ProgressStore

    victim = tmp_path / "victim" / "npd"
    victim.mkdir(parents=True, mode=0o700)
    (victim / "progress.json").write_text("root's own\n")
    theirs, link = shared / "theirs", shared / "theirs.lnk"
    os.mkdir(theirs)
    os.symlink(victim.parent, link)
    for made in (theirs, link):
        os.chown(made, attacker.uid, attacker.gid, follow_symlinks=False)
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER.format(uid=attacker.uid, gid=attacker.gid), str(theirs), str(link)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    outcomes: dict[str, int] = {}
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        for _ in range(3000):
            why = ProgressStore(theirs / "npd", 30.0).save()
            outcomes["written" if why is None else "refused"] = (
                outcomes.get("written" if why is None else "refused", 0) + 1
            )
            assert (victim / "progress.json").read_text() == "root's own\n", outcomes
    finally:
        out, _ = swapper.communicate("stop\n", timeout=60)
    assert swapper.returncode == 0 and int(out.split()[-1]) > 0, out
    assert outcomes.get("refused", 0) > 0, outcomes  # the attacker's link was met: the race was run
