"""More real launchers, as published (copies and their sources: ``tests/corpus/scripts/README.md``,
``tests/corpus/compose/README.md``, ``tests/corpus/kube/README.md``), held to what the tool should say.

- SGLang's own Compose file (``docker/compose.yaml``): a string ``entrypoint`` with a plain multi-line
  ``command``, a Llama model by its Hub id: read, judged by no pack under ``--rules auto``, failing the
  default pack on the recipe's flags.
- shantanugoel's DGX Spark launcher (``scripts/serve.sh`` sourcing ``scripts/common.sh``): a detached
  ``docker run``; read past ``read -a`` and a run-time branch, unresolved where bash runs ``$(cat ...)``.
- SGLang's Kubernetes page (``docs/references/deploy_on_k8s.md``): a LeaderWorkerSet, the form SGLang
  documents for multi-node serving: the leader's container read.
- BTankut's DGX Spark README: the head node started with ``docker exec`` into a ``sleep infinity``
  container: read, the container's install not visible.

And three shapes those launchers (and ly01325's notebook, 0xBakeer's tune.sh) use, cut to the construct:
an optional word on a run-time branch, ``setsid nohup ... &``, a unit's ``UnsetEnvironment=``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.support.shell_differential import SHIM
from tests.test_recipe_packs import Server, server  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
SGLANG_COMPOSE = CORPUS / "compose" / "sgl-project-sglang-compose.yaml"
LWS = CORPUS / "kube" / "sgl-project-sglang-deploy_on_k8s-lws.yaml"
SHANTANU = CORPUS / "scripts" / "shantanugoel-qwen38-flash-next-sglang-dgx-spark"
ENV = {"PATH": "/usr/bin:/bin"}
DEFAULT_PACK = "ling-3.0-flash-dgx-spark"

# BTankut/dgx-spark-sglang-moe-configs README.md (MIT), "Quick launch after deployment", the command as
# an operator pastes it (the README's continuation lines joined)
BTANKUT_HEAD = (
    "docker exec sglang_node python3 -m sglang.launch_server --model-path zai-org/GLM-4.7-FP8"
    " --tp 4 --nnodes 4 --node-rank 0 --dist-init-addr 192.168.101.11:50000 --tool-call-parser glm"
    " --speculative-algorithm EAGLE --trust-remote-code"
)


def _private_copy(src: Path, where: Path) -> Path:
    """A copy in a directory only this user can write (the trusted-file rule; the checkout may be under
    /tmp)."""
    where.mkdir(mode=0o700, parents=True)
    dst = where / src.name
    shutil.copyfile(src, dst)
    return dst


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report.get("checks", [])}


def test_sglangs_own_compose_file_is_read_and_judged(tmp_path: Path) -> None:
    compose = _private_copy(SGLANG_COMPOSE, tmp_path / "project")
    env = {**ENV, "HOME": str(tmp_path)}
    rc, report, err = preflight_json_in_process(env, "--compose", str(compose), "--service", "sglang")
    statuses = _statuses(report)
    assert rc == 78, (err, statuses)
    assert {"moe.backend", "lm_head.fp8", "spec.config"} <= {k for k, v in statuses.items() if v == "fail"}
    assert statuses["launch.program"] == "error"  # the SGLang install is inside the image
    rc, report, err = preflight_json_in_process(
        env, "--compose", str(compose), "--service", "sglang", "--rules", "auto"
    )
    (auto,) = [c for c in report["checks"] if c["id"] == "rules.auto"]
    assert rc == 69 and auto["status"] == "error", err
    assert "meta-llama/Meta-Llama-3.1-8B-Instruct" in auto["message"]


def _shantanu_sandbox(tmp: Path) -> tuple[Path, Path, dict[str, str]]:
    """The checkout as ``prepare.sh`` leaves it (patches and in-image paths under build/, the pinned
    snapshot in the Hugging Face cache), ``docker``/``nvidia-smi``/``uname`` answering as on a Spark; the
    ``docker run`` is recorded by the capture shim."""
    co = tmp / "checkout"
    shutil.copytree(SHANTANU, co)
    out, shims = tmp / "out", tmp / "shims"
    out.mkdir()
    shims.mkdir()
    (shims / "docker-run").write_text(SHIM.format(out=out))
    (shims / "docker").write_text(f'#!/bin/sh\n[ "$1" = run ] && exec {shims}/docker-run "$@"\nexit 0\n')
    (shims / "nvidia-smi").write_text("#!/bin/sh\necho 12.1\n")
    (shims / "uname").write_text("#!/bin/sh\necho aarch64\n")
    for p in shims.iterdir():
        p.chmod(0o755)
    build = co / "build"
    build.mkdir()
    for name in ("qwen4_exp.py", "qwen_sparse_attn_backend.py", "spec_utils.py", "sm121_varlen.py"):
        (build / name).write_text("")
    for name in ("path_qwen4_exp.txt", "path_qsa.txt", "path_sm121_varlen.txt", "path_spec_utils.txt"):
        (build / name).write_text(f"/sgl-workspace/{name}.py")
    snapshot = (
        tmp / "hf" / "hub" / "models--RadixArk--Qwen3.8-Flash-Next-NVFP4" / "snapshots"
        / "7b719225242aacd3dbd3f9407468c2ee9a9d2594"
    )  # fmt: skip
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    env = {
        "PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C", "HF_HOME": str(tmp / "hf"),
        "DOCKER_USER": "1000:1000",
    }  # fmt: skip
    return co / "scripts" / "serve.sh", out, env


def test_shantanugoel_serve_sh_is_unresolved_only_where_bash_runs_a_command(tmp_path: Path) -> None:
    """Real bash runs the script to a ``docker run`` of SGLang with NEXTN; the reader follows it past
    ``read -r -a EXTRA <<< "${EXTRA_ARGS:-}"`` (finding 7) and the ``--group-add`` words ``getent`` decides
    on some paths only (finding 1), and stops where bash runs a command whose output no static reading
    has: ``$(cat "${BUILD}/path_qwen4_exp.txt")`` in a ``-v`` target (line 96). Unresolved (69), naming
    it, never a concrete answer and never malformed (65)."""
    script, out, env = _shantanu_sandbox(tmp_path)
    proc = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=60)
    assert (out / "argv").is_file(), proc.stderr
    argv = [w.decode() for w in (out / "argv").read_bytes().split(b"\0")[:-1]]
    assert argv[1] == "run" and "sglang" in argv and "--speculative-algorithm" in argv
    rc, report, err = preflight_json_in_process(env, "--script", str(script))
    statuses = _statuses(report)
    assert rc == 69 and statuses["spec.config"] == "error", (err, statuses)
    (spec,) = [c for c in report["checks"] if c["id"] == "spec.config"]
    assert spec["message"] == (
        f"{script}:96: an argument is computed at run time: "
        '$(cat "${BUILD}/path_qwen4_exp.txt") runs at run time'
    ), spec["message"]


def test_sglangs_leaderworkerset_leader_is_read(tmp_path: Path) -> None:
    lws = _private_copy(LWS, tmp_path / "k8s")
    rc, report, err = preflight_json_in_process(
        {**ENV, "HOME": str(tmp_path)}, "--kube-manifest", str(lws), "--kube-container", "sglang-leader"
    )
    assert rc != 65 and "containers: none" not in err, err
    assert _statuses(report)["spec.config"] == "fail"  # no speculation: the default pack's NEXTN is missing


def test_a_head_node_started_with_docker_exec_is_read(tmp_path: Path) -> None:
    rc, report, err = preflight_json_in_process({**ENV, "HOME": str(tmp_path)}, "--docker-cmd", BTANKUT_HEAD)
    assert rc != 65, err
    assert _statuses(report)["spec.config"] == "fail"  # EAGLE without the recipe's NEXTN 3/1/4


def _recipe_args(server: Server) -> str:  # noqa: F811 (the fixture's type)
    m = server.model
    return (
        f"--model-path {m} --moe-runner-backend humming --mem-fraction-static 0.68"
        f" --speculative-algorithm NEXTN --speculative-draft-model-path {m}"
        " --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    )


def test_an_optional_word_on_a_runtime_branch_keeps_the_rest_known(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash\nopts=()\n"
        'if [[ -n "$(getent group video || true)" ]]; then opts+=(--enable-metrics); fi\n'
        f"exec {server.python} -m sglang.launch_server "
        + _recipe_args(server).replace("humming", "flashinfer_mxfp4")
        + ' "${opts[@]}"\n'
    )
    rc, report, err = preflight_json_in_process(server.recipe_env(DEFAULT_PACK), "--script", str(script))
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail", (err, _statuses(report))


def test_a_server_started_under_setsid_nohup_is_read(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"setsid nohup {server.python} -m sglang.launch_server {_recipe_args(server)}"
        " > server.log 2>&1 < /dev/null &\necho $! > server.pid\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, _statuses(report))


def test_unset_environment_removes_the_fp8_head(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    unit = tmp_path / "ling.service"
    unit.write_text(
        "[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nUnsetEnvironment=SGLANG_ENABLE_FP8_LM_HEAD\n"
        f"ExecStart={server.python} -m sglang.launch_server {_recipe_args(server)}\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 78 and _statuses(report)["lm_head.fp8"] == "fail", (err, _statuses(report))


def test_a_unit_or_command_that_starts_the_server_through_bash_c_is_read(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """``ExecStart=/bin/bash -c '...'`` (a venv to activate, a directory to enter first) and
    ``--launch-cmd "bash -c '...'"``: the string is read as a script is, in the unit's working directory;
    the FP8 head it unsets inside the string is what the server gets."""
    activate = tmp_path / "venv-activate"
    activate.write_text(f"export VIRTUAL_ENV={tmp_path}\n")
    line = f"{server.python} -m sglang.launch_server {_recipe_args(server)}"
    unit = tmp_path / "ling.service"
    unit.write_text(
        f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nWorkingDirectory={tmp_path}\n"
        f"ExecStart=/bin/bash -c 'source ./venv-activate && cd / && exec {line}'\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 0 and report["verdict"] == "pass", (err, _statuses(report))
    # the same unit whose string unsets the head: the server runs the BF16 head with NEXTN on
    unit.write_text(
        f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nWorkingDirectory={tmp_path}\n"
        f"ExecStart=/bin/bash -c 'unset SGLANG_ENABLE_FP8_LM_HEAD; exec {line}'\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 78 and _statuses(report)["lm_head.fp8"] == "fail", (err, _statuses(report))
    cmd = f"bash -c 'SGLANG_ENABLE_FP8_LM_HEAD=1 exec {line}'"
    rc, report, err = preflight_json_in_process(server.env, "--launch-cmd", cmd)
    assert rc == 0 and report["verdict"] == "pass", (err, _statuses(report))
    # --launch-cmd names no directory: a path relative to it is not read from preflight's own
    rc, report, err = preflight_json_in_process(
        server.env, "--launch-cmd", f"bash -c '. ./venv-activate; exec {line}'"
    )
    assert rc == 69, (err, _statuses(report))


def test_a_flag_in_the_default_of_an_unquoted_expansion_is_a_word_of_its_own(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """world10 F1 (a wrong PASS): bash splits the default of an unquoted ``${NAME:-...}``, so
    ``--served-model-name ${NAME:-ling --enable-fp32-lm-head}`` asks for the FP32 head beside the FP8 one
    (drowzeys' ``--cuda-graph-bs ${GRAPH_BS:-1 2 4}`` is the same shape)."""
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec {server.python} -m sglang.launch_server {_recipe_args(server)}"
        " --served-model-name ${NAME:-ling --enable-fp32-lm-head}\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--script", str(script))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, _statuses(report))


def test_a_unit_whose_exec_start_is_a_launcher_script_or_a_docker_run_is_read(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """world10 F3: ``ExecStart=/opt/start.sh 0.0.0.0 8080`` (ivan's router README) and a foreground
    ``ExecStart=/usr/bin/docker run ...`` (quantensprungai's ``sglang.service``) were refused (65): the
    script is read with the unit's environment, arguments and working directory (the FP8 head from
    ``Environment=``); the container as --docker-cmd reads it, its ``-e NAME`` from the unit's."""
    script = tmp_path / "start.sh"
    script.write_text(
        '#!/bin/bash\nHOST="${1:-127.0.0.1}"\nPORT="${2:-30000}"\nEXTRA=\n'
        "[ -e ./fp32 ] && EXTRA=--enable-fp32-lm-head\n"
        f'exec {server.python} -m sglang.launch_server {_recipe_args(server)} --host "$HOST" --port "$PORT"'
        " $EXTRA\n"
    )
    script.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    unit = tmp_path / "ling.service"
    unit.write_text(
        f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nWorkingDirectory={work}\n"
        f"ExecStart={script} 0.0.0.0 8080\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    statuses = _statuses(report)
    assert rc == 0 and statuses["lm_head.fp8"] == "pass", (err, statuses)
    # ./fp32 is looked for where the unit starts the script (WorkingDirectory=), not beside the script
    (tmp_path / "fp32").write_text("")
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 0, (err, _statuses(report))
    (work / "fp32").write_text("")
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, _statuses(report))
    unit.write_text(
        "[Service]\nEnvironment=FP8=1\n"
        "ExecStart=/usr/bin/docker run --rm -e SGLANG_ENABLE_FP8_LM_HEAD=${FP8} -v /srv/m:/model "
        "lmsysorg/sglang:spark python3 -m sglang.launch_server --model-path /model "
        "--moe-runner-backend flashinfer_mxfp4\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    statuses = _statuses(report)
    assert rc == 78 and statuses["moe.backend"] == "fail", (err, statuses)
    assert "lmsysorg/sglang:spark" in json.dumps(report), err


def test_a_docker_e_of_a_runtime_value_leaves_only_that_variable_unknown(tmp_path: Path) -> None:
    """World10 F4: mark-ramsey-ri's ``start_cluster.sh`` shape, ``-e "NCCL_IB_HCA=${HCA}"`` with HCA from
    ``$(ls ...)``. Bash gives docker one word (quoted) that sets one variable of the container (the Docker
    CLI reference, ``--env``): every other launch value stays known (FAIL on the backend, exit 78), where
    every launch check was ``error`` (69). A check that reads the variable is ``error`` naming it; a later
    ``-e`` of the same name replaces it, as docker does."""
    out, shims = tmp_path / "out", tmp_path / "shims"
    out.mkdir()
    shims.mkdir()
    (shims / "docker").write_text(SHIM.format(out=out))
    (shims / "docker").chmod(0o755)
    script = tmp_path / "start.sh"
    run = (
        "#!/bin/bash\nHCA=$(ls -1 /sys/class/infiniband/ 2>/dev/null | tr '\\n' , | sed 's/,$//')\n"
        'docker run -d -e "NCCL_IB_HCA=${HCA}" --env=@FP8@ -v /srv/models:/models lmsysorg/sglang:spark '
        "python3 -m sglang.launch_server --model-path /models/Ling-3.0-flash-fp4 "
        "--moe-runner-backend flashinfer_mxfp4 --enable-fp32-lm-head\n"
    )
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path)}
    script.write_text(run.replace("@FP8@", '"SGLANG_ENABLE_FP8_LM_HEAD=$HCA"'))
    subprocess.run(["bash", str(script)], env=env, capture_output=True, timeout=60, check=True)
    argv = (out / "argv").read_bytes().split(b"\0")[:-1]
    assert argv[4].startswith(b"NCCL_IB_HCA=") and argv[5].startswith(b"--env=SGLANG_ENABLE_FP8_LM_HEAD=")
    assert argv[6:9] == [b"-v", b"/srv/models:/models", b"lmsysorg/sglang:spark"]  # one word each
    rc, report, err = preflight_json_in_process(env, "--script", str(script))
    checks = {c["id"]: c for c in report["checks"]}
    assert rc == 78 and checks["moe.backend"]["status"] == "fail", (err, checks["moe.backend"])
    for check in ("lm_head.fp8", "lm_head.exclusive"):  # they read the FP8 switch, known only at run time
        assert checks[check]["status"] == "error", checks[check]
        assert "docker run -e SGLANG_ENABLE_FP8_LM_HEAD=...: " in checks[check]["message"], checks[check]
        assert "runs at run time" in checks[check]["message"]
    assert checks["model.context_override"]["status"] == "pass"  # no variable it reads is unknown
    later = '"SGLANG_ENABLE_FP8_LM_HEAD=$HCA" --env SGLANG_ENABLE_FP8_LM_HEAD=1'
    script.write_text(run.replace("@FP8@", later))
    rc, report, err = preflight_json_in_process(env, "--script", str(script))
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (err, _statuses(report))
    script.write_text(run.replace("@FP8@", "X=1").replace("-v /srv", '-v "$HCA"'))  # a mount: still all
    rc, report, err = preflight_json_in_process(env, "--script", str(script))
    assert rc == 69 and _statuses(report)["moe.backend"] == "error", (err, _statuses(report))
    # unquoted, bash splits the value into as many words as it holds: the run's shape is not known
    script.write_text(run.replace('"NCCL_IB_HCA=${HCA}"', "NCCL_IB_HCA=${HCA}").replace("@FP8@", "X=1"))
    rc, report, err = preflight_json_in_process(env, "--script", str(script))
    assert rc == 69 and _statuses(report)["moe.backend"] == "error", (err, _statuses(report))


def test_a_unit_whose_environment_puts_bash_in_posix_mode_is_not_read_as_bash_outside_it(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """``Environment=POSIXLY_CORRECT=1`` starts the ``bash -c`` string in POSIX mode, where an assignment
    before ``:`` (a special builtin) stays: the FP32 head is then on beside the FP8 one. Red team 22: read as
    bash outside POSIX mode (the assignment gone), the trap passed (exit 0); now unresolved."""
    line = f"{server.python} -m sglang.launch_server {_recipe_args(server)}"
    string = f"F=; F=--enable-fp32-lm-head :; exec {line} $$F"
    unit = tmp_path / "ling.service"
    for env, rc in (("", 0), (" POSIXLY_CORRECT=1", 69)):
        unit.write_text(
            f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1{env}\nExecStart=/bin/bash -c '{string}'\n"
        )
        got, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
        assert got == rc, (env, err, _statuses(report))
    assert _statuses(report)["lm_head.exclusive"] == "error"
    assert any("POSIXLY_CORRECT in the environment" in c["message"] for c in report["checks"])


def test_a_unit_shell_is_read_as_bash_only_where_it_is_bash(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Red team 22 (each passed, exit 0): a ``bash`` by name only (a file others could have put there, which
    runs the string with the FP32 head added), ``@/bin/bash sh -c`` (bash started as sh: POSIX mode, where
    an assignment before ``:`` stays) and ``@/bin/bash -bash -c`` (a login shell: it reads the profile files
    first). Each is now unresolved; ``@`` with the program's own path as argv[0] is still read."""
    line = f"{server.python} -m sglang.launch_server {_recipe_args(server)}"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could have put this "bash" here
    fake = shared / "bash"
    fake.write_text('#!/bin/sh\nshift\neval "$1 --enable-fp32-lm-head"\n')
    fake.chmod(0o755)
    unit = tmp_path / "ling.service"
    for exec_start, rc in (
        (f"{fake} -c 'exec {line}'", 69),
        (f"@/bin/bash sh -c 'F=; F=--enable-fp32-lm-head :; exec {line} $$F'", 69),
        (f"@/bin/bash -bash -c 'exec {line}'", 69),
        (f"@/bin/bash /bin/bash -c 'exec {line}'", 0),
    ):
        unit.write_text(f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nExecStart={exec_start}\n")
        got, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
        assert got == rc, (exec_start[:30], err, _statuses(report))


def test_a_script_is_read_as_bash_only_where_its_interpreter_is_bash(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """A script's ``#!`` program is a shell only by its name, as a ``bash -c`` program is (red teams 22
    and 23; the check is red team 23's, in ``read_script``). A script (``--script``, or a unit's
    ExecStart=) whose ``#!`` names a "bash" others could have put there (here: root's file, in a directory
    anyone can write) is unresolved, never read as bash; ``/bin/bash`` and ``/usr/bin/env bash`` are
    read."""
    line = f"{server.python} -m sglang.launch_server {_recipe_args(server)}"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    fake = shared / "bash"
    fake.write_text('#!/bin/sh\nexec /bin/sh "$@" --enable-fp32-lm-head\n')
    fake.chmod(0o755)
    script = tmp_path / "start.sh"
    unit = tmp_path / "ling.service"
    unit.write_text(f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nExecStart={script}\n")
    for shebang, rc in ((str(fake), 69), ("/bin/bash", 0), ("/usr/bin/env bash", 0)):
        script.write_text(f"#!{shebang}\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\nexec {line}\n")
        script.chmod(0o755)
        for given in (("--script", str(script)), ("--unit", str(unit))):
            got, report, err = preflight_json_in_process(server.env, *given)
            assert got == rc, (shebang, given[0], err, _statuses(report))
            if rc == 69:
                assert "not known to be the bash the reader models" in err + json.dumps(report), (err, report)


def test_a_brace_expansion_in_a_bash_c_string_is_not_read_as_one_word(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Red team 22: ``--served-model-name {x,--enable-fp32-lm-head}`` is two words to bash (the FP32 head
    on beside the FP8 one); the grammar splits the braces apart, and the reader took the whole for the
    model name: exit 0. Now unresolved."""
    line = f"{server.python} -m sglang.launch_server {_recipe_args(server)}"
    unit = tmp_path / "ling.service"
    unit.write_text(
        "[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"ExecStart=/bin/bash -c 'exec {line} --served-model-name {{x,--enable-fp32-lm-head}}'\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", (err, _statuses(report))


@pytest.mark.parametrize(
    "word",
    ["${NAME:-~ --enable-fp32-lm-head}", "${NAME:-`cat<flag`}"],
)
def test_a_flag_the_grammar_leaves_as_text_in_a_default_is_never_passed(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
    word: str,
) -> None:
    """Red team 23: ``${NAME:-~ --enable-fp32-lm-head}`` (a ~user named ' --enable...', none: bash leaves
    the text and splits it) and a backquoted command in a default (tree-sitter leaves it as text) were read
    as one word, the served model name, and passed (exit 0) what asks for both heads."""
    (tmp_path / "flag").write_text("--enable-fp32-lm-head\n")
    script = tmp_path / "start.sh"
    script.write_text(
        f"#!/bin/bash\ncd {tmp_path}\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec {server.python} -m sglang.launch_server {_recipe_args(server)} --served-model-name {word}\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--script", str(script))
    assert rc != 0 and _statuses(report)["lm_head.exclusive"] != "pass", (err, _statuses(report))


def test_a_draft_path_the_grammar_splits_in_two_is_never_read_as_the_model(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Red team 23: ``--speculative-draft-model-path $M`echo -`-enable-metrics`` is one word to bash, the
    draft ``$M--enable-metrics`` (a directory of its writer's choosing, whose head need not be shared);
    tree-sitter-bash gives two arguments, so the reader judged the model itself as the draft plus
    ``--enable-metrics`` and passed (exit 0)."""
    script = tmp_path / "start.sh"
    script.write_text(
        f"#!/bin/bash\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\nexec {server.python} -m sglang.launch_server "
        f"{_recipe_args(server)} --speculative-draft-model-path {server.model}`echo -`-enable-metrics\n"
    )
    rc, report, err = preflight_json_in_process(server.env, "--script", str(script))
    assert rc == 69, (rc, err, _statuses(report))


def test_an_option_past_the_bytes_linux_reads_of_the_shebang_is_not_the_shells(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Red team 23: ``#!/bin/bash<300 blanks>-f`` runs bash without -f (Linux reads 256 bytes of the line),
    so ``--lora-paths *`` expands to the working directory's files, ``--enable-fp32-lm-head`` among them;
    the reader took -f and passed (exit 0) a launch asking for both heads, from a unit's ExecStart= too."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "--enable-fp32-lm-head").write_text("")
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash" + " " * 300 + "-f\nexport SGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"exec {server.python} -m sglang.launch_server {_recipe_args(server)} --lora-paths *\n"
    )
    script.chmod(0o755)
    unit = tmp_path / "ling.service"
    unit.write_text(f"[Service]\nWorkingDirectory={work}\nExecStart={script}\n")
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 69 and _statuses(report)["lm_head.exclusive"] == "error", (rc, err, _statuses(report))


def test_a_user_units_script_starts_in_the_users_home_where_no_working_directory_is_given(
    server: Server,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Red team 23: a user manager starts a service in the user's home unless WorkingDirectory= says
    otherwise (systemd.exec(5)); the reader started a user unit's ExecStart= script in /, so its
    ``[ -e ./fp32 ]`` looked at /fp32, not ~/fp32, and passed (exit 0) what asks for both heads."""
    home = Path(server.env["HOME"])
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash\nEXTRA=\n[ -e ./fp32 ] && EXTRA=--enable-fp32-lm-head\n"
        f"exec {server.python} -m sglang.launch_server {_recipe_args(server)} $EXTRA\n"
    )
    script.chmod(0o755)
    unit = tmp_path / ".config" / "systemd" / "user" / "ling.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(f"[Service]\nEnvironment=SGLANG_ENABLE_FP8_LM_HEAD=1\nExecStart={script}\n")
    (home / "fp32").write_text("")
    try:
        rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    finally:
        (home / "fp32").unlink()
    assert rc == 78 and _statuses(report)["lm_head.exclusive"] == "fail", (rc, err, _statuses(report))
    rc, report, err = preflight_json_in_process(server.env, "--unit", str(unit))
    assert rc == 0, (err, _statuses(report))


def test_a_unit_whose_script_is_not_executable_is_refused_as_exec_refuses_it(tmp_path: Path) -> None:
    """Red team 23: execve refuses a file with no execute bit (EACCES): systemd cannot start the service,
    yet b29c8bc read the script and could pass a launch that never runs. One line, exit 65."""
    script = tmp_path / "start.sh"
    script.write_text("#!/bin/bash\nexec python3 -m sglang.launch_server --model-path /m\n")
    script.chmod(0o644)
    unit = tmp_path / "ling.service"
    unit.write_text(f"[Service]\nExecStart={script}\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    rc, _report, err = preflight_json_in_process(env, "--unit", str(unit))
    assert rc == 65 and "is not executable (mode 0644)" in err, err
    script.chmod(0o755)
    rc, _report, err = preflight_json_in_process(env, "--unit", str(unit))
    assert "not executable" not in err, err
