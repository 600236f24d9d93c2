"""deploy/systemd: the unit files pass `systemd-analyze verify`, and they carry the recipe and the contract.

`verify` checks that every program a unit names exists and is executable. The shipped units name
/usr/local/bin/spark-validate and /opt/sglang/venv/bin/python; rather than write into system paths, the test
copies the units into a temporary directory with those two paths rewritten to executable shims there (and
asserts both paths did occur, so the rewrite cannot go stale). Everything else is verified as shipped, and
any warning `verify` prints about the units (unknown key, bad value) fails the test.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.deploy_tools import DEPLOY, install_shims, require_tool, rewrite_paths, run_tool

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


def test_server_unit_validates_before_start_and_does_not_restart_loop_on_78() -> None:
    unit = _unit("sglang.service")
    exec_start = shlex.split(unit["ExecStart"][0])
    assert exec_start[:3] == ["/usr/local/bin/spark-validate", "launch", "--"]
    assert exec_start[3:] == ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server", "$SGLANG_ARGS"]
    assert unit["RestartPreventExitStatus"] == ["78"]
    assert unit["EnvironmentFile"] == ["/etc/sglang/sglang.env"]
    timeout = unit["TimeoutStartSec"][0]
    assert timeout.endswith("min") and int(timeout[:-3]) >= 10, "must cover a 6-minute load plus capture"
    assert "SGLANG_PLUGINS=spark_validate" in unit["Environment"]
    assert "SPARK_VALIDATE_ATTESTATION=/run/sglang/attestation.json" in unit["Environment"]


def test_sidecar_unit_is_notify_bound_watchdogged_and_reads_the_same_evidence() -> None:
    unit = _unit("spark-validate.service")
    server = _unit("sglang.service")
    assert unit["Type"] == ["notify"]
    assert unit["BindsTo"] == ["sglang.service"] and unit["After"] == ["sglang.service"]
    assert unit["Restart"] == ["on-failure"] and unit["WatchdogSec"]
    assert unit["EnvironmentFile"] == server["EnvironmentFile"]
    argv = shlex.split(unit["ExecStart"][0])
    assert argv[1] == "serve"
    assert argv[argv.index("--listen") + 1] == "127.0.0.1:9464"
    attestation = argv[argv.index("--attestation") + 1]
    assert f"SPARK_VALIDATE_ATTESTATION={attestation}" in server["Environment"]
    log = argv[argv.index("--log") + 1]
    assert server["StandardOutput"] == [f"append:{log}"]


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
