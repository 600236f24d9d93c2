"""systemd unit reader: ExecStart as systemd would run it, with the environment it would get."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.launch_recipe import RECIPE_ARGV
from validator.errors import InputError
from validator.sources.launch.systemd_unit import launch_from_unit, load_unit

RECIPE_LINE = " ".join(RECIPE_ARGV)


def _unit(tmp_path: Path, body: str, name: str = "sglang.service") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


def test_recipe_unit_with_environment_file_and_continuations(tmp_path: Path) -> None:
    env_file = tmp_path / "sglang.env"
    env_file.write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\nMODEL=/models/Ling-3.0-flash-fp4\n")
    unit = _unit(
        tmp_path,
        "[Unit]\nDescription=SGLang\n\n[Service]\n"
        'Environment="HUMMING_CACHE_DIR=/var/cache/humming dir" MODEL=/wrong\n'
        f"EnvironmentFile={env_file}\n"
        "EnvironmentFile=-/nonexistent/optional.env\n"
        "ExecStartPre=/usr/local/bin/spark-validate preflight --unit %n\n"
        "ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server \\\n"
        "  # a comment inside the continuation is dropped\n"
        "  --model-path ${MODEL} --port 30000 \\\n"
        "  --served-model-name 'ling flash' 100%%\n"
        "WorkingDirectory=/srv/sglang\n",
    )
    u = load_unit(unit, base_env={"PATH": "/usr/bin"})
    assert u.exec_start == [
        "/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server", "--model-path",
        "/models/Ling-3.0-flash-fp4", "--port", "30000", "--served-model-name", "ling flash", "100%",
    ]  # fmt: skip
    assert u.env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1" and u.env["PATH"] == "/usr/bin"
    assert u.env["HUMMING_CACHE_DIR"] == "/var/cache/humming dir"
    assert u.env["MODEL"] == "/models/Ling-3.0-flash-fp4"  # EnvironmentFile= overrides Environment=
    assert u.env_origin["SGLANG_ENABLE_FP8_LM_HEAD"] == f"EnvironmentFile={env_file}"
    assert u.env_origin["HUMMING_CACHE_DIR"].endswith(":5 Environment=")
    assert u.exec_start_pre == [["/usr/local/bin/spark-validate", "preflight", "--unit", "sglang.service"]]
    assert u.working_directory == Path("/srv/sglang")


def test_unset_environment_is_applied_last_before_exec_start_is_expanded(tmp_path: Path) -> None:
    """systemd.exec(5): ``UnsetEnvironment=`` undoes assignments from any source, ``Environment=``,
    ``EnvironmentFile=`` and the manager's own included; ``NAME=VALUE`` removes only that exact
    assignment; an empty value resets the list. systemd's exec_invoke deletes them from the
    environment before ``replace_env_argv``, so ``$VAR`` in ExecStart= sees the variable unset too."""
    env_file = tmp_path / "sglang.env"
    env_file.write_text("FROM_FILE=1\nKEEP_VALUE=other\n")
    unit = _unit(
        tmp_path,
        "[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1 ARGS=--x KEEP_VALUE=v\n"
        f"EnvironmentFile={env_file}\n"
        "UnsetEnvironment=NEVER_SET\nUnsetEnvironment=\n"  # reset: NEVER_SET's entry has no effect
        "UnsetEnvironment=SGLANG_ENABLE_FP8_LM_HEAD FROM_FILE KEEP_VALUE=v INHERITED ARGS\n"
        "ExecStart=/usr/bin/python3 -m sglang.launch_server $ARGS\n",
    )
    u = load_unit(unit, base_env={"INHERITED": "1", "PATH": "/usr/bin"})
    assert u.env == {"PATH": "/usr/bin", "KEEP_VALUE": "other"}, u.env  # =v did not match the file's value
    assert set(u.env_origin) == {"PATH", "KEEP_VALUE"}
    assert u.exec_start == ["/usr/bin/python3", "-m", "sglang.launch_server"]
    with pytest.raises(InputError, match="invalid UnsetEnvironment= entry '1BAD'"):
        load_unit(_unit(tmp_path, "[Service]\nUnsetEnvironment=1BAD=secret\nExecStart=/bin/true\n"))


def test_home_specifiers_are_the_service_managers_user_and_working_directory_tilde_is_users(
    tmp_path: Path,
) -> None:
    """systemd.unit(5): ``%h``/``%u`` are the user running the service manager, not ``User=``: ``/root``
    and ``root`` for a system unit whatever this process's ``$HOME`` is, this user's for a user unit.
    systemd.exec(5): ``WorkingDirectory=~`` is ``User=``'s home directory (root's without one)."""
    import pwd

    body = "[Service]\nExecStart=/usr/bin/python3 %h/serve.py %u\nWorkingDirectory=~\n"
    mine = {"HOME": "/home/operator", "USER": "operator"}
    system = load_unit(_unit(tmp_path, body), base_env=mine)
    assert system.exec_start == ["/usr/bin/python3", "/root/serve.py", "root"]
    assert system.working_directory == Path("/root")
    nobody = pwd.getpwnam("nobody")
    other = load_unit(_unit(tmp_path, body + "User=nobody\n"), base_env=mine)
    assert other.exec_start == ["/usr/bin/python3", "/root/serve.py", "root"]  # not influenced by User=
    assert other.working_directory == Path(nobody.pw_dir)
    by_uid = load_unit(_unit(tmp_path, body + f"User={nobody.pw_uid}\n"), base_env=mine)
    assert by_uid.working_directory == Path(nobody.pw_dir)
    users = tmp_path / ".config" / "systemd" / "user"
    users.mkdir(parents=True)
    user = load_unit(_unit(users, body), base_env=mine)
    assert user.exec_start == ["/usr/bin/python3", "/home/operator/serve.py", "operator"]
    assert user.working_directory == Path("/home/operator")
    with pytest.raises(InputError, match="WorkingDirectory=~: no user 'no-such-user-x' on this host"):
        load_unit(_unit(tmp_path, body + "User=no-such-user-x\n"), base_env=mine)


@pytest.mark.parametrize("user", ["²", "٠", "1" * 5000])
def test_a_user_that_is_no_ascii_uid_is_a_name_never_an_internal_error(tmp_path: Path, user: str) -> None:
    """Red team 19: ``User=²`` (``str.isdigit`` takes it, ``int`` does not) or 5,000 digits in another
    user's unit was ``internal error: ValueError``, exit 1, and ``User=٠`` (Arabic-Indic zero) read as UID
    0, root's home for ``WorkingDirectory=~``: each is a name no user has."""
    body = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n"
    unit = _unit(tmp_path, body + f"User={user}\n")
    assert launch_from_unit(unit).parsed().args["model_path"] == "/m"
    with pytest.raises(InputError, match="WorkingDirectory=~: no user"):
        load_unit(_unit(tmp_path, body + f"User={user}\nWorkingDirectory=~\n"), base_env={})


def test_last_exec_start_prefixes_and_dollar_var_splitting(tmp_path: Path) -> None:
    unit = _unit(
        tmp_path,
        "[Service]\nEnvironment=ARGS='--port 1 --host h'\nExecStart=/bin/false\nExecStart=\n"
        'ExecStart=-@/usr/bin/python3 sglang-py -m sglang.launch_server $ARGS "${ARGS}" $$HOME\n',
    )
    u = load_unit(unit)
    argv, env = u.exec_start, u.env
    assert argv == [
        "/usr/bin/python3", "-m", "sglang.launch_server", "--port", "1", "--host", "h",
        "--port 1 --host h", "$HOME",
    ]  # fmt: skip
    assert env["ARGS"] == "--port 1 --host h"


def test_colon_prefix_disables_expansion_and_c_escapes(tmp_path: Path) -> None:
    unit = _unit(tmp_path, '[Service]\nExecStart=:/bin/x $A "tab\\there" \\x41\n')
    argv = load_unit(unit).exec_start
    assert argv == ["/bin/x", "$A", "tab\there", "A"]


def test_spark_validate_launch_wrapper_is_unwrapped(tmp_path: Path) -> None:
    unit = _unit(
        tmp_path,
        "[Service]\nExecStart=/usr/bin/spark-validate launch --strict -- "
        f"python -m sglang.launch_server {RECIPE_LINE}\n",
    )
    u = load_unit(unit)
    assert u.wrapped_by_launch and u.launch_options == ["--strict"]
    assert u.exec_start[:3] == ["python", "-m", "sglang.launch_server"]
    assert u.exec_start[3:] == RECIPE_ARGV


def test_drop_in_overrides_exec_start(tmp_path: Path) -> None:
    unit = _unit(tmp_path, "[Service]\nExecStart=/bin/old\nEnvironment=A=1\n")
    dropin = tmp_path / "sglang.service.d"
    dropin.mkdir()
    (dropin / "override.conf").write_text("[Service]\nExecStart=\nExecStart=/bin/new --x\nEnvironment=A=2\n")
    u = load_unit(unit)
    argv, env, origin = u.exec_start, u.env, u.env_origin
    assert argv == ["/bin/new", "--x"] and env["A"] == "2" and "override.conf" in origin["A"]


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ("[Service]\nExecStart=/bin/x 'open\n", 2, "unbalanced quoting"),
        ("[Service]\nType=simple\n", None, "no ExecStart"),
        ("[Unit]\nDescription=x\n", None, "no [Service]"),
        ("[Service\nExecStart=/bin/x\n", 1, "invalid section header"),
        ("ExecStart=/bin/x\n", 1, "outside of any section"),
        ("[Service]\nExecStart=/bin/x\njunk line\n", 3, "missing '='"),
        ("[Service]\nEnvironment=NOEQUALS\nExecStart=/bin/x\n", 2, "invalid Environment="),
        ("[Service]\nEnvironmentFile=relative.env\nExecStart=/bin/x\n", 2, "not absolute"),
        ("[Service]\nEnvironmentFile=/nonexistent/x.env\nExecStart=/bin/x\n", 2, "does not exist"),
        ("[Service]\nExecStart=/bin/x %Z\n", 2, "unsupported specifier"),
        ("[Service]\nExecStart=/bin/x \\q\n", 2, "invalid escape"),
        ("[Service]\nExecStart=/usr/bin/spark-validate launch python -m x\n", 2, "-- CMD"),
    ],
)
def test_malformed_units(tmp_path: Path, body: str, line: int | None, words: str) -> None:
    unit = _unit(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_unit(unit)
    assert info.value.where == str(unit) and info.value.line == line
    assert words in info.value.reason


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_input_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    unit = tmp_path_factory.mktemp("unitfuzz") / "x.service"
    unit.write_bytes(b"[Service]\n" + data)
    try:
        argv = load_unit(unit, base_env={}).exec_start
    except InputError:
        return
    assert argv and all(isinstance(w, str) for w in argv)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("[]Service=ExecStart/x $%{}'\"\\#;\n\t-@:+!AB"), max_size=120))
def test_random_unit_soup_only_ever_raises_input_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    unit = tmp_path_factory.mktemp("unitsoup") / "y.service"
    unit.write_text(text)
    try:
        argv = load_unit(unit, base_env={"HOME": "/root"}).exec_start
    except InputError as exc:
        assert exc.where.endswith("y.service") or "EnvironmentFile" not in exc.reason
        return
    assert argv and all(isinstance(w, str) for w in argv)


def test_a_missing_working_directory_with_dash_starts_the_command_in_the_root_directory(
    tmp_path: Path,
) -> None:
    """systemd.exec(5): ``WorkingDirectory=-PATH``: a missing directory is not fatal; the command starts
    where the service manager is, ``/`` (red team 22: the string's relative tests were answered in the missing
    directory). A directory that is there stays; without ``-`` a missing one stays the unit's word."""
    there = tmp_path / "here"
    there.mkdir()
    body = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server\nWorkingDirectory=-{}\n"
    assert load_unit(_unit(tmp_path, body.format(tmp_path / "gone")), base_env={}).working_directory is None
    assert load_unit(_unit(tmp_path, body.format(there)), base_env={}).working_directory == there
    plain = body.replace("=-", "=").format(tmp_path / "gone")
    assert load_unit(_unit(tmp_path, plain), base_env={}).working_directory == tmp_path / "gone"


def test_more_than_one_exec_start_is_refused_or_unresolved_as_systemd_runs_them(tmp_path: Path) -> None:
    """systemd.service(5): more than one ExecStart= is allowed only for Type=oneshot, where they run one
    after another, each waited for. Red team 22: the last was read as the server, so a unit whose first
    command starts the trap (FP32 head beside FP8) and whose last is the recipe passed, exit 0; without
    Type=oneshot systemd refuses such a unit. After an empty ExecStart= (a reset) only the last counts."""
    from validator.errors import UnresolvedLaunch

    server = "/usr/bin/python3 -m sglang.launch_server"
    two = f"ExecStart={server} --a\nExecStart={server}\n"
    with pytest.raises(UnresolvedLaunch, match="Type=oneshot runs its 2 ExecStart= commands"):
        load_unit(_unit(tmp_path, "[Service]\nType=oneshot\n" + two), base_env={})
    with pytest.raises(InputError, match="more than one ExecStart="):
        load_unit(_unit(tmp_path, "[Service]\n" + two), base_env={})
    reset = two.replace("\nExecStart=/usr", "\nExecStart=\nExecStart=/usr")
    assert (
        load_unit(_unit(tmp_path, "[Service]\n" + reset), base_env={}).exec_start[-1]
        == "sglang.launch_server"
    )


@pytest.mark.parametrize("program", ["bin/start.sh", "./start.sh", "-./start.sh", "@../x/start.sh start"])
def test_an_exec_start_program_that_is_a_relative_path_is_refused_as_systemd_refuses_it(
    tmp_path: Path, program: str
) -> None:
    """Red team 23: systemd.service(5) takes an absolute path or a name without a slash (found in its fixed
    path); 'bin/start.sh' is neither and systemd ignores the line, the service does not start. b29c8bc
    read such a script from WorkingDirectory= and could pass a launch that never runs."""
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "start.sh"
    script.write_text("#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m\n")
    script.chmod(0o755)
    unit = tmp_path / "ling.service"
    unit.write_text(f"[Service]\nWorkingDirectory={tmp_path}\nExecStart={program}\n")
    with pytest.raises(InputError, match="neither an absolute path nor a name"):
        load_unit(unit)
