"""Nothing that reaches a user carries a secret or a terminal control sequence.

Reproduced the way they were found: a pasted token in argv, a unit line and an env file (exit-65 lines),
``--url http://user:pass@host``, a server that echoes the API key back (in ``/server_info`` under a name no
redactor knows, and in a ``/generate`` error), in every output format, in the sidecar's ``/report`` and its
log; and a server whose error message would redraw a WARN line as PASS on a terminal.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.bounded_run import run_bounded
from tests.support.daemon_process import daemon_process
from tests.support.hostile_server import hostile_process
from tests.support.second_user import User, run_as
from validator.outputs import formats

KEY = "q7Vt9ZpLw3XkR2mN"  # no recognisable shape: only its registration can catch it
TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWx"
PASSWORD = "pw-Zx81Lq0Kd"


def _preflight(*args: str) -> tuple[int, str]:
    res = run_bounded(["preflight", *args], timeout=30)
    return res.rc, res.stdout + res.stderr


@contextmanager
def _attackers_dir(attacker: User) -> Iterator[Path]:
    """A directory the second user owns and root can reach (0755), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="sv-secret-"))
    try:
        os.chmod(base, 0o755)
        os.chown(base, attacker.uid, attacker.gid)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _write_as(attacker: User, path: Path, text: str, *, executable: bool = False) -> None:
    """``text`` written to ``path`` by the second user themselves (their file, their mode)."""
    mode = f"; chmod 755 {path}" if executable else ""
    made = run_as(attacker, ["sh", "-c", f"cat > {path}{mode}"], input=text.encode())
    assert made.returncode == 0, made.stderr


def test_exit_65_lines_never_quote_a_secret(tmp_path: Path) -> None:
    cmd = f"python -m sglang.launch_server --model-path /m --api_key {KEY}"
    rc, out = _preflight("--launch-cmd", cmd)
    assert rc == 65 and "unrecognized arguments" in out and KEY not in out, out

    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nEnvironment=HF-TOKEN={TOKEN}\n"
        "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n"
    )
    rc, out = _preflight("--unit", str(unit))
    assert rc == 65 and f"{unit}:2" in out and "HF-TOKEN" in out and TOKEN not in out, out

    env = tmp_path / "sglang.env"
    env.write_text(f"SGLANG_ENABLE_FP8_LM_HEAD=1\n{KEY}\n")
    rc, out = _preflight(
        "--launch-cmd", "python -m sglang.launch_server --model-path /m", "--env-file", str(env)
    )
    assert rc == 65 and f"{env}:2" in out and KEY not in out, out

    unit.write_text(f"[Service]\n{KEY}\nExecStart=/usr/bin/python3 -m sglang.launch_server\n")
    rc, out = _preflight("--unit", str(unit))
    assert rc == 65 and f"{unit}:2" in out and KEY not in out, out


@pytest.mark.parametrize("fmt", list(formats()))
def test_echoed_key_and_url_password_never_reach_any_format(tmp_path: Path, fmt: str) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    with hostile_process("echo_key") as url:
        cred_url = url.replace("http://", f"http://operator:{PASSWORD}@")
        res = run_bounded(
            ["check", "--url", cred_url, "--api-key-file", str(key_file), "--format", fmt], timeout=60
        )
    out = res.stdout + res.stderr
    assert res.rc == 69, out[-1500:]  # the /generate error leaves the probe without evidence
    if formats()[fmt].messages:  # prom carries no message that could quote it
        assert "bad request from" in out  # the echo did reach the report, scrubbed
    assert KEY not in out and PASSWORD not in out and "operator" not in out, out


def test_sidecar_report_and_log_never_carry_the_echoed_key(tmp_path: Path) -> None:
    with hostile_process("echo_key") as url:
        cred_url = url.replace("http://", f"http://operator:{PASSWORD}@")
        env = {"SPARK_VALIDATE_API_KEY": KEY}
        with daemon_process(tmp_path, cred_url, "--wait", "5", env=env) as d:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and d.get("/report").status_code != 200:
                time.sleep(0.2)
            report = d.get("/report")
            assert report.status_code == 200
            assert "bad request from" in report.text
            log = d.log()
    for text in (report.text, log):
        assert KEY not in text and PASSWORD not in text, text[-2000:]


def test_control_sequences_from_the_server_are_inert_in_text_output() -> None:
    with hostile_process("ansi") as url:
        res = run_bounded(["check", "--url", url, "--format", "text"], timeout=60)
        as_json = run_bounded(["check", "--url", url, "--format", "json"], timeout=60)
        junit = run_bounded(["check", "--url", url, "--format", "junit"], timeout=60)
    assert res.rc == 69, res.stderr[-800:]
    assert "\x1b" not in res.stdout and "\r" not in res.stdout and "\u202e" not in res.stdout
    assert "\x07" not in res.stdout
    assert "\\x1b[2K" in res.stdout  # shown, visibly, as what it was
    # JUnit: XML 1.0 cannot hold ESC or BEL; the file must still parse (CI reads it), the bytes shown
    assert "\\x1b[2K" in ET.tostring(ET.fromstring(junit.stdout), encoding="unicode")
    # JSON keeps the server's string exactly (json escapes it; nothing is lost for a machine reader)
    messages = " ".join(c["message"] for c in json.loads(as_json.stdout)["checks"])
    assert "\x1b[2K" in messages


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_another_users_script_never_carries_a_credential_of_the_readers_environment(
    attacker: User, tmp_path: Path, fmt: str
) -> None:
    """Red team 19: root preflights another user's script with ``HF_TOKEN`` in root's environment; the
    script passes ``"${HF_TOKEN:3}"`` (past the ``hf_`` the redactor knows) to a flag argparse refuses,
    and the refusal quoted the rest of root's token, in every format. To another user's script a
    credential of the reader's environment is unknown; root's own script still reads it (its own)."""
    token = "hf_" + "Zq7" * 8
    line = (
        "#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m --served-model-name "
        '"${HF_TOKEN:3}" --tool-call-parser "${HF_TOKEN:3}"\n'
    )
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / "start.sh", line)
        env = {"HF_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        res = run_bounded(["preflight", "--script", str(base / "start.sh"), "--format", fmt], env=env)
    out = res.stdout + res.stderr
    assert token[3:] not in out and token[3:10] not in out, out[-600:]
    assert "a credential of the reader's environment" in out, out[-600:]
    mine = tmp_path / "mine.sh"
    mine.write_text(line)
    res = run_bounded(["preflight", "--script", str(mine), "--format", fmt], env=env)
    assert "a credential of the reader's environment" not in res.stdout + res.stderr


@pytest.mark.parametrize(
    "exec_start",
    [
        # the string slices the credential itself
        "/bin/bash -c 'exec python3 -m sglang.launch_server --model-path /m --tool-call-parser "
        '"$${HF_TOKEN:3}"\'',
        # systemd expands it into an argument the string slices, or into the string
        "/bin/bash -c 'exec python3 -m sglang.launch_server --model-path /m --tool-call-parser \"$${1:3}\"' "
        "zero ${HF_TOKEN}",
        "/bin/sh -c 'T=${HF_TOKEN}; exec python3 -m sglang.launch_server --model-path /m --tool-call-parser "
        '"$${T#hf_}"\'',
        # docker's -e NAME copies it from the reader's environment into the container's shell
        "/usr/bin/docker run --rm -e HF_TOKEN img bash -c 'exec python3 -m sglang.launch_server --model-path "
        '/m --tool-call-parser "$${HF_TOKEN:3}"\'',
        # a script of root's, given it as an argument by their unit
        "{base}/root-start.sh ${HF_TOKEN}",
    ],
)
def test_another_users_unit_that_runs_bash_c_never_carries_a_credential_of_the_readers_environment(
    attacker: User, tmp_path: Path, exec_start: str
) -> None:
    """A unit's ``ExecStart=/bin/bash -c STRING`` is read as a script is: the string can slice a variable
    (``${HF_TOKEN:3}``) as a script can, so in another user's unit a credential of the reader's environment
    is unknown, as in their script, and so is a string or argument systemd put one into."""
    token = "hf_" + "Wx4" * 8
    with _attackers_dir(attacker) as base:
        unit = f"[Service]\nExecStart={exec_start.replace('{base}', str(base))}\n"
        root_script = base / "root-start.sh"
        root_script.write_text(
            '#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m --tool-call-parser "${1:3}"\n'
        )
        root_script.chmod(0o755)
        _write_as(attacker, base / "ling.service", unit)
        env = {"HF_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        res = run_bounded(["preflight", "--unit", str(base / "ling.service"), "--format", "json"], env=env)
    out = res.stdout + res.stderr
    assert token[3:] not in out and token[3:10] not in out, out[-600:]
    assert "a credential of the reader's environment" in out, out[-600:]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_unit_or_compose_file_never_prints_a_credential_of_the_readers_environment(
    attacker: User, tmp_path: Path, fmt: str
) -> None:
    """Red team 21: a unit's ``${VAR}`` and Compose's interpolation read the reader's environment, and
    ``--tool-call-parser x${HF_TOKEN}`` (or ``x${OPENAI_API_KEY}``) put root's whole credential into
    argparse's refusal: the ``x`` before it hides the ``hf_`` shape from the redactor (no word boundary),
    and d8f0d68 made credentials unknown to another user's scripts only. The credentials of the reader's
    environment are now scrubbed from whatever the reading prints: another user's unit, root's own
    Compose file alike."""
    token, key = "hf_" + "Zq7" * 8, "Kv4" * 6
    flags = "--model-path /m --served-model-name x${OPENAI_API_KEY} --tool-call-parser x${HF_TOKEN}"
    unit = f"[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server {flags}\n"
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        f"services:\n  sglang:\n    image: img\n    command: python3 -m sglang.launch_server {flags}\n"
    )
    env = {"HF_TOKEN": token, "OPENAI_API_KEY": key, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / "sglang.service", unit)
        outs = [
            run_bounded(["preflight", *given, "--format", fmt], env=env)
            for given in (["--unit", str(base / "sglang.service")], ["--compose", str(compose)])
        ]
    for res, said in zip(
        outs, ("unknown to another user's unit", "invalid choice: 'x<redacted>'"), strict=True
    ):
        # another user's unit expanding a variable of the reader's is not read at all (red team 22);
        # root's own Compose file is, and its refusal scrubbed
        out = res.stdout + res.stderr
        assert said in out, out[-600:]
        assert token[3:] not in out and key not in out, out[-600:]


def test_another_users_script_never_carries_a_credential_the_readers_environment_holds_under_any_name(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 21: d8f0d68 hid from another user's script only the variables ``is_secret_key`` names
    (``HF_TOKEN``); ``HFTOKEN=hf_...`` (its shape), ``DATABASE_URL=postgres://u:pw@h`` (URL credentials)
    and ``MY_APIKEY`` were sliced past the redactor (``${HFTOKEN:3}``) into argparse's refusal."""
    values = {
        "HFTOKEN": "hf_" + "Zq7" * 8,
        "DATABASE_URL": "postgres://svc:" + "Pw9" * 6 + "@db/x",
        "MY_APIKEY": "Ak5" * 6,
    }
    env = {**values, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    with _attackers_dir(attacker) as base:
        for name, cut in (("HFTOKEN", 3), ("DATABASE_URL", 15), ("MY_APIKEY", 2)):
            line = (
                "#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m --tool-call-parser "
                f'"${{{name}:{cut}}}"\n'
            )
            _write_as(attacker, base / "start.sh", line)
            res = run_bounded(["preflight", "--script", str(base / "start.sh")], env=env)
            out = res.stdout + res.stderr
            assert values[name][cut : cut + 8] not in out, (name, out[-600:])
            assert f"${name}: a credential of the reader's environment" in out, (name, out[-600:])


def test_another_users_compose_shell_string_never_slices_a_credential_of_the_readers_environment(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 21: another user's Compose file copies root's token into the container's environment
    (``environment: [HF_TOKEN]``, taken from the reader's) and slices it in the container's shell string
    (``bash -c '... $${HF_TOKEN:3}'``): argparse's refusal quoted the rest of root's token (d8f0d68 hid
    credentials from another user's script file only). To such a shell string they are unknown too."""
    token = "hf_" + "Zq7" * 8
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  sglang:\n    image: img\n    environment: [HF_TOKEN]\n    command: [bash, -c, "
        '"exec python3 -m sglang.launch_server --model-path /m --tool-call-parser $${HF_TOKEN:3}"]\n'
    )
    os.chown(compose, attacker.uid, attacker.gid)
    # a Compose file sits in a root-owned directory the attacker can enter: the private tree's directories
    # are opened to traversal for the run (never to listing or writing)
    closed = [(d, d.stat().st_mode) for d in (tmp_path, *tmp_path.parents) if not d.stat().st_mode & 0o001]
    env = {"HF_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    try:
        for d, mode in closed:
            os.chmod(d, mode | 0o011)
        res = run_bounded(["preflight", "--compose", str(compose), "--service", "sglang"], env=env)
    finally:
        for d, mode in closed:
            os.chmod(d, mode)
    out = res.stdout + res.stderr
    assert token[3:10] not in out, out[-600:]
    assert "$HF_TOKEN: a credential of the reader's environment" in out, out[-600:]


_MYSQL, _DB, _KEY = "Vb6Mysql" * 3, "Yh3DbPass" * 3, "Kp9SvKey" * 3
_ROOT_ENV = {
    "MYSQL_PWD": _MYSQL,
    "DATABASE_URL": f"postgres://admin:{_DB}@db/x",
    "SPARK_VALIDATE_API_KEY": _KEY,
}


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        # systemd expands the variable itself, no shell: argparse's refusal quoted it whole
        (
            "unit",
            "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --tool-call-parser ${MYSQL_PWD}\n",
        ),
        (
            "unit",
            "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --tool-call-parser "
            "${SPARK_VALIDATE_API_KEY}\n",
        ),
        (
            "unit",
            "[Service]\nExecStart=/bin/bash -c 'exec python3 -m sglang.launch_server --x \"$$1\"' "
            "z ${MYSQL_PWD}\n",
        ),
        # the string reads them itself, sliced past the URL pattern
        (
            "unit",
            "[Service]\nExecStart=/bin/bash -c 'exec python3 -m sglang.launch_server --model-path /m "
            '--tool-call-parser "$${MYSQL_PWD}" --served-model-name "$${DATABASE_URL:11}"\'\n',
        ),
        (
            "script",
            "#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m "
            '--tool-call-parser "$MYSQL_PWD" --served-model-name "${DATABASE_URL:11}"\n',
        ),
    ],
)
def test_another_users_launch_is_never_handed_a_value_of_the_readers_environment_that_may_be_a_credential(
    attacker: User, tmp_path: Path, kind: str, text: str
) -> None:
    """Red team 22: a credential under a name the redactor does not flag (MySQL's MYSQL_PWD, a password in
    DATABASE_URL), or flagged but with no token shape (SPARK_VALIDATE_API_KEY), in root's environment: another
    user's unit (systemd's ``${VAR}``, with or without ``bash -c``) or script printed it in argparse's
    refusal. To another user's launch such a variable of the reader's environment is unknown; what the unit
    sets itself (Environment=) and plain settings (PATH, SGLANG_*) stay known."""
    name = "ling.service" if kind == "unit" else "start.sh"
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / name, text)
        env = {**_ROOT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        res = run_bounded(["preflight", f"--{kind}", str(base / name), "--format", "json"], env=env)
        out = res.stdout + res.stderr
        assert _MYSQL[:8] not in out and _DB[:8] not in out and _KEY[:8] not in out, out[-600:]
        assert "of the reader's environment" in out, out[-600:]
        # the unit's own variable is theirs: read, not hidden
        own = (
            "[Service]\nEnvironment=MYSQL_PWD=ling3\nExecStart=/bin/bash -c 'exec python3 -m "
            'sglang.launch_server --model-path /m --tool-call-parser "$${MYSQL_PWD}"\'\n'
        )
        if kind == "unit":
            _write_as(attacker, base / name, own)
            res = run_bounded(["preflight", "--unit", str(base / name), "--format", "json"], env=env)
            assert "of the reader's environment" not in res.stdout + res.stderr, res.stdout[-600:]


def test_the_operators_env_file_is_not_handed_to_another_users_unit(attacker: User, tmp_path: Path) -> None:
    """Red team 22: ``--env-file`` (the operator's file, standing in for the unit's EnvironmentFile=) is the
    reader's as its environment is: another user's ``bash -c`` string printed its MYSQL_PWD in argparse's
    refusal (their --script did not: there it is the reader's environment)."""
    secrets = tmp_path / "operator.env"
    secrets.write_text(f"MYSQL_PWD={_MYSQL}\n")
    secrets.chmod(0o600)
    text = (
        "[Service]\nExecStart=/bin/bash -c 'exec python3 -m sglang.launch_server --model-path /m "
        '--tool-call-parser "$${MYSQL_PWD}"\'\n'
    )
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / "ling.service", text)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        args = ["preflight", "--unit", str(base / "ling.service"), "--env-file", str(secrets)]
        res = run_bounded([*args, "--format", "json"], env=env)
    out = res.stdout + res.stderr
    assert _MYSQL[:8] not in out and "of the reader's environment" in out, out[-600:]


@pytest.mark.parametrize(
    ("exec_start", "extra"),
    [
        # their unit copies root's credential into a variable of another name, their script slices it
        ("/usr/bin/env A=${HF_TOKEN} {base}/start.sh", {}),
        ("/usr/bin/nohup /usr/bin/env A=${HF_TOKEN} {base}/start.sh", {}),
        # root's own environment holds a copy under a name the redactor does not know
        ("{base}/start.sh", {"A": "{token}"}),
    ],
)
def test_a_credential_copied_under_another_name_is_unknown_to_another_users_script(
    attacker: User, tmp_path: Path, exec_start: str, extra: dict[str, str]
) -> None:
    """Red team 23: ``ExecStart=/usr/bin/env A=${HF_TOKEN} their.sh`` (b29c8bc reads the script) gave
    their script root's token as ``$A``, which no credential's name marks: ``${A:3}`` in an argparse
    refusal printed the rest of it. A variable holding a credential of the reader's environment is
    unknown to another user's script, as the credential is."""
    token = "hf_" + "Kp3" * 8
    script = '#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m --tool-call-parser "${A:3}"\n'
    with _attackers_dir(attacker) as base:
        unit = f"[Service]\nExecStart={exec_start.replace('{base}', str(base))}\n"
        for name, text in (("start.sh", script), ("ling.service", unit)):
            _write_as(attacker, base / name, text, executable=True)
        env = {"HF_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        env.update({k: v.replace("{token}", token) for k, v in extra.items()})
        res = run_bounded(["preflight", "--unit", str(base / "ling.service"), "--format", "json"], env=env)
        out = res.stdout + res.stderr
        res = run_bounded(["preflight", "--script", str(base / "start.sh")], env={**env, "A": token})
        out += res.stdout + res.stderr
    assert token[3:] not in out and token[3:10] not in out, out[-600:]
    assert "a credential of the reader's environment" in out, out[-600:]


@pytest.mark.parametrize("how", ["--launch-cmd", "--script-arg"])
def test_an_argument_holding_a_credential_is_unknown_to_another_users_script(
    attacker: User, tmp_path: Path, how: str
) -> None:
    """Red team 23: ``--launch-cmd "their.sh $HF_TOKEN"`` (b29c8bc reads the script; before, such a
    command was refused) or ``--script their.sh --script-arg $HF_TOKEN``: their ``"${1:3}"`` printed root's
    token past hf_ in argparse's refusal. An argument holding a credential of the reader's environment is
    unknown to another user's script, as the variable is."""
    token = "hf_" + "Jm8" * 8
    script = '#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m --tool-call-parser "${1:3}"\n'
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / "s.sh", script, executable=True)
        env = {"HF_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        args = (
            ["--launch-cmd", f"{base}/s.sh {token}"]
            if how == "--launch-cmd"
            else ["--script", f"{base}/s.sh", "--script-arg", token]
        )
        res = run_bounded(["preflight", *args, "--format", "json"], env=env)
    out = res.stdout + res.stderr
    assert token[3:] not in out and token[3:10] not in out, out[-600:]
    assert "a credential of the reader's environment" in out, out[-600:]


def test_the_operators_env_file_is_not_handed_to_another_users_unit_script(
    attacker: User, tmp_path: Path
) -> None:
    """Red team 24: as for their ``bash -c`` string (red team 22), ``--env-file`` is the reader's own: their
    unit's ExecStart= script (read since b29c8bc) was handed its MYSQL_PWD as the unit's own setting and
    printed the rest of it in argparse's refusal."""
    secrets = tmp_path / "operator.env"
    secrets.write_text(f"MYSQL_PWD={_MYSQL}\n")
    secrets.chmod(0o600)
    script = "#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m "
    script += '--tool-call-parser "${MYSQL_PWD:2}"\n'
    with _attackers_dir(attacker) as base:
        for name, text in (("s.sh", script), ("ling.service", f"[Service]\nExecStart={base}/s.sh\n")):
            _write_as(attacker, base / name, text, executable=True)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        args = ["preflight", "--unit", str(base / "ling.service"), "--env-file", str(secrets)]
        res = run_bounded([*args, "--format", "json"], env=env)
    out = res.stdout + res.stderr
    assert _MYSQL[2:10] not in out and "of the reader's environment" in out, out[-600:]


@pytest.mark.parametrize(("name", "cut"), [("MYSQL_PWD", 2), ("DATABASE_URL", 13), ("CORP_DB", 2)])
def test_a_credential_roots_unit_sets_is_unknown_to_another_users_script(
    attacker: User, tmp_path: Path, name: str, cut: int
) -> None:
    """Red team 24: root's unit sets ``MYSQL_PWD`` and a ``DATABASE_URL`` with a password (credentials by
    their last word and shape, not by is_secret_key) and runs another user's script: as the unit's own
    settings they were known to that script, and ``"${MYSQL_PWD:2}"`` printed the rest of the password in
    argparse's refusal. What root's unit sets is root's to another user's script, as root's environment
    is: a variable that may hold a credential (not a plain setting, CORP_DB too) is unknown to it."""
    script = "#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m "
    script += f'--tool-call-parser "${{{name}:{cut}}}"\n'
    unit = tmp_path / "ling.service"  # root's unit
    with _attackers_dir(attacker) as base:
        _write_as(attacker, base / "s.sh", script, executable=True)
        unit.write_text(
            f'[Service]\nEnvironment=MYSQL_PWD={_MYSQL} "DATABASE_URL=postgres://u:{_DB}@h/db"\n'
            f"Environment=CORP_DB={_KEY}\nExecStart={base}/s.sh\n"
        )
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        out = ""
        for fmt in ("json", "text"):
            res = run_bounded(["preflight", "--unit", str(unit), "--format", fmt], env=env)
            out += res.stdout + res.stderr
    assert _MYSQL[2:10] not in out and _DB[2:10] not in out and _KEY[2:10] not in out, out[-600:]
