"""The API key never leaves the validator: `check` against the simulator with --api-key set, searched for
the key in every output format, the report file, and every line the tool prints on stderr.

The simulator's /server_info echoes ``api_key`` like the real SGLang 0.5.23 does (it is not redacted
there), so a report that copies server state carelessly would leak it; these tests would catch that.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import web
from tests.support.check_helpers import CheckRun, evidence_files, run_check
from tests.support.sim_process import SimProcess, sim_process
from validator.outputs import formats

pytestmark = pytest.mark.timeout(120)

KEY = "sk-spark-" + secrets.token_hex(16)  # unique per run: any hit is a real leak, never a coincidence
WRONG = "sk-wrong-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("key") / "api-key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def auth_sim(tmp_path_factory: pytest.TempPathFactory, key_file: Path) -> Iterator[SimProcess]:
    tmp = tmp_path_factory.mktemp("auth")
    with sim_process(tmp, "--scenario", "auth-required", "--api-key-file", str(key_file)) as sim:
        yield sim


def assert_no_key(run: CheckRun, *keys: str) -> None:
    for key in keys:
        assert key not in run.stdout, "key in stdout"
        assert key not in run.stderr, "key in stderr"
    assert "Traceback" not in run.stderr, run.stderr


def test_the_simulator_really_exposes_the_key_in_server_info(auth_sim: SimProcess) -> None:
    """Precondition: without this, the searches below would prove nothing."""
    info = web.get(f"{auth_sim.url}/server_info", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert info.status_code == 200
    assert KEY in info.text


@pytest.mark.parametrize("fmt", list(formats()))
def test_key_file_passes_and_the_key_appears_in_no_format(
    auth_sim: SimProcess, key_file: Path, fmt: str
) -> None:
    run = run_check(
        auth_sim.url, "--wait", "20", "--api-key-file", str(key_file), *evidence_files(auth_sim), fmt=fmt
    )
    assert run.rc == 0, run.explain()
    assert_no_key(run, KEY)
    assert run.stdout.strip()  # a report was really written
    if fmt == "json":
        assert run.report is not None and run.report["verdict"] == "pass"
        assert run.report["probe"]["requests"] >= 1  # authenticated /generate calls really happened


def test_key_from_environment_and_report_file(auth_sim: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run = run_check(
        auth_sim.url,
        "--wait",
        "20",
        "--output",
        str(out),
        *evidence_files(auth_sim),
        env={"SPARK_VALIDATE_API_KEY": KEY},
    )
    assert run.rc == 0, run.explain()
    assert_no_key(run, KEY)
    text = out.read_text()
    assert '"verdict": "pass"' in text
    assert KEY not in text


def test_without_the_key_exits_69_with_a_clear_401(auth_sim: SimProcess) -> None:
    run = run_check(auth_sim.url, "--wait", "20")
    assert_no_key(run, KEY)
    message = run.not_ready()
    assert "401" in message and "--api-key-file" in message
    text = run_check(auth_sim.url, "--wait", "20", fmt="text")
    assert text.rc == 69
    assert "401" in text.stdout + text.stderr


def test_a_wrong_key_is_refused_and_not_echoed(auth_sim: SimProcess, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong-key"
    wrong.write_text(WRONG)
    for fmt in formats():
        run = run_check(auth_sim.url, "--wait", "20", "--api-key-file", str(wrong), fmt=fmt)
        assert run.rc == 69, run.explain()
        assert_no_key(run, KEY, WRONG)
        if formats()[fmt].messages:  # prom carries no message to say it in
            assert "401" in run.stdout + run.stderr
