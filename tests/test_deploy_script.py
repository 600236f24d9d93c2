"""`preflight --script start.sh`: launcher scripts of the shapes DGX Spark operators use, read statically.

Each script is also run by the real bash, in a real venv (``python3 -m venv``) whose ``python3`` records the
argv, environment and directory it was started with (and answers the install probe as the server venv
would). The test holds the static reading to what bash really did, then preflights the script and the
equivalent ``--launch-cmd`` (the recorded argv and environment) and requires the same verdict and the same
status for every check.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.in_process import preflight_json_in_process
from tests.support.sglang_builds import fake_interpreter, make_build

REPO = Path(__file__).resolve().parents[1]
BASH_ONLY = {"PWD", "OLDPWD", "SHLVL", "_", "DUMP", "PS1"}

RECIPE = (
    "--moe-runner-backend humming --speculative-algorithm NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
)

# NVIDIA's guide as operators paste it: exports, a ~ model path, continuations, no exec.
GUIDE = f"""#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")"
source .venv/bin/activate
export SGLANG_ENABLE_FP8_LM_HEAD=1
export HUMMING_CACHE_DIR=$HOME/.humming/cache
python3 -m sglang.launch_server \\
  --model-path ~/models/Ling-3.0-flash-fp4 \\
  --trust-remote-code \\
  {RECIPE} \\
  --speculative-draft-model-path ~/models/Ling-3.0-flash-fp4 \\
  --mem-fraction-static 0.68 --port 30000
"""

# Profiles chosen by variables, a sourced .env under `set -a`, `exec env ... python3`.
PROFILES = """#!/bin/bash
set -eu
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
[ -f .venv/bin/activate ] && source .venv/bin/activate
set -a
. ./.env
set +a
PROFILE="${PROFILE:-mtp}"
MODEL="${MODEL:-$HOME/models/Ling-3.0-flash-fp4}"
case "$PROFILE" in
  mtp)
    BACKEND=humming
    SPEC="--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1"
    SPEC="$SPEC --speculative-num-draft-tokens 4 --speculative-draft-model-path $MODEL"
    ;;
  baseline) BACKEND=flashinfer_mxfp4; SPEC="" ;;
  *) echo "unknown profile $PROFILE" >&2; exit 2 ;;
esac
if [[ "$PROFILE" == mtp && -z "${NO_FP8_HEAD:-}" ]]; then
  FP8=1
else
  FP8=0
fi
exec env SGLANG_ENABLE_FP8_LM_HEAD=$FP8 python3 -m sglang.launch_server --model-path "$MODEL" \\
  --trust-remote-code --moe-runner-backend "$BACKEND" $SPEC --mem-fraction-static "${MEM:-0.68}"
"""

DOTENV = "# site settings\nHUMMING_CACHE_DIR=${HOME}/.humming/cache\nMEM=0.6\n"

# The validated form: spark-validate launch in place of exec.
WRAPPED = f"""#!/bin/sh
. "$(dirname "$0")/.venv/bin/activate"
M="$HOME/models/Ling-3.0-flash-fp4"
SGLANG_ENABLE_FP8_LM_HEAD=1 HUMMING_CACHE_DIR="$HOME/.humming/cache" \\
  exec spark-validate launch -- python3 -m sglang.launch_server --model-path "$M" \\
  {RECIPE} --speculative-draft-model-path "$M"
"""

# A classic mistake: the FP8 switch set but not exported, so the server never sees it.
NOT_EXPORTED = f"""#!/bin/bash
source .venv/bin/activate
SGLANG_ENABLE_FP8_LM_HEAD=1
export HUMMING_CACHE_DIR=~/.humming/cache
M=~/models/Ling-3.0-flash-fp4
exec python3 -m sglang.launch_server --model-path $M {RECIPE} --speculative-draft-model-path $M
"""


@dataclass
class Host:
    root: Path  # the operator's home and the script's directory
    env: dict[str, str]


def _python_shim(venv: Path, real: Path) -> None:
    """The venv's python3: the install probe (``-c``) goes to the server interpreter, a start is recorded."""
    record = (
        "import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': dict(os.environ), "
        "'cwd': os.getcwd()}, open(os.environ['DUMP'], 'w'))"
    )
    for name in ("python", "python3"):
        path = venv / "bin" / name
        path.unlink()
        probe = f'if [ "$1" = -c ]; then exec "{real}" "$@"; fi\n'
        path.write_text(f'#!/bin/sh\n{probe}exec "{sys.executable}" -c "{record}" "$@"\n')
        path.chmod(0o755)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    return _host(tmp_path_factory.mktemp("operator"))


def _host(root: Path, version: str | None = None) -> Host:
    """The operator's host: a venv whose python3 is an SGLang build (of ``version``: the shipped one's
    where None), a checkpoint, a humming cache, spark-validate on PATH."""
    site = root / "server-site"
    make_build(site)
    if version is not None:  # another build's version, for which no flag table was generated
        (dist,) = site.glob("sglang-*.dist-info")
        meta = dist / "METADATA"
        meta.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {version}", meta.read_text()))
        dist.rename(site / f"sglang-{version}.dist-info")
        tuple_ = tuple(int(n) for n in version.split("."))
        (site / "sglang" / "_version.py").write_text(
            f"__version__ = version = {version!r}\n__version_tuple__ = version_tuple = {tuple_!r}\n"
        )
    (site / "humming_kernels-0.1.19.dist-info").mkdir()
    (site / "humming_kernels-0.1.19.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: humming-kernels\nVersion: 0.1.19\n"
    )
    (site / "humming").mkdir()
    (site / "humming" / "__init__.py").write_text("")
    real = fake_interpreter(root / "real" / "bin", site)
    venv = [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")]
    subprocess.run(venv, check=True, timeout=60)
    _python_shim(root / ".venv", real)
    write_checkpoint(root / "models" / "Ling-3.0-flash-fp4", small=False)
    cache = root / ".humming" / "cache"
    (cache / "0123abcd").mkdir(parents=True)
    (cache / "0123abcd" / "kernel.cubin").write_bytes(b"\x7fELF")
    (root / ".env").write_text(DOTENV)
    # spark-validate itself on PATH for the wrapped form, as installed on the host
    bindir = root / "tools"
    bindir.mkdir()
    (bindir / "spark-validate").write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m validator "$@"\n'
    )
    (bindir / "spark-validate").chmod(0o755)
    env = {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "HUMMING_TMP_DIR": str(root),
    }
    return Host(root, env)


def _write(host: Host, name: str, text: str) -> Path:
    path = host.root / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _bash_run(
    host: Host, script: Path, extra_env: dict[str, str], args: list[str] | None = None
) -> dict[str, Any]:
    """Run the script with the real shell; what the server's python3 was started with."""
    dump = host.root / "dump.json"
    dump.unlink(missing_ok=True)
    env = {**host.env, **extra_env, "DUMP": str(dump)}
    proc = subprocess.run(
        [str(script), *(args or [])], env=env, cwd=host.root, capture_output=True, text=True, timeout=120
    )
    assert dump.is_file(), (proc.returncode, proc.stderr[-2000:])
    result: dict[str, Any] = json.loads(dump.read_text())
    result["env"] = {k: v for k, v in result["env"].items() if k not in BASH_ONLY}
    return result


def _static(host: Host, script: Path, extra_env: dict[str, str]) -> Any:
    from validator.sources.launch.script import launch_from_script

    return launch_from_script(script, env={**host.env, **extra_env}).parsed()


def _preflight(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    return preflight_json_in_process(env, *args, cwd="/")


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


CASES = {
    "guide": (GUIDE, {}, "pass"),
    "profiles-mtp": (PROFILES, {}, "pass"),
    "profiles-baseline": (PROFILES, {"PROFILE": "baseline"}, "fail"),
    "profiles-no-fp8": (PROFILES, {"NO_FP8_HEAD": "1"}, "fail"),
    "not-exported": (NOT_EXPORTED, {}, "fail"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_reads_as_bash_runs_it_and_gets_the_launch_cmd_verdict(host: Host, case: str) -> None:
    text, extra, verdict = CASES[case]
    script = _write(host, f"{case}.sh", text)
    ran = _bash_run(host, script, extra)
    static = _static(host, script, extra)
    assert ran["argv"][:2] == ["-m", "sglang.launch_server"]
    assert static.argv == ran["argv"][2:], "the server arguments differ from what bash passed"
    static_env = {k: v for k, v in static.env.items() if k not in BASH_ONLY}
    assert static_env == ran["env"], "the server environment differs from what bash passed"
    assert static.unresolved == {}

    rc, by_script, err = _preflight({**host.env, **extra}, "--script", str(script))
    assert by_script, err
    python = Path(ran["env"]["VIRTUAL_ENV"]) / "bin" / "python3"
    cmd = shlex.join([str(python), *ran["argv"]])
    rc2, by_cmd, err2 = _preflight(ran["env"], "--launch-cmd", cmd)
    assert by_cmd, err2
    assert by_script["verdict"] == by_cmd["verdict"] == verdict, (by_script["checks"], err)
    assert rc == rc2
    mine, theirs = _statuses(by_script), _statuses(by_cmd)
    (warnings,) = [c for c in by_script["checks"] if c["id"] == "launch.warnings"]
    if not any(line.split()[:1] == ["cd"] for line in text.splitlines()):
        # no cd: the reading names the directory it assumed (F8 of world9); the command line, read where
        # the operator stands, has nothing to assume
        assert f"read as run from {host.root} (the script's own directory)" in warnings["message"]
        mine.pop("launch.warnings"), theirs.pop("launch.warnings")
    assert mine == theirs


def test_wrapped_form_is_read_through_spark_validate_launch(host: Host) -> None:
    """`exec spark-validate launch -- CMD`: the script is checked as the CMD it wraps, and bash really
    runs that wrapper, which preflights and execs the same server command."""
    script = _write(host, "wrapped.sh", WRAPPED)
    static = _static(host, script, {})
    ran = _bash_run(host, script, {})  # the real launch passed its preflight and exec'd python3
    assert static.argv == ran["argv"][2:]
    assert static.env["SGLANG_ENABLE_FP8_LM_HEAD"] == ran["env"]["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))


def test_not_exported_variable_is_named_as_missing(host: Host) -> None:
    script = _write(host, "not-exported.sh", NOT_EXPORTED)
    _, report, _ = _preflight(host.env, "--script", str(script))
    (fp8,) = [c for c in report["checks"] if c["id"] == "lm_head.fp8"]
    assert fp8["status"] == "fail"
    assert "sets SGLANG_ENABLE_FP8_LM_HEAD but does not export it" in fp8["message"]


POSITIONAL = (
    f"#!/bin/sh\n. ./.venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
    f'M=$HOME/models/Ling-3.0-flash-fp4\nexec python3 -m sglang.launch_server --model-path "$M" '
    f'{RECIPE.replace("humming", chr(34) + "$1" + chr(34))} --speculative-draft-model-path "$M"\n'
)

# The recipe in a function that takes the model as its argument, and the backend as the script's own.
FUNCTION_ARGS = f"""#!/bin/bash
set -euo pipefail
start() {{
  local model="$1" backend
  backend=$2
  shift 2
  exec python3 -m sglang.launch_server --model-path "$model" --moe-runner-backend "$backend" "$@"
}}
source .venv/bin/activate
export SGLANG_ENABLE_FP8_LM_HEAD=1
start "$HOME/models/Ling-3.0-flash-fp4" "${{1:-flashinfer_mxfp4}}" \
  {RECIPE.replace("--moe-runner-backend humming ", "")} \
  --speculative-draft-model-path ~/models/Ling-3.0-flash-fp4
"""


def test_script_arguments_are_given_with_script_arg(host: Host) -> None:
    """`./start.sh humming`: with --script-arg the script's "$1" is what the operator passes, as bash
    gives it; the reading equals what bash ran with that argument."""
    script = _write(host, "positional.sh", POSITIONAL)
    rc, report, err = _preflight(host.env, "--script", str(script), "--script-arg", "humming")
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))
    rc, report, err = _preflight(host.env, "--script", str(script), "--script-arg", "triton")
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail", err
    rc, _, err = _preflight(host.env, "--launch-cmd", "python3 -m sglang.launch_server", "--script-arg", "x")
    assert rc == 2 and "--script-arg" in err


def test_a_function_with_arguments_is_called_with_them(host: Host) -> None:
    script = _write(host, "function.sh", FUNCTION_ARGS)
    from validator.sources.launch.script import launch_from_script

    for args, verdict in (([], "fail"), (["humming"], "pass")):
        static = launch_from_script(script, env=host.env, args=args).parsed()
        ran = _bash_run(host, script, {}, args)
        assert static.argv == ran["argv"][2:] and not static.unresolved
        _, report, err = _preflight(host.env, "--script", str(script), *[f"--script-arg={a}" for a in args])
        assert report["verdict"] == verdict, (err, report.get("checks"))


def test_a_missing_sourced_file_is_a_failed_command_not_a_broken_script(host: Host) -> None:
    """Away from the host, `source .venv/bin/activate` finds nothing: bash reports it and goes on (fatal
    only under set -e). The reading goes on too; the program and what the file would have set are
    unknown, so the checks that read them are error, and the rest still run. Under set -e the path where
    the file is there when the server starts (it is absent only here) still launches: inconclusive, not
    "no launch"."""
    # the model named by its full path: after the unread file, even $HOME (and so ~) is unknown
    model = f"{host.env['HOME']}/models/Ling-3.0-flash-fp4"
    text = (
        f"#!/bin/bash\nsource ./missing/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec python3 -m sglang.launch_server --model-path {model} {RECIPE} "
        f"--speculative-draft-model-path {model}\n"
    )
    script = _write(host, "missing-source.sh", text)
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and report["verdict"] == "inconclusive", err
    statuses = _statuses(report)
    moe = [c for c in report["checks"] if c["id"] == "moe.backend"]
    assert statuses["lm_head.fp8"] == "error" and statuses["moe.backend"] == "pass", moe
    # launch.warnings names the file among the run-time conditions the reading assumed (there, or not)
    assumed = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert assumed and "missing/bin/activate" in assumed[0]["message"], assumed
    named = [
        c["id"]
        for c in report["checks"]
        if "missing/bin/activate" in c["message"] and c["id"] != "launch.warnings"
    ]
    assert named and all(statuses[i] == "error" for i in named), [(i, statuses[i]) for i in named]
    strict = _write(host, "missing-source-e.sh", text.replace("#!/bin/bash\n", "#!/bin/bash\nset -e\n"))
    rc, report, err = _preflight(host.env, "--script", str(strict))
    assert rc == 69 and report["verdict"] == "inconclusive", err
    assert _statuses(report)["lm_head.fp8"] == "error"


def test_a_value_set_at_run_time_is_reported_not_guessed(host: Host) -> None:
    """`--moe-runner-backend "$(cat ...)"`: a program's output decides the backend; moe.backend cannot be
    proven and says why, and the verdict is not a pass. Checks that do not read it still run."""
    script = _write(
        host,
        "computed-backend.sh",
        POSITIONAL.replace('"$1"', '"$(cat /etc/sglang-backend)"'),
    )
    static = _static(host, script, {})
    assert set(static.unresolved) == {"moe_runner_backend"}
    assert "cat" in static.unresolved["moe_runner_backend"]
    rc, report, _ = _preflight(host.env, "--script", str(script))
    statuses = _statuses(report)
    assert statuses["moe.backend"] == "error"
    (moe,) = [c for c in report["checks"] if c["id"] == "moe.backend"]
    assert "cat" in moe["message"] and "spark-validate launch" in (moe["remedy"] or "")
    assert statuses["lm_head.fp8"] == "pass" and statuses["spec.config"] == "pass"
    assert report["verdict"] != "pass" and rc != 0


def test_arguments_computed_at_run_time_make_the_launch_inconclusive(host: Host) -> None:
    script = _write(
        host,
        "computed.sh",
        "#!/bin/sh\nEXTRA=$(cat /etc/sglang/extra-args)\nexec python3 -m sglang.launch_server $EXTRA\n",
    )
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and report["verdict"] == "inconclusive", err
    (moe,) = [c for c in report["checks"] if c["id"] == "moe.backend"]
    assert moe["status"] == "error" and "cat" in moe["message"]


def test_server_command_inside_a_branch_decided_at_run_time(host: Host) -> None:
    """The launch that happens, if it happens: the only path that starts the server is the one where the
    GPU check succeeded; the reading is that launch and names the condition it assumed. Where two paths
    launch differently, what differs is unresolved."""
    script = _write(
        host,
        "branch.sh",
        f"#!/bin/sh\nif nvidia-smi -L | grep -q GB10; then\n  exec python3 -m sglang.launch_server "
        f"--model-path /m {RECIPE}\nfi\necho no GPU\n",
    )
    static = _static(host, script, {})
    assert static.args["moe_runner_backend"] == "humming"
    assert any("nvidia-smi -L | grep -q GB10 succeeded" in w for w in static.warnings), static.warnings
    two = _write(
        host,
        "branch2.sh",
        f"#!/bin/sh\nB=triton\nif nvidia-smi -L | grep -q GB10; then B=humming; fi\n"
        f"exec python3 -m sglang.launch_server --model-path /m {RECIPE.replace('humming', '$B')}\n",
    )
    rc, report, _ = _preflight(host.env, "--script", str(two))
    assert rc != 0 and report["verdict"] != "pass"
    (moe,) = [c for c in report["checks"] if c["id"] == "moe.backend"]
    assert moe["status"] == "error" and "run-time condition" in moe["message"]


def test_words_on_some_paths_only_leave_the_rest_known(host: Host) -> None:
    """Finding 1 of world9: paths whose argvs differ in length (an optional flag, an optional ``docker run``
    option) are read apart and merged argument by argument: what every path gives stays known; a flag on
    some paths only, or a value that differs, is unresolved (never one path's value, never the default)."""
    script = _write(
        host,
        "optional.sh",
        "#!/bin/bash\nopts=()\nB=triton\n"
        "if nvidia-smi -L | grep -q GB10; then\n"
        "  opts+=(--enable-metrics --mem-fraction-static 0.5); B=flashinfer\nfi\n"
        "exec python3 -m sglang.launch_server --model-path /m --moe-runner-backend flashinfer_mxfp4 "
        '--speculative-algorithm NEXTN --attention-backend "$B" "${opts[@]}"\n',
    )
    static = _static(host, script, {})
    assert static.args["moe_runner_backend"] == "flashinfer_mxfp4"
    assert static.args["speculative_algorithm"] == "NEXTN"
    for dest in ("enable_metrics", "mem_fraction_static", "attention_backend"):
        why = static.unresolved[dest]
        assert "depends on a run-time condition (" in why and "nvidia-smi -L | grep -q GB10" in why
    assert static.unresolved["enable_metrics"].startswith("given on some paths only")
    assert "moe_runner_backend" not in static.unresolved and "model_path" not in static.unresolved
    docker = _write(
        host,
        "docker.sh",
        "#!/bin/bash\nset -euo pipefail\ngroups=()\n"
        'gid="$(getent group video | cut -d: -f3 || true)"\n'
        'if [[ -n "${gid}" ]]; then groups+=(--group-add "${gid}" -e ONE=1); fi\n'
        'docker run -d --gpus all "${groups[@]}" -e TWO=2 img python3 -m sglang.launch_server '
        "--model-path /m --moe-runner-backend flashinfer_mxfp4\n",
    )
    # as many words on each path, but different flags: no word lines up with a value, so read apart too
    same_length = _write(
        host,
        "swap.sh",
        "#!/bin/bash\nF=--enable-cache-report\nif nvidia-smi -L | grep -q GB10; then F=--enable-metrics; fi\n"
        'exec python3 -m sglang.launch_server --model-path /m --moe-runner-backend flashinfer_mxfp4 "$F"\n',
    )
    static = _static(host, same_length, {})
    assert static.args["moe_runner_backend"] == "flashinfer_mxfp4"
    assert {"enable_metrics", "enable_cache_report"} <= set(static.unresolved)
    static = _static(host, docker, {})
    assert static.args["moe_runner_backend"] == "flashinfer_mxfp4" and static.env["TWO"] == "2"
    assert "ONE" in static.unresolved and "ONE" not in static.env
    rc, report, err = _preflight(host.env, "--script", str(docker))
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail", err


def test_a_script_without_cd_is_read_from_its_directory_and_says_so(host: Host) -> None:
    """F8 of world9: ``--script`` reads a script that does not cd as run from its own directory; the
    program, the files it sources and a relative ``--model-path`` are all found from there (not from
    preflight's own directory), and the report names that assumption. A script that cds first has none."""
    model = "./models/Ling-3.0-flash-fp4"
    body = (
        "source .venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec python3 -m sglang.launch_server --model-path {model} {RECIPE}"
        f" --speculative-draft-model-path {model}\n"
    )
    script = _write(host, "relative.sh", "#!/bin/bash\n" + body)
    _, report, err = _preflight(host.env, "--script", str(script))  # from /
    statuses = _statuses(report)
    assert statuses["checkpoint.layout"] == statuses["launch.program"] == "pass", (err, statuses)
    (warnings,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert f"read as run from {host.root} (the script's own directory)" in warnings["message"]
    for cd in ('cd "$(dirname "$0")"', f"cd {host.root}"):
        script = _write(host, "cds.sh", f"#!/bin/bash\n{cd}\n{body}")
        _, report, err = _preflight(host.env, "--script", str(script))
        assert _statuses(report)["checkpoint.layout"] == "pass", err
        assert "read as run from" not in json.dumps(report), cd


def test_a_model_path_without_dot_slash_is_read_from_the_scripts_directory_and_says_so(host: Host) -> None:
    """F8's follow-up: SGLang loads ``--model-path models/x`` from the working directory where a directory of
    that name is there (``os.path.isdir``), else the Hugging Face repo of that id. A script that does not cd
    is read from its own directory: the checkpoint is read from there (it was not read at all) and the
    warning names the assumption, as for ``./models/x``; after a cd, from there, with no warning."""
    model = "models/Ling-3.0-flash-fp4"
    body = (
        f"source {host.root}/.venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec python3 -m sglang.launch_server --model-path {model} {RECIPE}"
        f" --speculative-draft-model-path {model}\n"
    )
    script = _write(host, "bare-relative.sh", "#!/bin/bash\n" + body)
    rc, report, err = _preflight(host.env, "--script", str(script))  # from /
    statuses = _statuses(report)
    assert rc == 0 and statuses["checkpoint.layout"] == "pass", (err, report["checks"])
    (warnings,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert f"read as run from {host.root} (the script's own directory)" in warnings["message"]
    script = _write(host, "bare-relative-cd.sh", f"#!/bin/bash\ncd {host.root}\n{body}")
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and _statuses(report)["checkpoint.layout"] == "pass", err
    assert "read as run from" not in json.dumps(report)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("#!/bin/sh\necho starting\nsleep 1\n", "no path through the script starts the SGLang server"),
        ("#!/bin/sh\nif [ -f x ]; then\n  python3 -m sglang.launch_server\n", "syntax error"),
        # F11 of world9: where the paths end, said as a sentence
        ("#!/bin/sh\necho starting\nexit 3\n", "its paths end at line 3 (exit 3)"),
        ("#!/bin/sh\necho starting\n", "its paths end at the end of the script"),
        # a driver that starts the server through another script (0xBakeer's tune.sh): named, not followed
        (
            '#!/bin/bash\ncd "$(dirname "${BASH_SOURCE[0]}")"\nPROFILE=humming-dspark \\\n'
            "  setsid nohup ./start.sh > tune.log 2>&1 &\n",
            "it runs another script, ./start.sh (line 3), which is not followed here: if that starts the "
            "server, give it with --script",
        ),
        ("#!/bin/sh\nbash -x run-server.sh --fast\n", "it runs another script, run-server.sh (line 2)"),
    ],
)
def test_broken_scripts_exit_65_with_one_line(host: Host, text: str, needle: str) -> None:
    script = _write(host, "broken.sh", text)
    rc, _, err = _preflight(host.env, "--script", str(script))
    assert rc == 65, err
    assert needle in err and str(script) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_other_script_a_script_runs_is_named_in_a_bounded_message(host: Host) -> None:
    """red team 20: the name of the other script (F11) is a word the script computes; a word of 64 MiB
    (doubled 22 times) made a 64 MiB message and took 10 s. Its first 200 characters are shown. (A value
    over 1 MiB is now unknown to the reader, red team 19: 512 KiB here, doubled 15 times.)"""
    text = "#!/bin/bash\nX=AAAAAAAAAAAAAAAA\n" + "X=$X$X\n" * 15 + './"$X".sh\n./"$X".sh\n'
    script = _write(host, "huge-name.sh", text)
    rc, _, err = _preflight(host.env, "--script", str(script))
    assert rc == 65 and "it runs another script, ./AAAA" in err and "A... (line 18)" in err, err[:300]
    assert len(err) < 2000 and err.count("A... (line ") == 2


def test_hostile_script_inputs_are_bounded(host: Host, tmp_path: Path) -> None:
    big = tmp_path / "big.sh"
    big.write_bytes(b"# x\n" * 400_000)
    rc, _, err = _preflight(host.env, "--script", str(big))
    assert rc == 65 and "cap" in err
    loop = tmp_path / "loop.sh"
    loop.write_text(f"#!/bin/sh\n. {loop}\n")
    rc, report, err = _preflight(host.env, "--script", str(loop))
    assert rc == 69 and any("deeper than" in c["message"] for c in report["checks"]), err
    fifo = tmp_path / "fifo.sh"
    os.mkfifo(fifo)
    rc, _, err = _preflight(host.env, "--script", str(fifo))
    assert rc == 65 and "not a regular file" in err
    deep = tmp_path / "deep.sh"
    deep.write_text("X=" + "$(echo " * 5000 + "a" + ")" * 5000 + "\nexec python3 -m sglang.launch_server\n")
    rc, _, err = _preflight(host.env, "--script", str(deep))
    assert rc == 65 and "nested deeper than" in err and "Traceback" not in err
    nested = tmp_path / "nested.sh"  # deep, but within the bound: evaluated without running out of stack
    nested.write_text(
        "if true; then\n" * 90
        + f"exec python3 -m sglang.launch_server --model-path /m {RECIPE}\n"
        + "fi\n" * 90
    )
    rc, report, err = _preflight(host.env, "--script", str(nested))
    assert report and _statuses(report)["moe.backend"] == "pass", err


def test_a_script_given_as_a_launch_command_says_to_use_script(host: Host) -> None:
    """The issue's first symptom: `--launch-args-file start.sh` stopped at `unrecognised program 'export'`."""
    script = _write(host, "guide.sh", GUIDE)
    rc, _, err = _preflight(host.env, "--launch-args-file", str(script))
    assert rc == 65 and "give it with --script FILE" in err


def test_a_script_that_runs_a_container_is_read_as_that_container(host: Host, tmp_path: Path) -> None:
    """`exec docker run ...` at the end of a run.sh: the container's command, -e and mounts (relative to the
    script's directory), with the image's install reported as not proven, as for --docker-cmd."""
    models = host.root / "models"
    script = _write(
        host,
        "run.sh",
        '#!/bin/bash\ncd "$(dirname "$0")"\nIMAGE=${IMAGE:-lmsysorg/sglang:spark}\n'
        "exec docker run --gpus all --ipc host --rm -v ./models:/models:ro \\\n"
        "  -e SGLANG_ENABLE_FP8_LM_HEAD=1 \\\n"
        f'  "$IMAGE" python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 {RECIPE} \\\n'
        "  --speculative-draft-model-path /models/Ling-3.0-flash-fp4\n",
    )
    assert (models / "Ling-3.0-flash-fp4" / "config.json").is_file()
    rc, report, err = _preflight({**host.env, "IMAGE": "my/sglang:ling3"}, "--script", str(script))
    statuses = _statuses(report)
    assert statuses["moe.backend"] == statuses["spec.config"] == statuses["checkpoint.layout"] == "pass", err
    (shared,) = [c for c in report["checks"] if c["id"] == "spec.lm_head_shared"]
    assert shared["status"] == "error" and "my/sglang:ling3" in shared["message"]
    assert rc == 69


# -- attacks: constructs that make bash run something other than what the script seems to say ------------

ATTACK_BASE = f"""#!/bin/bash
source .venv/bin/activate
export SGLANG_ENABLE_FP8_LM_HEAD=1
export HUMMING_CACHE_DIR=$HOME/.humming/cache
M=$HOME/models/Ling-3.0-flash-fp4
SPEC="{RECIPE.replace("--moe-runner-backend humming ", "")}"
@PRE@
@EXEC@ python3 -m sglang.launch_server --model-path "$M" --trust-remote-code --moe-runner-backend humming \\
  $SPEC --speculative-draft-model-path "$M" @ARGS@
"""
FP8 = "SGLANG_ENABLE_FP8_LM_HEAD"

# name: (lines before the launch, the launch's first word, extra launch words, files, extra env, outcome)
# outcome "fail:CHECK" (bash's launch is read exactly and that check fails) or "inconclusive"
ATTACKS: dict[str, tuple[str, str, str, dict[str, str], dict[str, str], str]] = {
    "eval-export": (f"eval 'export {FP8}=0'", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "eval-unknown": (
        'eval "$(cat extra.sh)"',
        "exec",
        "",
        {"extra.sh": f"export {FP8}=0\n"},
        {},
        "inconclusive",
    ),
    "printf-v": (f"printf -v {FP8} '%s' 0", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "printf-v-indirect": (f"V={FP8}; printf -v \"$V\" '%s' 0", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "printf-v-unknown": (
        f"printf -v {FP8} '%s' \"$(cat extra.sh)\"",
        "exec",
        "",
        {"extra.sh": "0"},
        {},
        "inconclusive",
    ),
    "quoted-export": (f'export "{FP8}=0"', "exec", "", {}, {}, "fail:lm_head.fp8"),
    "export-n": (f"export -n {FP8}", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "declare+x": (f"declare +x {FP8}", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "declare-n": (f"declare -n R={FP8}; R=0", "exec", "", {}, {}, "inconclusive"),
    "trap-debug": (f"trap '{FP8}=0' DEBUG", "exec", "", {}, {}, "inconclusive"),
    "mapfile": (
        "mapfile -t EXTRA < extra.args",
        "exec",
        '"${EXTRA[@]}"',
        {"extra.args": "--moe-runner-backend\ntriton\n"},
        {},
        "inconclusive",
    ),
    "function-python3": (
        'python3() { command python3 "$@" --moe-runner-backend triton; }',
        "",
        "",
        {},
        {},
        "fail:moe.backend",
    ),
    "function-exec": (f'exec() {{ {FP8}=0 command "$@"; }}', "exec", "", {}, {}, "fail:lm_head.fp8"),
    "ifs": ("IFS=:", "exec", "", {}, {}, "refused"),
    # the script writes the file whole from a static here-document, then sources it: read as written
    "heredoc-sourced": (
        f"cat > site-a.env <<EOF\nexport {FP8}=0\nEOF\nsource ./site-a.env",
        "exec",
        "",
        {"site-a.env": f"export {FP8}=1\n"},
        {},
        "fail:lm_head.fp8",
    ),
    "test-string": (
        f'P=mtp-fast; if [ "$P" == "mtp*" ]; then :; else {FP8}=0; fi',
        "exec",
        "",
        {},
        {},
        "fail:lm_head.fp8",
    ),
    "test-pattern": (f"P=mtp-fast; [[ $P = mtp* ]] && {FP8}=0", "exec", "", {}, {}, "fail:lm_head.fp8"),
    "case-variable-pattern": (
        f"PAT='mtp*'; case mtp-fast in $PAT) {FP8}=0;; esac",
        "exec",
        "",
        {},
        {},
        "fail:lm_head.fp8",
    ),
    "source-path-search": (
        "source site-b.env",
        "exec",
        "",
        {"site-b.env": f"export {FP8}=1\n", "tools/site-b.env": f"export {FP8}=0\n"},
        {},
        "fail:lm_head.fp8",
    ),
    "alias": (f"shopt -s expand_aliases; alias python3='{FP8}=0 python3'", "", "", {}, {}, "inconclusive"),
    "hash-p": ("hash -p /bin/false python3", "", "", {}, {}, "inconclusive"),
    "bash-env": (
        "",
        "exec",
        "",
        {"hook.sh": f"export {FP8}=0\n"},
        {"BASH_ENV": "@ROOT@/hook.sh"},
        "inconclusive",
    ),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attacks_never_pass(host: Host, name: str) -> None:
    """Each trick is either read exactly as bash runs it (and the check a reviewer would name fails) or
    made unresolved (inconclusive); none passes."""
    pre, head, extra, files, env, outcome = ATTACKS[name]
    text = ATTACK_BASE.replace("@PRE@", pre).replace("@EXEC@", head).replace("@ARGS@", extra)
    for rel, content in files.items():
        (host.root / rel).write_text(content)
    try:
        script = _write(host, f"attack-{name}.sh", text)
        run_env = {**host.env, **{k: v.replace("@ROOT@", str(host.root)) for k, v in env.items()}}
        rc, report, err = _preflight(run_env, "--script", str(script))
    finally:
        for rel in files:
            (host.root / rel).unlink()
    assert rc != 0 and report.get("verdict") != "pass", (rc, err, report.get("checks"))
    if outcome == "inconclusive":
        assert rc == 69 and report["verdict"] == "inconclusive", (err, report.get("checks"))
    elif outcome.startswith("fail:"):
        assert rc == 78 and _statuses(report)[outcome[5:]] == "fail", (err, report.get("checks"))
    else:  # bash hands SGLang one word with blanks in it: argparse refuses it, and so does preflight
        assert rc == 65 and "unrecognized arguments" in err, err


def test_the_attack_baseline_passes(host: Host) -> None:
    """The same script with no trick passes: the attacks fail because of the trick."""
    text = ATTACK_BASE.replace("@PRE@", "").replace("@EXEC@", "exec").replace("@ARGS@", "")
    script = _write(host, "attack-none.sh", text)
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))
    assert _static(host, script, {}).argv == _bash_run(host, script, {})["argv"][2:]


@pytest.mark.parametrize(
    ("flag", "word"),
    [("--model-checksum", "--enable-fp32-lm-head"), ("--custom-weight-loader", "--speculative-token-map=/t")],
)
def test_a_run_time_word_after_a_flag_whose_value_is_optional_may_be_an_option(
    host: Host, flag: str, word: str
) -> None:
    """red team 20: argparse gives a ``nargs='?'``/``'*'`` flag the next word only when it is not an option,
    so ``--model-checksum "$C"`` with C=``--enable-fp32-lm-head`` runs the FP8 and FP32 heads both. A
    word known only at run time there leaves the launch unresolved, never read as that flag's value (the
    trap PASSed: the FP32 head read as off), on one path or where paths differ."""
    (host.root / "flag").write_text(word + "\n")
    body = (
        "source .venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\nM=~/models/Ling-3.0-flash-fp4\n"
        f"python3 -m sglang.launch_server --model-path $M {RECIPE} --speculative-draft-model-path $M "
    )
    one = _write(host, "optional-value.sh", f'#!/bin/bash\nC=$(cat ~/flag)\n{body}{flag} "$C"\n')
    assert _bash_run(host, one, {})["argv"][-2:] == [flag, word]
    rc, report, err = _preflight(host.env, "--script", str(one))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", err
    assert "takes a value only if the word after it is not an option" in json.dumps(report)
    # where the paths differ, each is read apart: the path that gives the option is the trap
    two = _write(
        host,
        "optional-paths.sh",
        f'#!/bin/bash\nif grep -q -- - ~/flag; then C={word}; else C=sha; fi\n{body}{flag} "$C"\n',
    )
    static = _static(host, two, {})
    dest = "enable_fp32_lm_head" if "fp32" in word else "speculative_token_map"
    assert dest in static.unresolved
    rc, report, err = _preflight(host.env, "--script", str(two))
    assert rc != 0, err


def test_a_run_time_word_after_a_flag_that_needs_a_value_is_its_value_even_where_it_may_be_a_double_dash(
    host: Host,
) -> None:
    """red team 20 (left): a word known only at run time after a flag that needs one value (``--chat-template
    "$T"``) may be ``--``, which ends argparse's options. SGLang's parser has no positional arguments, so
    ``--`` anywhere (or any word that looks like an option there) makes it refuse the command (Python 3.11,
    SGLang 0.5.23's, as 3.12 and 3.13): such a path starts no server. On every path that starts one the
    word is the flag's value, so the rest of the command is read as known, and a trap in it fails."""
    from validator.errors import InputError
    from validator.sources.sglang.cli import parse_argv

    body = (
        "source .venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\nM=~/models/Ling-3.0-flash-fp4\n"
        f"python3 -m sglang.launch_server --model-path $M {RECIPE} --speculative-draft-model-path $M "
    )
    script = _write(
        host,
        "dash-value.sh",
        f'#!/bin/bash\nT=$(cat ~/value)\n{body}--chat-template "$T" --enable-fp32-lm-head\n',
    )
    for value, starts in (("--", False), ("--enable-metrics", False), ("tmpl", True), ("-1", True)):
        (host.root / "value").write_text(value + "\n")
        argv = _bash_run(host, script, {})["argv"]
        assert argv[-3:] == ["--chat-template", value, "--enable-fp32-lm-head"], argv
        try:
            parsed = parse_argv(argv[argv.index("sglang.launch_server") + 1 :], origin="bash's argv")
        except InputError as exc:
            assert not starts, (value, str(exc))
        else:
            assert starts and parsed.args["chat_template"] == value, value
            assert parsed.args["enable_fp32_lm_head"] is True
    static = _static(host, script, {})
    assert "chat_template" in static.unresolved and static.args["enable_fp32_lm_head"] is True
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, report.get("checks"))


def test_the_words_after_a_run_time_value_of_a_flag_with_many_values_are_its_values(host: Host) -> None:
    """argparse gives a ``nargs='+'`` flag every word after it up to the next that looks like an option:
    ``--cuda-graph-bs-decode "$BS" 4 8`` is three values. The reading dropped the flag and its run-time
    value and kept ``4 8`` as stray words, which SGLang would refuse: exit 65 for a command that starts,
    and, on a path beside one that starts (b7bc5a1), a path taken for refused and not judged (its trap
    unseen: a PASS). Now those words go with the flag, whose value is unresolved."""
    from validator.sources.sglang.cli import parse_argv

    (host.root / "bs").write_text("2\n")
    body = (
        "#!/bin/bash\nsource .venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        "M=~/models/Ling-3.0-flash-fp4\nBS=$(cat ~/bs)\n@PRE@\n"
        f"exec python3 -m sglang.launch_server --model-path $M {RECIPE} --speculative-draft-model-path $M "
    )
    one = _write(
        host,
        "many-one.sh",
        body.replace("@PRE@", "") + '--cuda-graph-bs-decode "$BS" 4 8 --enable-fp32-lm-head\n',
    )
    argv = _bash_run(host, one, {})["argv"]
    parsed = parse_argv(argv[argv.index("sglang.launch_server") + 1 :], origin="bash's argv")
    assert parsed.args["cuda_graph_bs_decode"] == [2, 4, 8] and parsed.args["enable_fp32_lm_head"] is True
    rc, report, err = _preflight(host.env, "--script", str(one))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, report.get("checks"))
    # the trap on a path beside a clean one: never a pass
    pre = 'X=()\nif grep -q 3 ~/bs; then X=(--cuda-graph-bs-decode "$BS" 4 --enable-fp32-lm-head); fi'
    two = _write(host, "many-two.sh", body.replace("@PRE@", pre) + '"${X[@]}"\n')
    rc, report, err = _preflight(host.env, "--script", str(two))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", (err, report.get("checks"))
    # a dashed word with a blank in it there: an option's = form or a value, which only argparse's
    # abbreviations tell
    three = _write(
        host, "many-three.sh", body.replace("@PRE@", "") + '--cuda-graph-bs-decode "$BS" "--ch=a b"\n'
    )
    rc, report, err = _preflight(host.env, "--script", str(three))
    assert rc == 69 and "is an option or a value of --cuda-graph-bs-decode" in json.dumps(report), err


def test_a_path_whose_arguments_sglang_refuses_is_not_the_launch(host: Host) -> None:
    """red team 20: a path whose words SGLang's parser refuses (argparse exits 2 before the server serves)
    starts no server, as a path that exits first does not: the paths that start are judged, with a warning
    naming the refused one's line and reason (the whole launch was exit 65, malformed). A trap on a path that
    starts still fails; where every path is refused, the launch is malformed."""
    (host.root / "flag").write_text("x\n")

    def script(name: str, start: str, refused: str, more: str = "") -> Path:
        pre = f"X=({start})\nif grep -q y ~/flag; then\n  X=({refused})\nfi{more}"
        text = ATTACK_BASE.replace("@PRE@", pre).replace("@EXEC@", "exec").replace("@ARGS@", '"${X[@]}"')
        return _write(host, name, text)

    clean = script("refused-clean.sh", "", "--chat-template")
    rc, report, err = _preflight(host.env, "--script", str(clean))
    (warning,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert rc == 0 and report["verdict"] == "pass" and warning["status"] == "warn", (err, report["checks"])
    assert f"{clean}:11 (the path where {clean}:8: grep -q y" in warning["message"]
    assert (
        "refuses the server's arguments there (argument --chat-template: expected one argument)"
        in (warning["message"])
    )
    trap = script("refused-trap.sh", "--enable-fp32-lm-head", "/t")
    rc, report, err = _preflight(host.env, "--script", str(trap))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, report.get("checks"))
    # the trap on one of two paths that start: unresolved, never a pass
    half = script("refused-half.sh", "", "--enable-fp32-lm-head", "\ngrep -q z ~/flag && X=(/t)")
    rc, report, err = _preflight(host.env, "--script", str(half))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", (err, report.get("checks"))
    every = script("refused-every.sh", "--chat-template", "/t")
    rc, report, err = _preflight(host.env, "--script", str(every))
    assert rc == 65 and ("unrecognized arguments: /t" in err or "expected one argument" in err), err


def test_a_relative_model_path_where_the_scripts_directory_is_unknown_is_not_read_from_here(
    host: Host,
) -> None:
    """red team 20: a script that cds where only the run tells (``cd "$(cat ~/where)"``) starts the server
    there: its relative ``--model-path`` is unknown, never read from the directory preflight stands in (a
    checkpoint there passed the checks for one the server may never load)."""
    (host.root / "where").write_text("/elsewhere\n")
    model = "./models/Ling-3.0-flash-fp4"
    script = _write(
        host,
        "cd-unknown.sh",
        "#!/bin/bash\nsource .venv/bin/activate\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f'cd "$(cat ~/where)"\nexec python3 -m sglang.launch_server --model-path {model} {RECIPE}'
        f" --speculative-draft-model-path {model}\n",
    )
    rc, report, err = preflight_json_in_process(host.env, "--script", str(script), cwd=str(host.root))
    (layout,) = [c for c in report["checks"] if c["id"] == "checkpoint.layout"]
    assert layout["status"] == "error" and "known only at run time" in layout["message"], err
    assert rc != 0


def test_a_relative_config_where_the_scripts_directory_is_unknown_is_not_read_from_here(host: Host) -> None:
    """Red team 21: the same script's ``--config ./c.yaml`` was merged from the directory preflight stands
    in: the operator's c.yaml there (``enable-fp32-lm-head: false``) read as the server's settings with
    the FP8 head, --check lm_head.exclusive passed (exit 0) where the server's own c.yaml may ask for FP32
    too. A relative --config is unknown where the working directory is."""
    (host.root / "c.yaml").write_text("enable-fp32-lm-head: false\n")
    script = _write(
        host,
        "cd-config.sh",
        'cd "$(cat ~/where)"\nSGLANG_ENABLE_FP8_LM_HEAD=1 exec python3 -m sglang.launch_server '
        "--model-path /m --config ./c.yaml\n",
    )
    rc, report, err = preflight_json_in_process(
        host.env, "--check", "lm_head.exclusive", "--script", str(script), cwd=str(host.root)
    )
    (check,) = [c for c in report["checks"] if c["id"] == "lm_head.exclusive"]
    assert check["status"] == "error" and "--config ./c.yaml is relative" in check["message"], err
    assert rc == 69


def test_what_another_paths_container_leaves_unknown_stays_unknown(host: Host) -> None:
    """red team 20: paths read apart kept the first path's unknowns only: a container on another path whose
    shell sources a file of the image (``bash -c "source /opt/env.sh; exec ..."``: any variable may reach the
    server) read as if only the variables given reached it."""
    script = _write(
        host,
        "container-paths.sh",
        "#!/bin/bash\nS='python3 -m sglang.launch_server --model-path /m --moe-runner-backend humming'\n"
        "if nvidia-smi -L | grep -q GB10; then\n  docker run --gpus all img $S\nelse\n"
        '  docker run --gpus all --rm img bash -c "source /opt/env.sh; exec $S"\nfi\n',
    )
    static = _static(host, script, {})
    assert "*" in static.unresolved and "/opt/env.sh" in static.unresolved["*"], static.unresolved


def test_a_path_the_shipped_table_refuses_in_an_image_of_unread_version_is_not_dropped(host: Host) -> None:
    """A path is dropped as starting no server only where its refusal is certain: in a container whose
    SGLang version is not read here, the shipped table's refusal (``--cuda-graph-bs-decode 1 2`` is an
    ambiguous prefix in 0.5.23, a real flag elsewhere) may not be the image's, so the other path's trap
    cannot be judged alone: unresolved (69), never the clean path's PASS."""
    (host.root / "flag").write_text("x\n")
    text = (
        "#!/bin/bash\nX=(--enable-fp32-lm-head)\nif grep -q y ~/flag; then\n  X=(--cuda-graph-bs 1 2)\nfi\n"
        "exec docker run --rm -e SGLANG_ENABLE_FP8_LM_HEAD=1 lmsysorg/sglang:spark python3 -m "
        'sglang.launch_server --model-path /m --moe-runner-backend humming "${X[@]}"\n'
    )
    script = _write(host, "refused-image.sh", text)
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69, (err, _statuses(report))
    assert "the image's SGLang may not" in json.dumps(report) + err, (err, report)


def test_a_path_a_build_of_unread_flags_may_accept_is_not_dropped(tmp_path: Path) -> None:
    """Red team 24: with a host build of another version and no generated table, the shipped table parses
    leniently (unknown flags reported), but a path it refused otherwise (a --tool-call-parser choice
    0.5.23 lacks) was still dropped as starting no server, and the other path passed alone (exit 0)
    where the build may accept it and start both heads: as for an image of unread version (2ff6cfe), the
    launch is unresolved."""
    host = _host(tmp_path, version="0.5.99")
    (host.root / "flag").write_text("y\n")
    text = (
        '#!/bin/bash\ncd "$(dirname "$0")"\nX=()\n'
        "if grep -q y ~/flag; then\n  X=(--tool-call-parser ling4 --enable-fp32-lm-head)\nfi\n"
        "M=~/models/Ling-3.0-flash-fp4\n"
        "SGLANG_ENABLE_FP8_LM_HEAD=1 HUMMING_CACHE_DIR=~/.humming/cache exec .venv/bin/python3 -m "
        f"sglang.launch_server --model-path $M --trust-remote-code {RECIPE} "
        '--speculative-draft-model-path $M --mem-fraction-static 0.68 "${X[@]}"\n'
    )
    script = _write(host, "unread-build.sh", text)
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69, (rc, err, _statuses(report))
    (host.root / "flag").write_text("n\n")  # control: the same launch without the refused path passes
    script = _write(host, "unread-build.sh", text.replace("--tool-call-parser ling4 ", ""))
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", (rc, err, _statuses(report))
