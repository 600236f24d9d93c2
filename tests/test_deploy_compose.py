"""deploy/compose and the container inputs (`--compose`, `--docker-cmd`).

The shipped Compose file is validated by a real Compose implementation (Debian's `docker-compose config`,
which checks it against the Compose specification without a daemon) and by that specification's JSON schema;
the Dockerfile by hadolint. Building and running the images needs a GPU image registry and a daemon, which CI
does not have: what the containers would do is tested through its parts instead (the sidecar's healthcheck
command against a real sidecar and the simulator; every command through spark-validate's real parser; our
Compose reader held to `docker-compose config`).
"""

from __future__ import annotations

import json
import logging.config
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.daemon_process import daemon_process, start_sim, wait_for
from tests.support.deploy_tools import DEPLOY, REPO, parse_cli, require_tool, run_tool, serve_config
from tests.support.in_process import preflight_json_in_process
from tests.support.loopback import free_port, stop
from validator.sources.container import Mount, host_path
from validator.sources.launch.compose import load_compose
from validator.sources.launch.docker_run import parse_docker_cmd

COMPOSE = DEPLOY / "compose" / "compose.yaml"
DOCKERFILE = DEPLOY / "compose" / "Dockerfile"
SPEC_SCHEMA = Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json")
FAST = ["--interval", "1", "--health-interval", "0.3", "--probe-interval", "60", "--wait", "15"]


def _config(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`docker-compose config`: the file as Compose itself resolves it (interpolated, normalised)."""
    tool = require_tool("docker-compose")
    proc = subprocess.run(
        [tool, "-f", str(path), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = yaml.safe_load(proc.stdout)
    return doc


def _shipped() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


def test_compose_file_passes_docker_compose_config(tmp_path: Path) -> None:
    tool = require_tool("docker-compose")
    result = run_tool([tool, "-f", str(COMPOSE), "config", "-q"])
    assert result.returncode == 0, result.stderr
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("    ipc: host\n", "    ipcmode: host\n"))
    result = run_tool([tool, "-f", str(broken), "config", "-q"])
    assert result.returncode != 0 and "ipcmode" in result.stderr


def test_compose_file_matches_the_compose_specification_schema() -> None:
    if not SPEC_SCHEMA.is_file():  # shipped by Debian's docker-compose, which .ci/run installs
        require_tool("docker-compose")
        pytest.fail(f"{SPEC_SCHEMA} missing although docker-compose is installed")
    validator = jsonschema.Draft201909Validator(json.loads(SPEC_SCHEMA.read_text()))
    validator.validate(_shipped())
    bad = _shipped()
    bad["services"]["spark-validate"]["healthcheck"]["intervall"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    hadolint = str(Path(sys.executable).parent / "hadolint")
    result = run_tool([hadolint, str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr
    worse = tmp_path / "Dockerfile"
    worse.write_text(DOCKERFILE.read_text().replace("FROM ${SGLANG_IMAGE}", "FROM ubuntu:latest"))
    result = run_tool([hadolint, str(worse)])
    assert result.returncode != 0 and "DL3007" in result.stdout


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuations joined, comments dropped)."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        pending += raw.rstrip("\\").strip() + " "
        if not raw.endswith("\\"):
            lines.append(pending.strip())
            pending = ""
    return [(line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in lines]


def test_dockerfile_copies_what_exists_and_the_ignore_file_admits_it() -> None:
    copies = [rest.split()[:-1] for op, rest in _instructions() if op == "COPY"]
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    for sources in copies:
        for src in sources:
            assert (REPO / src).exists(), src
            assert f"!{src}" in ignore or f"!{src}/" in ignore, f"{src} is excluded from the build context"
    env = dict(kv.split("=", 1) for op, rest in _instructions() if op == "ENV" for kv in rest.split())
    service_env = _shipped()["services"]["sglang"]["environment"]
    for key, value in env.items():
        assert service_env[key] == value, key
    assert any(op == "USER" and rest.split(":")[0] == "10001" for op, rest in _instructions())
    run = " ".join(rest for op, rest in _instructions() if op == "RUN")
    assert "install -d -m 0700 -o sglang -g sglang /run/spark-validate" in run
    assert "--uid 10001" in run and "--create-home" in run


def test_logging_config_is_a_valid_dictconfig_writing_the_sidecars_log(tmp_path: Path) -> None:
    """SGLang applies the shipped file after its modules made their loggers: it must leave them enabled.
    The root logger's level and handlers are put back afterwards, and nothing else is reconfigured (a
    second ``dictConfig`` would disable every logger made so far, in this worker's later tests too)."""
    doc = json.loads((DEPLOY / "compose" / "logging.json").read_text())
    sidecar = parse_cli(_shipped()["services"]["spark-validate"]["command"][1:])
    assert doc["handlers"]["file"]["filename"] == str(sidecar.log)
    doc["handlers"]["file"]["filename"] = str(tmp_path / "server.log")
    early = logging.getLogger("sglang.srt.made_before_the_config")
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    try:
        logging.config.dictConfig(doc)
        logging.getLogger("sglang").info("Online FP8 quantization enabled for lm_head.")
        early.info("a logger made before the config still writes")
        root.handlers[-1].flush()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    written = (tmp_path / "server.log").read_text()
    assert "Online FP8 quantization enabled" in written
    assert not early.disabled and "a logger made before the config still writes" in written


def _shipped_compose(tmp_path: Path) -> Path:
    """deploy/compose copied to the same place under tmp_path: the reader refuses a Compose file whose
    project directory others could write into (a .env planted), and the checkout may be under /tmp."""
    copy = tmp_path / "checkout" / "deploy" / "compose"
    shutil.copytree(COMPOSE.parent, copy)
    return copy / COMPOSE.name


def test_reader_resolves_the_shipped_service_as_docker_compose_does(tmp_path: Path) -> None:
    env = {"MODEL_DIR": str(tmp_path / "models")}
    config = _config(COMPOSE, env)["services"]["sglang"]
    spec = load_compose(_shipped_compose(tmp_path), "sglang", {"PATH": "/usr/bin:/bin", **env})
    assert spec.argv == config["command"]
    assert spec.env == {k: str(v) for k, v in config["environment"].items()}
    assert [_short(m) for m in spec.mounts] == config["volumes"]


def _short(m: Mount) -> str:
    source = m.source if m.source is not None else m.volume
    return f"{source}:{m.target}:{'ro' if m.read_only else 'rw'}"


FIXTURE = """services:
  llm:
    image: lmsysorg/sglang:spark
    entrypoint: ["python3", "-m", "sglang.launch_server"]
    command: --model-path /models/${MODEL:-Ling-3.0-flash-fp4} --moe-runner-backend ${BACKEND:?set BACKEND}
    environment:
      - SGLANG_ENABLE_FP8_LM_HEAD=1
      - FROM_HOST
      - PRICE=$$5
    env_file: [site.env]
    volumes:
      - ./models:/models:ro
      - type: bind
        source: ~/cache
        target: /root/.cache
      - hf:/hf
  other:
    image: redis
volumes:
  hf: {}
"""


def test_reader_matches_docker_compose_on_interpolation_env_files_and_volumes(tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(FIXTURE)
    (tmp_path / "site.env").write_text(
        '# site\nHUMMING_CACHE_DIR="/root/.cache/humming"\nexport X=1\nY=a # c\n'
    )
    (tmp_path / ".env").write_text("MODEL=Ling-local\nBACKEND=humming\n")
    host = {"FROM_HOST": "yes", "HOME": str(Path.home())}
    config = _config(tmp_path / "compose.yaml", host)["services"]["llm"]
    spec = load_compose(tmp_path / "compose.yaml", None, {"PATH": "/usr/bin:/bin", **host})
    # `config` writes a literal $ as $$ (so that its output interpolates to the same values)
    assert spec.argv == [*config["entrypoint"], *config["command"].replace("$$", "$").split()]
    assert spec.env == {k: str(v).replace("$$", "$") for k, v in config["environment"].items()}
    volumes = [v if isinstance(v, str) else f"{v['source']}:{v['target']}:rw" for v in config["volumes"]]
    assert [_short(m) for m in spec.mounts] == volumes
    (tmp_path / ".env").write_text("MODEL=x\n")
    with pytest.raises(Exception, match="BACKEND"):
        load_compose(tmp_path / "compose.yaml", "llm", {})


def _preflight(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    return preflight_json_in_process({"PATH": "/usr/bin:/bin", **env}, *args)


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def test_preflight_of_the_shipped_compose_file_checks_the_command_and_says_what_the_image_hides(
    tmp_path: Path,
) -> None:
    write_checkpoint(tmp_path / "Ling-3.0-flash-fp4", small=False)
    compose = _shipped_compose(tmp_path)
    rc, report, err = _preflight({"MODEL_DIR": str(tmp_path)}, "--compose", str(compose))
    assert report, err
    statuses = _statuses(report)
    for check in ("moe.backend", "spec.config", "lm_head.exclusive"):
        assert statuses[check] == "pass", report["checks"]
    assert statuses["checkpoint.layout"] == "pass"  # /models is mounted from MODEL_DIR on this host
    for check in ("lm_head.fp8", "spec.lm_head_shared", "moe.humming_runtime"):
        (result,) = [c for c in report["checks"] if c["id"] == check]
        assert result["status"] == "error" and "inside an image built from a Dockerfile" in result["message"]
    assert rc == 69 and report["verdict"] == "inconclusive"


def test_sidecar_service_is_wired_to_the_server() -> None:
    services = _shipped()["services"]
    server, sidecar = services["sglang"], services["spark-validate"]
    launch = parse_cli(server["command"][1:])
    assert launch.command == "launch" and launch.cmd[1:4] == ["python3", "-m", "sglang.launch_server"]
    serve = parse_cli(sidecar["command"][1:])
    config = serve_config(sidecar["command"][1:])
    assert config.listen == (("0.0.0.0", 9464),) and config.schedule.probe
    # the sidecar owns the namespaces the server joins, so it outlives a refused start and still answers
    assert serve.url == "http://127.0.0.1:30000" and server["network_mode"] == "service:spark-validate"
    assert server["pid"] == "service:spark-validate" and "network_mode" not in sidecar
    assert str(serve.attestation) == server["environment"]["SPARK_VALIDATE_ATTESTATION"]
    assert {"127.0.0.1:9464:9464", "127.0.0.1:30000:30000"} <= set(sidecar["ports"]) and "ports" not in server
    assert str(serve.launch_state) == server["environment"]["SPARK_VALIDATE_LAUNCH_STATE"]
    assert str(serve.launch_state).startswith("/run/spark-validate/")  # in the volume both mount
    assert "attestation:/run/spark-validate" in server["volumes"]
    assert "attestation:/run/spark-validate:ro" in sidecar["volumes"]
    assert "humming-cache:/var/cache/humming" in server["volumes"]
    assert server["environment"]["HUMMING_CACHE_DIR"] == "/var/cache/humming"
    assert server["ipc"] == "host"
    (device,) = server["deploy"]["resources"]["reservations"]["devices"]
    assert device == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    assert set(_shipped()["volumes"]) == {"attestation", "server-log", "humming-cache"}


def test_sidecar_healthcheck_command_follows_readyz(tmp_path: Path) -> None:
    """The healthcheck's exact command (CMD form), pointed at a real sidecar on a test port: unhealthy while
    the sidecar has no passing check, healthy once /readyz is 200."""
    test = _shipped()["services"]["spark-validate"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python3"
    sim_port = free_port()
    # the sidecar here sees the simulator over HTTP only (no attestation): it accepts the unproven draft head
    with daemon_process(tmp_path, f"http://127.0.0.1:{sim_port}", *FAST, "--allow-partial") as sidecar:
        argv = [a.replace("127.0.0.1:9464", f"127.0.0.1:{sidecar.port}") for a in test[1:]]
        assert argv != test[1:], "the healthcheck no longer names 127.0.0.1:9464"
        argv[0] = sys.executable

        def healthcheck() -> int:
            return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode

        assert sidecar.get("/readyz").status_code == 503
        assert healthcheck() == 1
        sim = start_sim(sim_port, "healthy")
        try:
            assert wait_for(lambda: sidecar.get("/readyz").status_code == 200, timeout=40), sidecar.log()[
                -2000:
            ]
            assert healthcheck() == 0
        finally:
            stop(sim)
    assert healthcheck() == 1  # nothing listens any more


DOCKER_RUN = (
    "docker run --gpus all --ipc host -it --rm --shm-size=16g -p 30000:30000 "
    "-v {models}:/models:ro --mount type=volume,source=hf,target=/root/.cache/huggingface "
    "-e SGLANG_ENABLE_FP8_LM_HEAD=1 -e FROM_HOST --env-file {env_file} -w /workspace "
    "lmsysorg/sglang:spark python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 "
    "--moe-runner-backend humming --speculative-algorithm NEXTN --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
    "--speculative-draft-model-path /models/Ling-3.0-flash-fp4"
)


def test_docker_cmd_reads_environment_mounts_and_command(tmp_path: Path) -> None:
    env_file = tmp_path / "site.env"
    env_file.write_text(
        '# site\nHUMMING_CACHE_DIR=/root/.cache/humming\nQUOTED="kept as written"\nFROM_HOST\n'
    )
    spec = parse_docker_cmd(
        DOCKER_RUN.format(models="~/models", env_file=env_file), {"HOME": str(tmp_path), "FROM_HOST": "h"}
    )
    assert spec.image == "lmsysorg/sglang:spark" and spec.argv[:3] == [
        "python3",
        "-m",
        "sglang.launch_server",
    ]
    assert spec.env == {
        "SGLANG_ENABLE_FP8_LM_HEAD": "1",
        "FROM_HOST": "h",
        "HUMMING_CACHE_DIR": "/root/.cache/humming",
        "QUOTED": '"kept as written"',
    }
    assert Mount(f"{tmp_path}/models", "/models", read_only=True) in spec.mounts
    assert Mount(None, "/root/.cache/huggingface", volume="hf") in spec.mounts
    assert spec.workdir == "/workspace"


def test_preflight_docker_cmd_maps_the_model_and_does_not_read_the_hosts_python(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "models" / "Ling-3.0-flash-fp4", small=False)
    env_file = tmp_path / "site.env"
    env_file.write_text("HUMMING_CACHE_DIR=/root/.cache/humming\n")
    cmd = DOCKER_RUN.format(models=tmp_path / "models", env_file=env_file)
    rc, report, err = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
    statuses = _statuses(report)
    assert statuses["checkpoint.layout"] == "pass" and statuses["moe.backend"] == "pass", err
    (shared,) = [c for c in report["checks"] if c["id"] == "spec.lm_head_shared"]
    assert shared["status"] == "error" and "lmsysorg/sglang:spark" in shared["message"]
    assert "spark-validate launch" in shared["remedy"]
    assert rc == 69 and report["target"] == "--docker-cmd" if "target" in report else rc == 69
    # a wrong recipe still fails: a critical fail outranks what could not be seen
    rc, report, _ = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd.replace("humming", "auto"))
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail"


def test_a_refusal_only_the_shipped_table_gives_is_unresolved_inside_an_image(tmp_path: Path) -> None:
    """World10 F2: the SGLang inside an image of unknown version parses the line, not the shipped 0.5.23
    table. drowzeys' ``--cuda-graph-bs 1 2 4 8`` (a flag of older builds, ambiguous in 0.5.23) was exit 65;
    it is unresolved (69) naming the image and the word. A word the table lacks is reported, as for a host
    build of another version; ``launch.warnings`` is unproven, never "SGLang accepts". On the host, whose
    install is read, the refusal stays a malformed input (65)."""
    head = "docker run --gpus all -v {m}:/models lmsysorg/sglang:v0.5.15-cu130 "
    server = "python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 "
    cmd = head.format(m=tmp_path) + server
    rc, report, err = _preflight({}, "--docker-cmd", cmd + "--cuda-graph-bs 1 2 4 8")
    assert rc == 69 and "Traceback" not in err, err
    (program,) = [c for c in report["checks"] if c["id"] == "moe.backend"]
    assert program["status"] == "error" and "ambiguous option: --cuda-graph-bs" in program["message"]
    assert "lmsysorg/sglang:v0.5.15-cu130" in program["message"]
    for extra in ("", "--enable-newer-flag"):
        rc, report, err = _preflight({}, "--docker-cmd", cmd + extra)
        (warnings,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
        assert warnings["status"] == "error" and "v0.5.15-cu130" in warnings["message"], (err, warnings)
        assert _statuses(report)["moe.backend"] == "fail" and rc == 78  # the rest is judged
    assert "--enable-newer-flag" in json.dumps(warnings["evidence"])
    rc, _, err = _preflight({}, "--launch-cmd", server + "--cuda-graph-bs 1 2 4 8")
    assert rc == 65 and "ambiguous option" in err, err
    rc, _, err = _preflight({}, "--docker-cmd", cmd + "-h")  # every version's argparse exits on -h
    assert rc == 65 and "-h/--help" in err, err


def test_a_container_running_bash_c_is_judged_as_the_string_it_runs(tmp_path: Path) -> None:
    """``IMAGE bash -c "python3 -m sglang.launch_server ..."`` (WebCoach's shape, world9 finding 4), and the
    same as a Compose ``command``/``entrypoint`` under ``sh -c``: the string is read as the shell runs it
    (the words after it are ``$0``, ``$1``...), so the server's flags are judged exactly as when the
    container runs the server directly."""
    write_checkpoint(tmp_path / "models" / "Ling-3.0-flash-fp4", small=False)
    env_file = tmp_path / "site.env"
    env_file.write_text("HUMMING_CACHE_DIR=/root/.cache/humming\n")
    cmd = DOCKER_RUN.format(models=tmp_path / "models", env_file=env_file)
    image = "lmsysorg/sglang:spark "
    head, server = cmd.split(image)
    direct = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
    wrapped = f"{head}{image}bash -ec 'exec \"$@\" --moe-runner-backend $0' humming {server}"
    rc, report, err = _preflight(
        {"HOME": str(tmp_path)}, "--docker-cmd", wrapped.replace(" --moe-runner-backend humming", "", 1)
    )
    assert (rc, _statuses(report)) == (direct[0], _statuses(direct[1])), err
    compose = tmp_path / "compose.yaml"
    for form in (
        f"command: ['sh', '-c', {server!r}]",
        f"entrypoint: ['/bin/bash', '-c']\n    command: [{server!r}]",
    ):
        compose.write_text(
            "services:\n  llm:\n    image: lmsysorg/sglang:spark\n"
            f"    environment: [SGLANG_ENABLE_FP8_LM_HEAD=1]\n    {form}\n"
            f"    volumes: ['{tmp_path}/models:/models:ro']\n"
        )
        rc, report, err = _preflight({"HOME": str(tmp_path)}, "--compose", str(compose), "--service", "llm")
        statuses = _statuses(report)
        assert statuses["moe.backend"] == statuses["checkpoint.layout"] == "pass", (err, statuses)
        assert statuses["launch.program"] == "error" and rc == 69  # the install is inside the image
    rc, _, err = _preflight({}, "--docker-cmd", "docker run img bash -lc 'python3 -m sglang.launch_server'")
    assert rc == 69 and "Traceback" not in err
    compose.write_text(  # a string is bounded as a script is
        "services:\n  llm:\n    image: i\n    command: [bash, -c, '" + "#" * ((1 << 20) + 1) + "']\n"
    )
    rc, _, err = _preflight({}, "--compose", str(compose), "--service", "llm")
    assert rc == 65 and "bytes: not a launcher script" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("options", ["-", "+", "-u -", "+ --", "-e + -"])
def test_bash_c_reads_the_string_after_a_lone_dash_or_plus_as_bash_and_dash_do(options: str) -> None:
    """Red team 19: bash and dash take a lone ``-`` as the end of their options (as ``--``) and a lone ``+``
    as no option at all, so ``bash -c - STRING`` runs STRING; the reader took ``-`` for the string, and a
    valid launch was exit 65 'no path through the script starts the SGLang server'."""
    from validator.errors import InputError
    from validator.sources.launch.script import through_shell

    string = "'exec python3 -m sglang.launch_server --model-path /m --tp-size $1' zero 2"
    spec = through_shell(parse_docker_cmd(f"docker run img bash -c {options} {string}", {}))
    assert spec.argv == ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "2"]
    with pytest.raises(InputError, match="no path through the script"):  # after "--", "-" is the string
        through_shell(parse_docker_cmd(f"docker run img sh -c -- - {string}", {}))


def test_docker_exec_runs_the_command_in_a_container_started_earlier(tmp_path: Path) -> None:
    """``docker exec [OPTIONS] CONTAINER CMD`` (BTankut's head node, world9 finding 5): exec's own options
    skipped (the Docker CLI reference: -d, -i, -t, --privileged, -e, --env-file, -u, -w, --detach-keys),
    its ``-e`` over an environment that is otherwise the container's, not visible here, as its image and
    its mounts are not."""
    env_file = tmp_path / "exec.env"
    env_file.write_text("HUMMING_CACHE_DIR=/c\n")
    cmd = (
        f"docker exec -it --privileged -u 0 -w /ws -e SGLANG_ENABLE_FP8_LM_HEAD=1 --env-file {env_file} "
        "-d node1 python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 "
        "--moe-runner-backend flashinfer_mxfp4"
    )
    spec = parse_docker_cmd(cmd, {})
    assert spec.existing == "node1" and spec.image is None and spec.workdir == "/ws"
    assert spec.argv[:3] == ["python3", "-m", "sglang.launch_server"] and spec.mounts == []
    assert spec.env == {"SGLANG_ENABLE_FP8_LM_HEAD": "1", "HUMMING_CACHE_DIR": "/c"}
    rc, report, err = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
    checks = {c["id"]: c for c in report["checks"]}
    assert rc == 78 and checks["moe.backend"]["status"] == "fail", err
    assert (
        checks["launch.program"]["status"] == "error"
        and "container node1" in checks["launch.program"]["message"]
    )
    assert checks["lm_head.fp8"]["status"] == "error"  # the container's own environment is not visible
    assert "whose mounts are not visible" in checks["checkpoint.layout"]["message"]
    for bad, needle in (
        ("docker exec node1", "needs a container and the command"),
        ("docker exec --latest python3 -m sglang.launch_server", "docker exec option '--latest'"),
    ):
        rc, _, err = _preflight({}, "--docker-cmd", bad)
        assert rc == 65 and needle in err and "Traceback" not in err, err


def test_docker_exec_e_is_known_over_the_containers_unknown_environment(tmp_path: Path) -> None:
    """``docker exec -e NAME=VALUE`` sets NAME over the container's environment, whatever that holds: the
    variable is known (both heads requested fails ``lm_head.exclusive``), every other stays unresolved."""
    cmd = (
        "docker exec -e SGLANG_ENABLE_FP8_LM_HEAD=1 node1 env HUMMING_CACHE_DIR=/c python3 -m "
        "sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 --enable-fp32-lm-head"
    )
    rc, report, err = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
    checks = {c["id"]: c for c in report["checks"]}
    assert rc == 78 and checks["lm_head.exclusive"]["status"] == "fail", (err, checks["lm_head.exclusive"])
    assert checks["model.context_override"]["status"] == "error"  # not set by the exec: the container's
    assert "started earlier" in checks["model.context_override"]["message"]


def test_a_bash_c_docker_exec_runs_is_unresolved_where_the_containers_bash_env_is_unknown(
    tmp_path: Path,
) -> None:
    """Red team 23: ``docker exec -e SGLANG_ENABLE_FP8_LM_HEAD=0 node1 bash -c '... --enable-fp32-lm-head'``
    passed lm_head.exclusive (ff5aade: the exec's -e known over the container's environment), but bash -c
    first sources the file the container's BASH_ENV names (bash(1), INVOCATION; images set it, ENV
    BASH_ENV=~/.bashrc), which can set the variable back or define a function for the server's name.
    Unresolved unless the exec empties BASH_ENV; sh -c reads no startup file."""
    run = "python3 -m sglang.launch_server --model-path /m --enable-fp32-lm-head"
    for given, status in (("", "error"), ("-e BASH_ENV= ", "pass")):
        cmd = f"docker exec -e SGLANG_ENABLE_FP8_LM_HEAD=0 {given}node1 bash -c 'exec {run}'"
        rc, report, err = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
        exclusive = next(c for c in report["checks"] if c["id"] == "lm_head.exclusive")
        assert exclusive["status"] == status, (cmd, err, exclusive)
        if status == "error":
            assert "BASH_ENV" in exclusive["message"] and rc == 69, exclusive
    cmd = f"docker exec -e SGLANG_ENABLE_FP8_LM_HEAD=0 node1 sh -c 'exec {run}'"
    rc, report, err = _preflight({"HOME": str(tmp_path)}, "--docker-cmd", cmd)
    assert _statuses(report)["lm_head.exclusive"] == "pass", err


@pytest.mark.parametrize(
    ("cmd", "code", "needle"),
    [
        ("docker ps", 65, "does not run a container"),
        ("docker run --frobnicate x img python3 -m sglang.launch_server", 65, "not understood"),
        ("docker run --rm lmsysorg/sglang:spark", 69, "image's default command"),
        ("docker run -e", 65, "needs a value"),
        ("kubectl run x", 65, "expected 'docker run"),
    ],
)
def test_bad_docker_cmds_exit_with_one_line(cmd: str, code: int, needle: str) -> None:
    rc, report, err = _preflight({}, "--docker-cmd", cmd)
    assert rc == code, err
    text = err if code == 65 else json.dumps(report)
    assert needle in text and "Traceback" not in err


def test_compose_service_selection(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(FIXTURE.replace("${BACKEND:?set BACKEND}", "humming"))
    (tmp_path / "site.env").write_text("A=1\n")
    assert load_compose(path, None, {}).image == "lmsysorg/sglang:spark"  # the one that runs SGLang
    rc, _, err = _preflight({}, "--compose", str(path), "--service", "nope")
    assert rc == 2 and "no service 'nope'" in err and "llm, other" in err
    rc, _, err = _preflight({}, "--launch-cmd", "x", "--service", "llm")
    assert rc == 2
    path.write_text("services: [1, 2]\n")
    rc, _, err = _preflight({}, "--compose", str(path))
    assert rc == 65 and "not a Compose file" in err
    os.mkfifo(tmp_path / "fifo.yaml")
    rc, _, err = _preflight({}, "--compose", str(tmp_path / "fifo.yaml"))
    assert rc == 65 and "not a regular file" in err


def test_a_docker_run_given_as_a_launch_command_is_read_as_docker_cmd_reads_it() -> None:
    """``--launch-cmd "docker run ..."`` (and a unit's ExecStart=, world10 F3) reads the container as
    ``--docker-cmd`` does; it said to use ``--docker-cmd``."""
    cmd = "docker run --rm img python3 -m sglang.launch_server --model-path /m --moe-runner-backend triton"
    for option in ("--launch-cmd", "--docker-cmd"):
        rc, report, err = _preflight({}, option, cmd)
        checks = {c["id"]: c["status"] for c in report["checks"]}
        assert rc == 78 and checks["moe.backend"] == "fail" and checks["launch.program"] == "error", err
    # the shipped table's refusal is not the image's SGLang's, whose version is not read (world10 F2)
    rc, report, err = _preflight({}, "--launch-cmd", "docker run --rm img python3 -m sglang.launch_server")
    assert rc == 69 and "Traceback" not in err, err
    assert "the following arguments are required" in json.dumps(report) and "image img" in json.dumps(report)


def test_hostile_compose_files_end_in_one_line_errors(tmp_path: Path) -> None:
    """Aliases that expand to a huge tree, nesting past the parser's stack, and what the reader does not
    implement (extends, include) are refused with exit 65, never a traceback or a guess."""
    laughs = 'x-a: &a ["${X}", "${X}", "${X}", "${X}", "${X}", "${X}", "${X}", "${X}", "${X}", "${X}"]\n'
    for i in range(1, 8):
        this, prev = chr(97 + i), chr(96 + i)
        laughs += f"x-{this}: &{this} [{', '.join([f'*{prev}'] * 10)}]\n"
    laughs += "services:\n  s:\n    image: x\n    command: [python3, -m, sglang.launch_server]\n"
    laughs += "    environment:\n      A: *h\n"
    cases = {
        "laughs.yaml": (laughs, "values (YAML aliases?)"),
        "deep.yaml": ("services: " + "[" * 20000 + "]" * 20000 + "\n", "nested too deeply"),
        "extends.yaml": (
            "services:\n  s:\n    extends: {file: b.yaml, service: b}\n"
            "    command: [python3, -m, sglang.launch_server]\n",
            "docker compose config > resolved.yaml",
        ),
        "list.yaml": ("- 1\n- 2\n", "not a Compose file"),
        "bad.yaml": ("services:\n  s: [\n", "not valid YAML"),
    }
    for name, (text, needle) in cases.items():
        (tmp_path / name).write_text(text)
        rc, _, err = _preflight({}, "--compose", str(tmp_path / name))
        assert rc == 65 and needle in err and "Traceback" not in err, (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)


@pytest.mark.parametrize("value", ["2001-13-45", "1" * 5000])
def test_a_scalar_yaml_cannot_construct_is_one_line_naming_the_file_never_an_internal_error(
    tmp_path: Path, value: str
) -> None:
    """Red team 19: PyYAML's safe loader raises ``ValueError`` (not a ``YAMLError``) for a timestamp that is
    no date (``datetime``: month must be in 1..12) and a decimal integer over 4,300 digits: one such line in
    a Compose file, a Kubernetes manifest, a ``--config`` file another user's launcher names, or a rule pack
    was ``internal error: ValueError``, exit 1. Each reader now says the file and the line."""
    from validator.errors import InputError
    from validator.rulepack import load_pack
    from validator.sources.launch.kube_manifest import select_container
    from validator.sources.sglang.config import merge_config

    compose = tmp_path / "compose.yaml"
    compose.write_text(f"services:\n  s:\n    image: i\n    labels: {{a: {value}}}\n")
    with pytest.raises(InputError, match=r"compose.yaml:4: not valid YAML: invalid (timestamp|int)"):
        load_compose(compose, "s", {})
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(f"kind: Pod\nspec:\n  containers:\n  - name: a\n    x: {value}\n")
    with pytest.raises(InputError, match=r"pod.yaml:5: not valid YAML"):
        select_container(manifest, None)
    config = tmp_path / "c.yaml"
    config.write_text(f"model-path: /m\nx: {value}\n")
    with pytest.raises(InputError, match=r"c.yaml:2: cannot read --config file: invalid (timestamp|int)"):
        merge_config(["--config", str(config)], origin="test")
    pack = tmp_path / "pack.yaml"
    pack.write_text(f"name: p\nx: {value}\n")
    with pytest.raises(InputError, match=r"pack.yaml"):
        load_pack(str(pack))


def test_a_containers_config_is_read_through_its_mounts_never_from_the_hosts_path(tmp_path: Path) -> None:
    """Red team 19: SGLang opens ``--config`` inside the container, but the reader opened the same path on
    the host (a relative one from the container's working directory, as a host directory): a host file
    that is not the container's decided the verdict, and for ``docker exec`` (whose mounts are not
    visible at all) too. Now it is read through a bind mount, else the launch is unresolved."""
    from validator.errors import UnresolvedLaunch
    from validator.sources.launch.docker_run import launch_from_container

    host = tmp_path / "cfg"
    host.mkdir()
    (host / "c.yaml").write_text("model-path: /from-the-mount\n")
    decoy = tmp_path / "decoy.yaml"
    decoy.write_text("model-path: /from-the-host\n")
    server = "python3 -m sglang.launch_server --config"
    for cmd, model in (
        (f"docker run -v {host}:/etc/sgl img {server} /etc/sgl/c.yaml", "/from-the-mount"),
        (f"docker run -w /etc/sgl -v {host}:/etc/sgl img {server} c.yaml", "/from-the-mount"),
        (f"docker run img {server} {decoy}", None),
        (f"docker exec ctr {server} {decoy}", None),
        (f"docker run img {server} c.yaml", None),
    ):
        launcher = launch_from_container(parse_docker_cmd(cmd, {}))
        if model is None:
            with pytest.raises(UnresolvedLaunch, match="--config"):
                launcher.parsed()
        else:
            assert launcher.parsed().args["model_path"] == model, cmd


def test_a_containers_program_is_never_looked_up_on_the_hosts_disk(tmp_path: Path) -> None:
    """Red team 19: ``docker run -e PATH=DIR IMAGE bash -c 'python3 ...'`` read the string as bash runs it
    and looked ``python3`` up on DIR of this host: the container's program became the host's file (the
    report named /usr/bin/python3 or python3 by what this host has, not what the image has)."""
    from validator.sources.launch.script import through_shell

    (tmp_path / "python3").write_text("#!/bin/sh\n")
    (tmp_path / "python3").chmod(0o755)
    for path in (str(tmp_path), str(tmp_path / "absent")):
        cmd = f"docker run -e PATH={path} img bash -c 'nice python3 -m sglang.launch_server --model-path /m'"
        spec = through_shell(parse_docker_cmd(cmd, {}))
        assert spec.argv[:3] == ["python3", "-m", "sglang.launch_server"], spec.argv


def test_a_scripts_relative_docker_env_file_is_read_from_the_scripts_directory(tmp_path: Path) -> None:
    """Red team 19: ``docker run --env-file ./x.env`` in a script was read from preflight's own working
    directory, where docker reads it from the shell's (here the script's, after its ``cd``): the
    operator's own ``x.env`` there, or none (exit 65). Read where the script's shell stands, as ``-v``
    sources already were."""
    from validator.sources.launch.script import launch_from_script

    sub = tmp_path / "deploy"
    sub.mkdir()
    (sub / "x.env").write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\n")
    (tmp_path / "x.env").write_text("SGLANG_ENABLE_FP8_LM_HEAD=0\n")  # preflight's own directory's
    script = sub / "start.sh"
    script.write_text(
        '#!/bin/bash\ncd "$(dirname "$0")"\nexec docker run --env-file ./x.env lmsysorg/sglang:latest '
        "python3 -m sglang.launch_server --model-path org/m\n"
    )
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        launcher = launch_from_script(script, env={"PATH": "/usr/bin:/bin"})
    finally:
        os.chdir(here)
    assert launcher.facts.env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"
    assert launcher.facts.env_origin["SGLANG_ENABLE_FP8_LM_HEAD"] == "--env-file ./x.env"


def test_a_containers_dspark_draft_is_judged_through_the_mount(tmp_path: Path) -> None:
    """World10 F5, end to end: the ReplaySSM ring trap (``--linear-replayssm-cache-len 16`` for a verify
    width of 9) fails ``spec.dspark`` in a container as it does on the host, the draft read through ``-v``."""
    from tests.test_recipe_sources import write_draft

    write_checkpoint(tmp_path / "models" / "Ling-3.0-flash-fp4", small=False)
    write_draft(tmp_path / "models" / "Ling-3.0-flash-dspark")
    cmd = (
        f"docker run --gpus all -e SGLANG_ENABLE_FP8_LM_HEAD=1 -v {tmp_path}/models:/models:ro "
        "lmsysorg/sglang:spark python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 "
        "--moe-runner-backend humming --mem-fraction-static 0.68 --speculative-algorithm DSPARK "
        "--speculative-draft-model-path /models/Ling-3.0-flash-dspark --enable-linear-replayssm-spec "
        "--linear-replayssm-cache-len 16"
    )
    rc, report, err = _preflight(
        {"HOME": str(tmp_path)}, "--rules", "ling-3.0-flash-dgx-spark-dspark", "--docker-cmd", cmd
    )
    checks = {c["id"]: c for c in report["checks"]}
    assert rc == 78 and checks["spec.dspark"]["status"] == "fail", (err, checks["spec.dspark"])
    assert "ring too small: 16 < 2 * 9" in checks["spec.dspark"]["message"]
    assert checks["spec.config"]["status"] == "pass", checks["spec.config"]


def test_docker_run_e_overrides_an_env_file_wherever_it_stands(tmp_path: Path) -> None:
    """Red team 21: docker reads every ``--env-file`` first and appends the ``-e`` variables after them
    "to allow override" (docker/cli opts/parse.go, readKVStrings), so ``-e A=1 --env-file f`` (f: A=0)
    gives the server A=1. The reader took them in the order written: the FP8 head read as off beside
    ``--enable-fp32-lm-head`` (the trap of both heads) and lm_head.exclusive passed, exit 0."""
    env_file = tmp_path / "off.env"
    env_file.write_text("SGLANG_ENABLE_FP8_LM_HEAD=0\nNCCL_DEBUG=INFO\n")
    for options in (
        f"-e SGLANG_ENABLE_FP8_LM_HEAD=1 --env-file {env_file}",
        f"--env-file {env_file} -e SGLANG_ENABLE_FP8_LM_HEAD=1",
    ):
        spec = parse_docker_cmd(
            f"docker run {options} img python3 -m sglang.launch_server --model-path /m", {}
        )
        assert spec.env == {"SGLANG_ENABLE_FP8_LM_HEAD": "1", "NCCL_DEBUG": "INFO"}, options
        assert spec.env_origin["SGLANG_ENABLE_FP8_LM_HEAD"] == "--docker-cmd -e", options
    exec_cmd = f"docker exec -e SGLANG_ENABLE_FP8_LM_HEAD=1 --env-file {env_file} ctr python3 -m x"
    spec = parse_docker_cmd(exec_cmd, {})
    assert spec.env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1"


def test_a_scripts_relative_env_file_and_mount_where_its_directory_is_unknown_are_not_read_from_here(
    tmp_path: Path,
) -> None:
    """Red team 21: where the script's ``cd`` goes is known only at run time, its ``docker run
    --env-file ./x.env`` and ``-v ./models:/models`` were read from preflight's own directory (the
    operator's x.env without the FP8 head, while the server's x.env has it: with
    ``--enable-fp32-lm-head`` the trap of both heads, and `--check lm_head.exclusive` passed, exit 0).
    Both are unknown: every variable (``*``) and what the mount holds."""
    from validator.sources.launch.script import launch_from_script

    (tmp_path / "x.env").write_text("SGLANG_ENABLE_FP8_LM_HEAD=0\n")  # preflight's own directory's
    (tmp_path / "models").mkdir()
    script = tmp_path / "start.sh"
    script.write_text(
        '#!/bin/bash\ncd "$(cat ~/where)"\nexec docker run --env-file ./x.env -v ./models:/models '
        "lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path /models/m "
        "--enable-fp32-lm-head\n"
    )
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        launcher = launch_from_script(script, env={"PATH": "/usr/bin:/bin"})
    finally:
        os.chdir(here)
    assert "SGLANG_ENABLE_FP8_LM_HEAD" not in launcher.facts.env
    assert "--env-file ./x.env" in launcher.facts.unresolved["*"]
    assert "known only at run time" in launcher.facts.unresolved["*"]
    assert launcher.container is not None
    found, why = host_path("/models/m", launcher.container.mounts)
    assert found is None and "known only at run time" in why, why


def test_an_env_file_or_mount_under_proc_self_is_the_reading_processs_never_this_ones(tmp_path: Path) -> None:
    """Red team 21: ``--env-file /proc/self/cwd/x.env`` (or ``-v /proc/self/cwd/models:/models``) names
    the files of whichever process opens it: docker's, whose working directory is the script's. The
    reader opened its own: preflight's directory's x.env was read as the server's environment, past the
    relative-name rule above, and a refusal named the directory root ran preflight from."""
    (tmp_path / "x.env").write_text("SGLANG_ENABLE_FP8_LM_HEAD=0\n")
    (tmp_path / "models").mkdir()
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for name in ("/proc/self/cwd/x.env", "/proc/thread-self/cwd/x.env", "/proc/self/../self/cwd/x.env"):
            spec = parse_docker_cmd(
                f"docker run --env-file {name} -v /proc/self/cwd/models:/models img x", {}
            )
            assert spec.env == {} and "names the files of the process that reads it" in spec.unresolved["*"]
            found, why = host_path("/models/m", spec.mounts)
            assert found is None and "/proc/self/cwd/models names the files" in why, why
    finally:
        os.chdir(here)


def test_an_env_file_line_without_an_equals_sign_is_never_quoted(tmp_path: Path) -> None:
    """Red team 21: SECURITY.md promises that a malformed env-file line with no '=' (a pasted token, a
    password) is reported by its line number only; docker run's --env-file and Compose's env_file quoted
    it whole ("variable 'my secret ...' contains whitespaces", "not KEY=VALUE: 'my secret ...'")."""
    from validator.errors import InputError
    from validator.sources.launch.compose import read_dotenv
    from validator.sources.launch.docker_run import read_docker_env_file

    env = tmp_path / "x.env"
    env.write_text("A=1\nmy secret pass phrase\n")
    for read in (lambda: read_docker_env_file(env, {}), lambda: read_dotenv(env, str(env))):
        with pytest.raises(InputError) as caught:
            read()
        assert "secret" not in str(caught.value) and ":2:" in f"{caught.value}:", str(caught.value)
