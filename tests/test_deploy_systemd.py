"""deploy/systemd: the unit files pass `systemd-analyze verify`, and they carry the recipe and the contract.

`verify` checks that every program a unit names exists and is executable. The shipped units name
/usr/local/bin/spark-validate and /opt/sglang/venv/bin/python; rather than write into system paths, the test
copies the units into a temporary directory with those two paths rewritten to executable shims there (and
asserts both paths did occur, so the rewrite cannot go stale). Everything else is verified as shipped, and
any warning `verify` prints about the units (unknown key, bad value) fails the test.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.daemon_process import daemon_process
from tests.support.deploy_tools import (
    DEPLOY,
    install_shims,
    load_yaml,
    parse_cli,
    require_tool,
    rewrite_paths,
    run_tool,
    serve_config,
    systemd_seconds,
)
from tests.support.loopback import free_port
from tests.support.private_dir import trusted_copy
from validator.daemon.notify import Notifier

UNITS = ("sglang.service", "spark-validate.service")
PROGRAMS = ("/usr/local/bin/spark-validate", "/opt/sglang/venv/bin/python")
SYSTEMD = DEPLOY / "systemd"


def _unit(name: str) -> dict[str, list[str]]:
    """Key -> values of one unit file (systemd's syntax: sections, `Key=value`, `#` comments)."""
    values: dict[str, list[str]] = {}
    for raw in (SYSTEMD / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        values.setdefault(key.strip(), []).append(value.strip())
    return values


def _env_file() -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in (SYSTEMD / "sglang.env.example").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not KEY=VALUE: {raw!r}"
            env[key] = value
    return env


def _verify(tmp_path: Path, units: dict[str, str]) -> tuple[int, str]:
    analyze = require_tool("systemd-analyze")
    shims = install_shims(tmp_path / "bin", PROGRAMS)
    paths = []
    for name, text in units.items():
        path = tmp_path / name
        path.write_text(rewrite_paths(text, {p: s for p, s in shims.items() if p in text}))
        paths.append(str(path))
    result = run_tool([analyze, "verify", *paths])
    return result.returncode, (result.stdout + result.stderr).strip()


def _shipped() -> dict[str, str]:
    return {name: (SYSTEMD / name).read_text() for name in UNITS}


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    code, output = _verify(tmp_path, _shipped())
    assert code == 0, output
    assert output == "", f"systemd-analyze verify warned:\n{output}"


def test_verify_rejects_a_missing_program_and_an_unknown_key(tmp_path: Path) -> None:
    """The tool really checks what the passing test relies on."""
    units = _shipped()
    broken = units["sglang.service"].replace("ExecStart=/usr/local/bin/", "ExecStart=/nonexistent/")
    code, output = _verify(tmp_path / "a", {"sglang.service": broken})
    assert code != 0 and "/nonexistent/spark-validate" in output
    typo = units["spark-validate.service"].replace("WatchdogSec=", "WatchDogSec=")
    code, output = _verify(tmp_path / "b", {**units, "spark-validate.service": typo})
    assert "Unknown key" in output and "WatchDogSec" in output


def test_server_unit_validates_before_start_and_does_not_restart_loop_on_persistent_failures() -> None:
    unit = _unit("sglang.service")
    exec_start = shlex.split(unit["ExecStart"][0])
    assert exec_start[:3] == ["/usr/local/bin/spark-validate", "launch", "--"]
    assert exec_start[3:] == ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server", "$SGLANG_ARGS"]
    assert set(unit["RestartPreventExitStatus"][0].split()) == {"2", "65", "78"}
    assert unit["EnvironmentFile"] == ["/etc/sglang/sglang.env"]
    timeout = unit["TimeoutStartSec"][0]
    assert timeout.endswith("min") and int(timeout[:-3]) >= 10, "must cover a 6-minute load plus capture"
    assert "SGLANG_PLUGINS=spark_validate" in unit["Environment"]
    # the attestation goes to $RUNTIME_DIRECTORY : a directory only the service user can write
    assert unit["RuntimeDirectory"] == ["spark-validate"] and unit["RuntimeDirectoryMode"] == ["0700"]
    assert not any(e.startswith("SPARK_VALIDATE_ATTESTATION=") for e in unit.get("Environment", []))
    # the home humming and torch caches need, and humming's cache, created for the user and kept
    assert unit["StateDirectory"] == ["sglang"] and unit["CacheDirectory"] == ["humming"]
    assert _env_file()["HUMMING_CACHE_DIR"] == "/var/cache/humming"


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (
            ["launch", "--", "/nonexistent/python", "-m", "sglang.launch_server", "--model-path", "/m"],
            "no program",
        ),
        (
            ["launch", "--env-file", "/nonexistent.env", "--", "python3", "-m", "sglang.launch_server"],
            "bad input",
        ),
        (["launch", "--", "python3", "-m", "sglang.launch_server", "--no-such-flag"], "bad arguments"),
    ],
)
def test_launchs_persistent_failures_are_exempt_from_restart(
    tmp_path: Path, argv: list[str], why: str
) -> None:
    """What `launch` really exits with when a restart cannot help is in RestartPreventExitStatus=."""
    exempt = {int(c) for c in _unit("sglang.service")["RestartPreventExitStatus"][0].split()}
    proc = run_cli(*argv, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert proc.returncode in exempt, (why, proc.returncode, proc.stderr[-500:])


def _output_opened_before_its_directory(path: Path) -> list[str]:
    """systemd issue #27591: StandardOutput=/StandardError= file:, append: and truncate: are opened before
    the exec directories (LogsDirectory=, RuntimeDirectory=, StateDirectory=, CacheDirectory=) are made, so
    a file inside one fails the first start with status=209/STDOUT. Read with spark-validate's systemd
    reader (sections, drop-ins, continuations, as systemd merges them); CI has no systemd as PID 1, so a
    transient unit (systemd-run) cannot show it for real."""
    from validator.sources.launch.systemd_unit import _merged_service

    roots = {
        "LogsDirectory": "/var/log",
        "RuntimeDirectory": "/run",
        "StateDirectory": "/var/lib",
        "CacheDirectory": "/var/cache",
        "ConfigurationDirectory": "/etc",
    }
    items = _merged_service(path)
    made = [f"{roots[k]}/{d}" for k, a in items if k in roots for d in a.value.split() if d]
    problems = []
    for key, a in items:
        if key not in ("StandardOutput", "StandardError"):
            continue
        kind, _, target = a.value.partition(":")
        if kind in ("file", "append", "truncate"):
            problems += [
                f"{key}={a.value} inside {d}" for d in made if target.startswith(d.rstrip("/") + "/")
            ]
    return problems


def test_no_output_file_is_opened_before_systemd_creates_its_directory(tmp_path: Path) -> None:
    for name in UNITS:
        assert _output_opened_before_its_directory(SYSTEMD / name) == [], name
    # the previous unit's form is caught, also when it comes from a drop-in
    old = tmp_path / "old.service"
    old.write_text("[Service]\nExecStart=/bin/true\nLogsDirectory=sglang\n")
    dropin = tmp_path / "old.service.d"
    dropin.mkdir()
    (dropin / "log.conf").write_text("[Service]\nStandardOutput=append:/var/log/sglang/server.log\n")
    assert _output_opened_before_its_directory(old) == [
        "StandardOutput=append:/var/log/sglang/server.log inside /var/log/sglang"
    ]


def test_launch_findings_and_the_server_log_go_to_the_journal() -> None:
    unit = _unit("sglang.service")
    assert unit["StandardOutput"] == ["journal"] and unit["StandardError"] == ["journal"]
    assert "LogsDirectory" not in unit
    sidecar = shlex.split(_unit("spark-validate.service")["ExecStart"][0])
    assert sidecar[sidecar.index("--log") + 1] == "journal:sglang.service"


def test_preflight_env_file_stands_in_for_the_units_environment_file(tmp_path: Path) -> None:
    """Before /etc/sglang/sglang.env exists, `--env-file` reads the example in its place."""
    if Path("/etc/sglang/sglang.env").exists():
        pytest.fail("this host has /etc/sglang/sglang.env: the test needs it absent")
    base = ["preflight", "--format", "json", "--unit", str(SYSTEMD / "sglang.service")]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*base, *extra, env=env, cwd=tmp_path)

    without = run()
    assert without.returncode == 65 and "/etc/sglang/sglang.env does not exist" in without.stderr
    with_file = run("--env-file", str(trusted_copy(SYSTEMD / "sglang.env.example", tmp_path / "etc")))
    assert with_file.returncode != 65, with_file.stderr
    report = json.loads(with_file.stdout)
    (fp8,) = [c for c in report["checks"] if c["id"] == "lm_head.fp8"]
    assert fp8["evidence"]["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"
    set_in = fp8["evidence"]["set_in"]
    assert "--env-file" in set_in and "EnvironmentFile=/etc/sglang/sglang.env" in set_in
    (spec,) = [c for c in report["checks"] if c["id"] == "spec.config"]
    assert spec["status"] == "pass"  # $SGLANG_ARGS came from the stand-in file


def test_sidecar_unit_is_notify_bound_watchdogged_and_reads_the_servers_evidence() -> None:
    unit = _unit("spark-validate.service")
    server = _unit("sglang.service")
    assert unit["Type"] == ["notify"]
    # PartOf, not BindsTo: it stops and restarts with the server unit but outlives a refused start
    assert unit["PartOf"] == ["sglang.service"] and unit["After"] == ["sglang.service"]
    assert "BindsTo" not in unit
    assert unit["Restart"] == ["on-failure"] and unit["WatchdogSec"]
    assert "EnvironmentFile" not in unit  # it reads no recipe settings; its comment says so
    assert unit["User"] == server["User"]  # the attestation directory is the server user's, mode 0700
    argv = shlex.split(unit["ExecStart"][0])
    assert argv[1] == "serve"
    assert argv[argv.index("--listen") + 1] == "127.0.0.1:9464"
    attestation = argv[argv.index("--attestation") + 1]
    assert attestation == f"/run/{server['RuntimeDirectory'][0]}/attestation.json"
    # the server logs to the journal; the sidecar reads its current invocation there, as a member of the
    # group that may read the system journal
    assert argv[argv.index("--log") + 1] == "journal:sglang.service"
    assert server["StandardOutput"] == ["journal"] and unit["SupplementaryGroups"] == ["systemd-journal"]
    assert float(argv[argv.index("--unready-after") + 1]) > 0
    # the sidecar exports what the server unit's launch records, in a directory that outlives a failed start
    state = argv[argv.index("--launch-state") + 1]
    assert f"SPARK_VALIDATE_LAUNCH_STATE={state}" in server["Environment"]
    assert state.startswith(f"/var/lib/{server['StateDirectory'][0]}/")


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--moe-runner-backend", "humming"),
        ("--speculative-algorithm", "NEXTN"),
        ("--speculative-num-steps", "3"),
        ("--speculative-eagle-topk", "1"),
        ("--speculative-num-draft-tokens", "4"),
    ],
)
def test_env_file_carries_the_recipe(flag: str, value: str) -> None:
    env = _env_file()
    assert env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"
    args = shlex.split(env["SGLANG_ARGS"])
    assert args[args.index(flag) + 1] == value
    assert args[args.index("--speculative-draft-model-path") + 1] == args[args.index("--model-path") + 1]
    assert "--enable-fp32-lm-head" not in args
    assert float(args[args.index("--mem-fraction-static") + 1]) <= 0.68


def _exec_args(unit: str) -> list[str]:
    """ExecStart's arguments after the program, with $SGLANG_ARGS split from the example env file."""
    argv = shlex.split(_unit(unit)["ExecStart"][0])
    assert argv[0] == "/usr/local/bin/spark-validate"
    out: list[str] = []
    for arg in argv[1:]:
        out += shlex.split(_env_file()["SGLANG_ARGS"]) if arg == "$SGLANG_ARGS" else [arg]
    return out


def test_server_unit_exec_start_is_accepted_by_the_real_parser() -> None:
    args = _exec_args("sglang.service")
    launch = parse_cli(args)
    assert launch.command == "launch"
    assert launch.cmd[:4] == ["--", "/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"]
    assert launch.cmd[4:] == shlex.split(_env_file()["SGLANG_ARGS"])


def test_sidecar_unit_exec_start_is_accepted_by_the_real_parser() -> None:
    args = _exec_args("spark-validate.service")
    serve = parse_cli(args)
    assert serve.command == "serve" and serve.url == "http://127.0.0.1:30000"
    config = serve_config(args)
    assert config.listen == (("127.0.0.1", 9464),) and config.schedule.probe


def test_watchdog_and_stale_alert_agree_with_serves_schedule() -> None:
    """WATCHDOG=1 comes from the loop's heartbeat (touched every tick, also while a check waits or probes),
    at half of WatchdogSec; a finished run, re-checks included, refreshes the last-run timestamp that
    SparkValidateVerdictStale watches."""
    unit = _unit("spark-validate.service")
    schedule = serve_config(_exec_args("spark-validate.service")).schedule
    watchdog_s = systemd_seconds(unit["WatchdogSec"][0])
    notifier = Notifier({"NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": str(int(watchdog_s * 1e6))})
    assert notifier.watchdog_interval_s == watchdog_s / 2
    # the heartbeat is fresh at every ping (ticks are far shorter than the ping interval) ...
    assert schedule.tick_s * 4 <= watchdog_s / 2
    # a full check's deadline lets it wait the whole --wait for a loading server, then probe
    assert schedule.full_timeout_s > parse_cli(_exec_args("spark-validate.service")).wait_s
    # READY=1 is sent once listening, before the (up to --wait) wait for the server: the start timeout need
    # not cover the server's load
    assert systemd_seconds(unit["TimeoutStartSec"][0]) < schedule.full_timeout_s
    # Longest gap between two finished runs: the longest check (a full one waiting --wait for a loading
    # server, then probing) plus one interval. It must stay under the stale threshold.
    rules = load_yaml(DEPLOY / "prometheus" / "spark-validate.rules.yml")
    (stale,) = [
        r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "SparkValidateVerdictStale"
    ]
    found = re.search(r"> (\d+)", stale["expr"])
    assert found, stale["expr"]
    threshold = float(found.group(1))
    assert threshold == 1800
    longest_gap = max(schedule.full_timeout_s, schedule.recheck_timeout_s) + schedule.interval_s
    assert longest_gap < threshold, (longest_gap, threshold)
    assert schedule.interval_s == 30  # serve's default; 60 runs fit in the threshold
    defaults = serve_config(["serve", "--url", "http://127.0.0.1:30000"]).schedule
    assert max(defaults.full_timeout_s, defaults.recheck_timeout_s) + defaults.interval_s < threshold


def test_sidecar_notifies_ready_and_pets_the_watchdog_while_the_server_still_loads(
    tmp_path: Path, socket_dir: Path
) -> None:
    """The unit's timing as the real process behaves: READY=1 within TimeoutStartSec although the server is
    not up (its first check waits up to --wait 900), then WATCHDOG=1 at half of WATCHDOG_USEC throughout.
    WatchdogSec is scaled from the unit's 60 s to 1 s; nothing else changes."""
    unit = _unit("spark-validate.service")
    args = _exec_args("spark-validate.service")
    absent = free_port()  # nothing listens here: a server still loading
    kept = [a for a in args[1:] if not a.startswith("--url") and a != "http://127.0.0.1:30000"]
    kept = [a for a in kept if a not in ("--listen", "127.0.0.1:9464")]
    sock_path = socket_dir / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(sock_path))
    listener.settimeout(0.1)
    messages: list[tuple[float, str]] = []
    try:
        env = {"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "1000000"}
        t0 = time.monotonic()
        with daemon_process(tmp_path, f"http://127.0.0.1:{absent}", *kept, env=env) as sidecar:
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    messages.append((time.monotonic() - t0, listener.recv(4096).decode()))
            assert sidecar.get("/readyz").status_code == 503
            # still waiting for the server: no check has finished
            assert "\nspark_validate_last_run_timestamp_seconds 0.0\n" in sidecar.get("/metrics").text
            assert sidecar.proc.poll() is None
    finally:
        listener.close()
    assert messages and "READY=1" in messages[0][1], messages
    assert messages[0][0] < systemd_seconds(unit["TimeoutStartSec"][0])
    pets = [t for t, m in messages if "WATCHDOG=1" in m]
    assert len(pets) >= 4, messages  # every 0.5 s over 3 s, with slack for a loaded machine
    assert max(b - a for a, b in itertools.pairwise(pets)) < 1.0  # never past WATCHDOG_USEC


def test_a_start_that_cannot_be_proven_is_retried_a_few_times_then_stays_failed(tmp_path: Path) -> None:
    """launch exits 69 when it cannot prove the start (here: a Hugging Face repo id that is not cached, as
    the unit's user would meet it); the unit retries that (not in RestartPreventExitStatus=), but its start
    limit trips before the interval ends, so a persistent 69 ends in a failed unit, not a 30 s loop."""
    unit = _unit("sglang.service")
    from tests.test_plugin_contract import _sglang_python

    # SGLang 0.5.23's real interpreter, on the recipe whose checks stock 0.5.23 passes: only the
    # checkpoint is unprovable, because the repo id is not in the cache
    proc = run_cli(
        "launch", "--rules", "ling-3.0-flash-baseline", "--", str(_sglang_python()), "-m",
        "sglang.launch_server", "--model-path", "inclusionAI/Ling-3.0-flash-fp4",
        "--moe-runner-backend", "flashinfer_mxfp4", "--trust-remote-code", "--enable-fp32-lm-head",
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf")}, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 69, proc.stderr[-800:]
    assert "69" not in unit["RestartPreventExitStatus"][0].split()
    assert unit["Restart"] == ["on-failure"]
    burst = int(unit["StartLimitBurst"][0])
    interval = systemd_seconds(unit["StartLimitIntervalSec"][0])
    restart = systemd_seconds(unit["RestartSec"][0])
    # each refused attempt takes RestartSec (launch itself well under a second): the burst fits the interval
    assert burst >= 2 and burst * (restart + 5) < interval, (burst, restart, interval)


def _documented_checks() -> list[list[str]]:
    """Every live ``spark-validate check --url`` an operator is told to run first: the README's command
    table and the runbooks' (each as its words, ``sudo -u USER`` dropped)."""
    found = []
    readme = (DEPLOY.parent / "README.md").read_text()
    found += re.findall(r"`(spark-validate check --url [^`]+)`", readme)
    runbooks = (DEPLOY / "README.md").read_text()
    found += [
        " ".join(block.replace("\\\n", " ").split())
        for block in re.findall(
            r"```sh\n((?:sudo -u \w+ )?spark-validate check --url .*?)```", runbooks, re.S
        )
    ]
    found += re.findall(r"`(spark-validate check --url [^`]+)`", runbooks)
    out = []
    for text in found:
        words = shlex.split(text)
        if words[:2] == ["sudo", "-u"]:
            words = words[3:]
        out.append(words)
    return out


def test_the_documented_live_check_carries_the_units_evidence(tmp_path: Path) -> None:
    """The runbooks' first command, run as written (the unit's paths mapped to a simulator's files), is a
    verdict on a default install, not INCONCLUSIVE: it carries --attestation and --log as the shipped
    sidecar unit does; the same command without them is inconclusive (69)."""
    from tests.support.sim_process import sim_process

    sidecar = shlex.split(_unit("spark-validate.service")["ExecStart"][0])
    unit_attestation = sidecar[sidecar.index("--attestation") + 1]
    unit_log = sidecar[sidecar.index("--log") + 1]
    documented = _documented_checks()
    assert len(documented) >= 2, documented  # the README's table and the CriticalCheckFailing runbook
    for words in documented:
        assert words[words.index("--attestation") + 1] == unit_attestation, words
        assert words[words.index("--log") + 1] == unit_log, words
    words = next(w for w in documented if "--wait" not in w)  # the runbook's (the table waits 600 s)
    with sim_process(tmp_path, "--scenario", "healthy") as sim:
        mapped = {unit_attestation: str(sim.attestation), unit_log: str(sim.log)}
        argv = [mapped.get(w, w.replace("http://127.0.0.1:30000", sim.url)) for w in words[1:]]
        as_written = run_cli(*argv, "--wait", "20", timeout=120)
        bare = run_cli("check", "--url", sim.url, "--wait", "20", timeout=120)
    assert as_written.returncode == 0, as_written.stdout[-2000:]
    assert bare.returncode == 69, bare.stdout[-2000:]
