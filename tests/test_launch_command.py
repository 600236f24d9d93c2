"""Launch command sources -> LaunchFacts (string, args file, unit), with the env the server will see."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.launch_recipe import MODEL, RECIPE_ARGV, RECIPE_CMD, RECIPE_SERVER_ARGS
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch.command import (
    launch_from_args_file,
    launch_from_argv,
    launch_from_string,
)
from validator.sources.launch.script import launch_from_program as SHELL
from validator.sources.launch.script import read_exec
from validator.sources.launch.shell.values import Unknown, join
from validator.sources.launch.systemd_unit import launch_from_unit


def test_recipe_string_with_fp8_env_assignment() -> None:
    facts = launch_from_string(
        f"SGLANG_ENABLE_FP8_LM_HEAD=1 {RECIPE_CMD}", origin="--launch-cmd", env={"A": "b"}
    ).parsed()
    assert facts.entry == "launch_server" and facts.interpreter == "python"
    assert facts.argv == RECIPE_ARGV
    assert facts.args["moe_runner_backend"] == "humming" and facts.args["speculative_num_steps"] == 3
    assert facts.env == {"A": "b", "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    assert facts.env_origin == {"A": "environment", "SGLANG_ENABLE_FP8_LM_HEAD": "--launch-cmd"}
    assert "speculative_draft_model_path" in facts.explicit


def test_env_program_quoting_and_continuations() -> None:
    cmd = (
        "env -u DROP SGLANG_ENABLE_FP8_LM_HEAD=1 "
        "/opt/sglang/venv/bin/python3 -u -X dev -m sglang.launch_server \\\n"
        f"  --model-path '{MODEL}' --served-model-name \"ling flash\""
    )
    facts = launch_from_string(cmd, origin="--launch-cmd", env={"DROP": "x"}).parsed()
    assert facts.interpreter == "/opt/sglang/venv/bin/python3"
    assert facts.args["served_model_name"] == "ling flash" and facts.args["model_path"] == MODEL
    assert "DROP" not in facts.env and facts.env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"


def test_sglang_serve_with_positional_model_and_model_type(tmp_path: Path) -> None:
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "sglang"
    script.write_text("#!/opt/py/bin/python3.11\nimport sys\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    facts = launch_from_argv(
        [str(script), "serve", MODEL, "--model-type", "llm", "--port", "31000"], origin="x", env={}
    ).parsed()
    assert facts.entry == "serve" and facts.interpreter == "/opt/py/bin/python3.11"
    assert facts.argv == ["--model-path", MODEL, "--port", "31000"] and facts.args["port"] == 31000
    # unreadable shebang -> the sibling python
    script.write_text("no shebang\n")
    (bindir / "python").write_text("")
    facts = launch_from_argv([str(script), "serve", "--model-path", MODEL], origin="x", env={}).parsed()
    assert facts.interpreter == str(bindir / "python")
    # a bare 'sglang' is looked up on the command's PATH
    facts = launch_from_string(f"sglang serve {MODEL}", origin="x", env={"PATH": str(bindir)}).parsed()
    assert facts.interpreter == str(bindir / "python")


@pytest.mark.parametrize(
    ("cmd", "words"),
    [
        ("python -m vllm.entrypoints.api_server --model x", "not the SGLang server"),
        ("python server.py --model-path x", "cannot check a script"),
        ("sglang generate --model-path x", "sglang generate does not start the server"),
        ("sglang serve x --model-type diffusion", "does not start the LLM server"),
        ("sglang serve --model-path x --help", "--help"),
        (f"{RECIPE_CMD} && echo done", "shell operator"),
        ("python -m sglang.launch_server --model-path 'x", "cannot split"),
        (f"{RECIPE_CMD} --tp-size two", "invalid int value: 'two'"),
        ("A=1 B=2", "no command"),
    ],
)
def test_refusals_name_the_origin(cmd: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        launch_from_string(cmd, origin="--launch-cmd", env={}).parsed()
    assert info.value.where == "--launch-cmd" and words in info.value.reason


def test_a_bash_c_string_given_no_name_has_the_environments_bash_argv0_as_its_dollar_zero() -> None:
    """bash 5 started with BASH_ARGV0 in its environment and ``-c STRING`` with no NAME sets ``$0`` to its
    value (a NAME wins; bash as sh, in POSIX mode, keeps its argv[0]): red team 22 found ``$0`` read as
    ``bash`` where real bash ran the environment's word."""
    line = f'exec python3 -m sglang.launch_server --model-path {MODEL} "$0"'
    env = {"PATH": "/usr/bin:/bin", "BASH_ARGV0": "--port=31001"}
    real = subprocess.run(["bash", "-c", 'printf %s "$0"'], env=env, capture_output=True, text=True)
    assert real.stdout == "--port=31001"
    facts = launch_from_string(
        f"bash -c '{line}'", origin="--launch-cmd", env=env, program_reader=SHELL
    ).parsed()
    assert facts.args["port"] == 31001
    with pytest.raises(InputError, match="unrecognized arguments: --named"):
        launch_from_string(
            f"bash -c '{line}' --named", origin="--launch-cmd", env=env, program_reader=SHELL
        ).parsed()
    with pytest.raises(InputError, match="unrecognized arguments: sh"):
        launch_from_string(f"sh -c '{line}'", origin="--launch-cmd", env=env, program_reader=SHELL).parsed()


def test_a_shell_given_c_is_read_through_its_string_and_refused_where_it_starts_no_server() -> None:
    """``bash -c STRING`` is read as a script is (``launch_from_command_string``): a string that starts no
    server is refused naming the string; a shell option the reader does not model leaves it unresolved.
    With no shell reader given, a shell is a program as any other: refused."""
    with pytest.raises(InputError, match="unrecognised program 'bash'"):
        launch_from_string("bash -c 'python -m sglang.launch_server'", origin="--launch-cmd", env={})
    with pytest.raises(InputError) as info:
        launch_from_string(
            "bash -c 'echo started'", origin="--launch-cmd", env={}, program_reader=SHELL
        ).parsed()
    assert info.value.where == "--launch-cmd (bash -c)"
    assert "no path through the script starts the SGLang server" in info.value.reason
    with pytest.raises(UnresolvedLaunch, match="option '-i' is not modelled"):
        launch_from_string(
            "bash -i -c 'python -m sglang.launch_server'", origin="--launch-cmd", env={}, program_reader=SHELL
        )
    facts = launch_from_string(
        f"sh -c 'exec python3 -m sglang.launch_server --model-path {MODEL} --port 31000'",
        origin="--launch-cmd",
        env={"PATH": "/usr/bin:/bin"},
        program_reader=SHELL,
    ).parsed()
    assert facts.origin == "--launch-cmd (sh -c)" and facts.args["port"] == 31000


def test_args_file_server_args_only_with_comments(tmp_path: Path) -> None:
    f = tmp_path / "sglang.args"
    f.write_text(
        "# Ling-3.0-flash on DGX Spark\n"
        + RECIPE_SERVER_ARGS.replace(" --", "\n--")
        + "  # trailing comment\n"
    )
    facts = launch_from_args_file(f, env={"SGLANG_ENABLE_FP8_LM_HEAD": "1"}).parsed()
    assert facts.origin == str(f) and facts.entry == "launch_server" and facts.interpreter is None
    assert facts.argv == RECIPE_ARGV and facts.env_origin == {"SGLANG_ENABLE_FP8_LM_HEAD": "environment"}


def test_args_file_full_command_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "cmd.args"
    f.write_text(f"SGLANG_ENABLE_FP8_LM_HEAD=1 \\\n  {RECIPE_CMD}\n")
    facts = launch_from_args_file(f, env={}).parsed()
    assert facts.env == {"SGLANG_ENABLE_FP8_LM_HEAD": "1"} and facts.env_origin[
        "SGLANG_ENABLE_FP8_LM_HEAD"
    ] == str(f)
    f.write_text("--model-path x --bogus-flag\n")
    with pytest.raises(InputError) as info:
        launch_from_args_file(f, env={}).parsed()
    assert info.value.where == str(f) and "unrecognized arguments: --bogus-flag" in info.value.reason
    f.write_text("# only a comment\n")
    with pytest.raises(InputError, match="no arguments"):
        launch_from_args_file(f, env={}).parsed()


def test_unit_to_launch_facts_with_relative_config(tmp_path: Path) -> None:
    workdir = tmp_path / "srv"
    workdir.mkdir()
    (workdir / "ling.yaml").write_text(f"model-path: {MODEL}\nmoe-runner-backend: humming\n")
    env_file = tmp_path / "sglang.env"
    env_file.write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\n")
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nWorkingDirectory={workdir}\nEnvironmentFile={env_file}\n"
        "ExecStart=/usr/bin/spark-validate launch -- /opt/venv/bin/python -m sglang.launch_server "
        "--config ling.yaml --port 30001\n"
    )
    facts = launch_from_unit(unit, base_env={"PATH": os.defpath}).parsed()
    assert facts.origin == f"unit:{unit}" and facts.interpreter == "/opt/venv/bin/python"
    assert facts.args["moe_runner_backend"] == "humming" and facts.args["port"] == 30001
    assert facts.argv[:2] == ["--model-path", MODEL]
    assert facts.env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"
    assert facts.env_origin["SGLANG_ENABLE_FP8_LM_HEAD"] == f"EnvironmentFile={env_file}"


@pytest.mark.parametrize(
    "wrapper",
    [
        "nohup",
        "setsid -f",
        "setsid --wait nohup",
        "timeout --kill-after=30s 25m",
        "timeout -k 30s -s TERM --foreground --preserve-status -v 25m",
        "timeout -vk30s -- 25m",
        "nice -n 10",
        "nice -5",
        "nice --adjustment=-3 nohup",
        "taskset -c 0-9",
        "taskset -ac 0-3",
        "numactl --interleave=all --cpunodebind 0 --",
        "ionice -c 2 -n 7 -t",
        "chrt --other -R 0",
        "/usr/bin/setsid nohup /usr/bin/timeout 1h",
    ],
)
def test_wrappers_exec_the_server_with_its_argv_and_environment(wrapper: str) -> None:
    """coreutils/util-linux wrappers exec their command as given (their getopt stops at the first
    non-option): what the server gets is the command after the wrapper's own words."""
    facts = launch_from_string(
        f"SGLANG_ENABLE_FP8_LM_HEAD=1 {wrapper} {RECIPE_CMD}", origin="--launch-cmd", env={"A": "b"}
    ).parsed()
    assert facts.argv == RECIPE_ARGV and facts.interpreter == "python"
    assert facts.env == {"A": "b", "SGLANG_ENABLE_FP8_LM_HEAD": "1"} and not facts.unresolved


def test_stdbuf_sets_its_variables_and_an_unknown_preload() -> None:
    facts = launch_from_string(f"stdbuf -oL --error=0 {RECIPE_CMD}", origin="--launch-cmd", env={}).parsed()
    assert facts.argv == RECIPE_ARGV
    assert facts.env == {"_STDBUF_O": "L", "_STDBUF_E": "0"}
    assert "libstdbuf" in facts.unresolved["LD_PRELOAD"]


def test_spark_validate_launch_layers_are_read_in_a_loop_keeping_what_outer_wrappers_left_unknown(
    tmp_path: Path,
) -> None:
    """Red team 19: each ``spark-validate launch --`` layer was one more call of ``launch_from_argv``: a
    unit (another user's) with 1,500 layers in ``ExecStart=`` was ``internal error: RecursionError``, exit 1;
    and the variables a wrapper before a layer left unknown (stdbuf's LD_PRELOAD) were dropped with the
    outer call, so the server's environment read as certainly without them."""
    unit = tmp_path / "deep.service"
    unit.write_text("[Service]\nExecStart=" + "spark-validate launch -- " * 1500 + RECIPE_CMD + "\n")
    assert launch_from_unit(unit).parsed().argv == RECIPE_ARGV
    facts = launch_from_string(
        f"LD_PRELOAD=/x stdbuf -oL spark-validate launch -- {RECIPE_CMD}", origin="--launch-cmd", env={}
    ).parsed()
    assert facts.argv == RECIPE_ARGV and facts.env == {"_STDBUF_O": "L"}
    assert "libstdbuf" in facts.unresolved["LD_PRELOAD"]


@pytest.mark.parametrize(
    ("wrapper", "words"),
    [
        ("taskset -p 0-3", "taskset: option -p"),
        ("timeout --kill 30s 25m", "timeout: option '--kill'"),
        ("ionice -p 1", "ionice: option -p"),
        ("chrt -f high", "is not a number"),
        ("chrt -f ²", "is not a number"),  # red team 19: chrt's strtol refuses what str.isdigit takes
        ("nice -5x", "adjustment '-5x' is not a number"),  # red team 19: nice refuses it, runs nothing
        ("stdbuf", "no buffering mode"),
        ("nohup --help", "nohup: option '--help'"),
    ],
)
def test_a_wrapper_option_not_modelled_leaves_the_launch_unresolved(wrapper: str, words: str) -> None:
    with pytest.raises(UnresolvedLaunch) as info:
        launch_from_string(f"{wrapper} {RECIPE_CMD}", origin="--launch-cmd", env={})
    assert words in str(info.value) and "--launch-cmd" in str(info.value)


def test_after_a_wrapper_an_assignment_is_the_program_and_nothing_is_no_launch() -> None:
    with pytest.raises(InputError, match="unrecognised program 'A=1'"):
        launch_from_string(f"nohup A=1 {RECIPE_CMD}", origin="--launch-cmd", env={})
    with pytest.raises(InputError, match="setsid with no program"):
        launch_from_string("setsid -f", origin="--launch-cmd", env={})


def test_a_script_reads_through_the_same_wrappers(tmp_path: Path) -> None:
    """``--script`` applies the one table too: the timeout of a bounded probe start (ly01325's notebook,
    step 4.1), stdbuf's variables, and a wrapper whose options are computed at run time left unknown."""
    script = tmp_path / "start.sh"
    script.write_text(
        f"#!/bin/bash\ntimeout --kill-after=30s 25m stdbuf -o L nice -n 5 {RECIPE_CMD} > log 2>&1\n"
    )
    ex, _ = read_exec(script, {"PATH": "/usr/bin:/bin"})
    assert [join(f) for f in ex.argv] == RECIPE_CMD.split()  # type: ignore[union-attr]
    assert ex.env["_STDBUF_O"] == "L" and isinstance(ex.env["LD_PRELOAD"], Unknown)
    script.write_text(f"#!/bin/bash\nsetsid $(cat opts) {RECIPE_CMD}\n")
    with pytest.raises(UnresolvedLaunch, match="the words after setsid are computed at run time"):
        read_exec(script, {"PATH": "/usr/bin:/bin"})
    script.write_text(f'#!/bin/bash\ntaskset "$(cat opts)" 0-3 {RECIPE_CMD}\n')
    with pytest.raises(UnresolvedLaunch, match="taskset: a word in its options is computed at run time"):
        read_exec(script, {"PATH": "/usr/bin:/bin"})
