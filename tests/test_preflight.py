"""`spark-validate preflight` and `launch` end to end, as real processes.

The "installed SGLang" is SGLang 0.5.23's real files from its PyPI wheel (stock), or a copy carrying the
Ling-3.0 patch's two additions; the server's interpreter is a wrapper on disk whose site directory holds
that build (as a server venv would); checkpoints are real safetensors files. The recipe passes; each single
mistake fails with exit 78 and exactly the right check IDs.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import run_cli
from tests.support.contract_ids import PREFLIGHT_CHECK_IDS
from tests.support.in_process import preflight_json_in_process
from tests.support.launch_recipe import Mistake
from tests.support.sglang_builds import fake_interpreter, make_build

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Server:
    python: Path  # the server venv's interpreter (a wrapper whose site holds the SGLang build)
    model: Path
    env: dict[str, str]

    def cmd(self, *extra: str, drop: tuple[str, ...] = ()) -> str:
        args = {
            "--model-path": str(self.model),
            "--moe-runner-backend": "humming",
            "--speculative-algorithm": "NEXTN",
            "--speculative-num-steps": "3",
            "--speculative-eagle-topk": "1",
            "--speculative-num-draft-tokens": "4",
            "--speculative-draft-model-path": str(self.model),
            "--mem-fraction-static": "0.6",
        }
        parts = [str(self.python), "-m", "sglang.launch_server", "--trust-remote-code"]
        for k, v in args.items():
            if k not in drop:
                parts += [k, v]
        return " ".join([*parts, *extra])

    def plant_launch_server(self, marker: Path) -> None:
        """Make ``python -m sglang.launch_server`` in this server's venv a stand-in (the unpacked wheel's
        real one needs torch) that writes ``PID FP8-VARIABLE ARGS...`` to ``marker``: which process ran,
        with which environment and arguments."""
        stand_in = self.python.parent.parent.parent / "site-packages" / "sglang" / "launch_server.py"
        (stand_in.parent / "__init__.py").write_text("")  # the real one imports torch
        stand_in.write_text(
            "import os, sys\n"
            f"open({str(marker)!r}, 'w').write("
            "f\"{os.getpid()} {os.environ.get('SGLANG_ENABLE_FP8_LM_HEAD')} "
            "{' '.join(sys.argv[1:])}\")\n"
        )


def _site(root: Path, **build: Any) -> Path:
    site = root / "site-packages"
    make_build(site, **build)
    dist = site / "humming_kernels-0.1.19.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: humming-kernels\nVersion: 0.1.19\n")
    (site / "humming").mkdir()
    (site / "humming" / "__init__.py").write_text("")
    return site


def _server(tmp_path: Path, name: str, **build: Any) -> Server:
    base = tmp_path / name
    site = _site(base, **build)
    python = fake_interpreter(base / "venv" / "bin", site)
    model = base / "model"
    write_checkpoint(model, small=False)
    cache = base / "humming-cache"
    (cache / "0123abcd").mkdir(parents=True)
    (cache / "0123abcd" / "kernel.cubin").write_bytes(b"\x7fELF")
    (base / "humming-tmp").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base),
        "SGLANG_ENABLE_FP8_LM_HEAD": "1",
        "HUMMING_CACHE_DIR": str(cache),
        "HUMMING_TMP_DIR": str(base / "humming-tmp"),
    }
    return Server(python=python, model=model, env=env)


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("patched"), "patched")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Server:
    return _server(tmp_path_factory.mktemp("stock"), "stock", fp8_lm_head=False, share_hook=False)


def failing(report: dict[str, Any]) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] == "fail"}


def status(report: dict[str, Any], check_id: str) -> str:
    return next(str(c["status"]) for c in report["checks"] if c["id"] == check_id)


def test_recipe_passes_on_patched_build(patched: Server) -> None:
    rc, report, err = preflight_json_in_process(patched.env, "--launch-cmd", patched.cmd())
    assert rc == 0, (err, [c for c in report.get("checks", []) if c["status"] != "pass"])
    assert report["verdict"] == "pass" and report["mode"] == "preflight"
    for check_id in PREFLIGHT_CHECK_IDS:
        assert status(report, check_id) == "pass", check_id
    shared = next(c for c in report["checks"] if c["id"] == "spec.lm_head_shared")
    assert shared["evidence"]["set_lm_head_from_target"] is True


MISTAKES = [
    Mistake(("--moe-runner-backend", "auto"), ("--moe-runner-backend",), {}, {"moe.backend"}),
    Mistake(("--moe-runner-backend", "flashinfer_mxfp4"), ("--moe-runner-backend",), {}, {"moe.backend"}),
    Mistake(("--enable-fp32-lm-head",), (), {}, {"lm_head.exclusive"}),
    Mistake(("--speculative-num-steps", "2"), ("--speculative-num-steps",), {}, {"spec.config"}),
    Mistake(("--speculative-eagle-topk", "2"), ("--speculative-eagle-topk",), {}, {"spec.config"}),
    Mistake((), ("--speculative-draft-model-path",), {}, {"spec.config"}),
    Mistake((), (), {"SGLANG_ENABLE_FP8_LM_HEAD": None}, {"lm_head.fp8"}),
    Mistake((), (), {"SGLANG_ENABLE_FP8_LM_HEAD": "on"}, {"lm_head.fp8"}),
]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_single_mistake_fails_exactly_its_check(patched: Server, mistake: Mistake) -> None:
    cmd = patched.cmd(*mistake.extra, drop=mistake.drop)
    rc, report, err = preflight_json_in_process(mistake.environ(patched.env), "--launch-cmd", cmd)
    assert rc == 78, err
    assert report["verdict"] == "fail"
    assert failing(report) == mistake.fails
    for c in report["checks"]:
        if c["status"] == "fail":
            assert c["remedy"] and c["why"], c["id"]


def test_fp8_variable_on_stock_build_is_silently_ignored(stock: Server) -> None:
    rc, report, _ = preflight_json_in_process(stock.env, "--launch-cmd", stock.cmd())
    assert rc == 78
    # stock 0.5.23: the variable is not declared (lm_head.fp8) and the draft shares only the tensor
    assert failing(report) == {"lm_head.fp8", "spec.lm_head_shared"}
    fp8 = next(c for c in report["checks"] if c["id"] == "lm_head.fp8")
    assert "silently ignored" in fp8["message"]


def test_draft_class_without_share_hook_is_the_trap(tmp_path: Path) -> None:
    server = _server(tmp_path, "noshare", fp8_lm_head=True, share_hook=False)
    rc, report, _ = preflight_json_in_process(server.env, "--launch-cmd", server.cmd())
    assert rc == 78
    assert failing(report) == {"spec.lm_head_shared"}
    shared = next(c for c in report["checks"] if c["id"] == "spec.lm_head_shared")
    assert "1.00" in shared["message"] and "SPARK_VALIDATE_SHARE_LM_HEAD" in shared["remedy"]


def test_plugin_remedy_counts_when_installed_and_enabled(tmp_path: Path) -> None:
    server = _server(
        tmp_path,
        "remedy",
        fp8_lm_head=True,
        share_hook=False,
        plugins={"spark_validate": "spark_validate_plugin.plugin:register"},
    )
    env = {**server.env, "SPARK_VALIDATE_SHARE_LM_HEAD": "1"}
    rc, report, err = preflight_json_in_process(env, "--launch-cmd", server.cmd())
    assert rc == 0, (err, failing(report))
    # the plugin is whitelisted away: the remedy cannot run
    rc, report, _ = preflight_json_in_process(
        {**env, "SGLANG_PLUGINS": "other_plugin"}, "--launch-cmd", server.cmd()
    )
    assert rc == 78 and failing(report) == {"spec.lm_head_shared"}


def test_lm_head_missing_from_modules_to_not_convert(patched: Server, tmp_path: Path) -> None:
    model = tmp_path / "model"
    write_checkpoint(model, small=False, modules_to_not_convert=["model.word_embeddings"])
    rc, report, _ = preflight_json_in_process(
        patched.env, "--launch-cmd", patched.cmd(), "--model-dir", str(model)
    )
    assert rc == 78
    assert failing(report) == {"checkpoint.layout"}


def test_interpreter_without_sglang_is_inconclusive_never_a_pass(patched: Server, tmp_path: Path) -> None:
    """An interpreter that cannot import sglang leaves the install unread: `error` (the command may be
    checked away from the server's host), so the verdict is inconclusive, never a pass."""
    bare = fake_interpreter(tmp_path / "bare" / "bin", None)
    cmd = patched.cmd().replace(str(patched.python), str(bare), 1)
    rc, report, _ = preflight_json_in_process(patched.env, "--launch-cmd", cmd)
    program = next(c for c in report["checks"] if c["id"] == "launch.program")
    assert program["status"] == "error" and "cannot import sglang" in program["message"]
    assert rc == 69 and report["verdict"] == "inconclusive"


def test_unit_file_with_env_file(patched: Server, tmp_path: Path) -> None:
    env_file = tmp_path / "sglang.env"
    env_file.write_text(
        "# recipe settings\nSGLANG_ENABLE_FP8_LM_HEAD=1\n"
        f"HUMMING_CACHE_DIR={patched.env['HUMMING_CACHE_DIR']}\nHUMMING_TMP_DIR={patched.env['HUMMING_TMP_DIR']}\n"
    )
    unit = tmp_path / "sglang.service"
    unit.write_text(
        "[Unit]\nDescription=SGLang\n\n[Service]\n"
        f"EnvironmentFile={env_file}\n"
        f'Environment="MODEL={patched.model}"\n'
        f"ExecStart={patched.python} -m sglang.launch_server --model-path ${{MODEL}} \\\n"
        "  --moe-runner-backend humming --speculative-algorithm NEXTN --speculative-num-steps 3 \\\n"
        "  --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \\\n"
        "  --speculative-draft-model-path $MODEL\n"
        "RestartPreventExitStatus=78\n"
    )
    env = {k: v for k, v in patched.env.items() if not k.startswith(("SGLANG_", "HUMMING_"))}
    rc, report, err = preflight_json_in_process(env, "--unit", str(unit))
    assert rc == 0, (err, failing(report))
    assert report["target"].startswith("unit:")


@pytest.mark.parametrize(
    "content,needle",
    [
        ('[Service]\nExecStart=/usr/bin/python -m sglang.launch_server --model-path "/m\n', "quot"),
        ("[Service]\nUser=sglang\n", "ExecStart"),
    ],
)
def test_malformed_unit_exits_65_with_one_line(tmp_path: Path, content: str, needle: str) -> None:
    unit = tmp_path / "bad.service"
    unit.write_text(content)
    rc, _, err = preflight_json_in_process({"PATH": os.environ["PATH"]}, "--unit", str(unit))
    assert rc == 65
    assert str(unit) in err and needle.lower() in err.lower()
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_malformed_checkpoint_exits_65(patched: Server, tmp_path: Path) -> None:
    model = tmp_path / "model"
    write_checkpoint(model, small=True)
    (model / "config.json").write_text('{"architectures": ["BailingMoeV3ForCausalLM",}')
    rc, _, err = preflight_json_in_process(
        patched.env, "--launch-cmd", patched.cmd(), "--model-dir", str(model)
    )
    assert rc == 65 and "config.json" in err and "Traceback" not in err
    write_checkpoint(model, small=True)
    shard = next(model.glob("*.safetensors"))
    shard.write_bytes(shard.read_bytes()[:6])
    rc, _, err = preflight_json_in_process(
        patched.env, "--launch-cmd", patched.cmd(), "--model-dir", str(model)
    )
    assert rc == 65 and shard.name in err and "Traceback" not in err


def test_unknown_and_ambiguous_flags_are_rejected_like_sglang(patched: Server) -> None:
    rc, _, err = preflight_json_in_process(patched.env, "--launch-cmd", patched.cmd("--no-such-flag"))
    assert rc == 65 and "unrecognized arguments: --no-such-flag" in err
    rc, _, err = preflight_json_in_process(patched.env, "--launch-cmd", patched.cmd("--speculative-num", "3"))
    assert rc == 65 and "ambiguous option" in err


def test_launch_execs_exactly_the_checked_command(tmp_path: Path) -> None:
    """`launch` replaces itself with the server command (same PID, same environment) only after a passing
    preflight; a misconfigured command is never executed."""
    server = _server(tmp_path, "launch")
    marker = tmp_path / "ran"
    server.plant_launch_server(marker)
    argv = server.cmd().split()
    env = {**server.env, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "validator", "launch", "--report-to", "none", "--", *argv],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    pid, fp8, args = marker.read_text().split(" ", 2)
    assert int(pid) == proc.pid  # exec, not a child
    assert fp8 == "1" and "--moe-runner-backend humming" in args
    marker.unlink()
    res = run_cli("launch", "--", *argv, "--enable-fp32-lm-head", env=server.env)
    assert res.returncode == 78 and not marker.exists()
    assert "lm_head.exclusive" in res.stderr  # the report goes to stderr; stdout belongs to the server


def test_preflight_path_imports_neither_torch_nor_sglang(patched: Server) -> None:
    # nor the live side's HTTP stack and Prometheus client (the output registry imports --format prom's
    # module: prometheus_client with http.server, wsgiref and ssl was a quarter of preflight's imports);
    # pydantic is preflight's own: it validates the pack and writes the report
    rc, heavy = _run_and_list_heavy(
        ["preflight", "--launch-cmd", patched.cmd(), "--format", "json"], patched,
        ("torch", "sglang", "triton", "numpy", "prometheus_client", "httpx", "uvicorn"),
        ("starlette",),
    )  # fmt: skip
    assert (rc, heavy) == (0, []), heavy


def test_the_pack_names_the_draft_class_the_install_reader_reports(tmp_path: Path) -> None:
    """The install reader reports every draft class it finds; which one runs is the pack's to say. A site
    pack for another model's MTP draft is judged by that class's own hook, and a class the build lacks is
    not proven (never a pass, never judged by Ling's class)."""
    server = _server(tmp_path, "other", fp8_lm_head=True, share_hook=False)
    models = server.python.parent.parent.parent / "site-packages" / "sglang" / "srt" / "models"
    (models / "acme_moe_mtp.py").write_text(
        "class AcmeMoeForCausalLMMTP:\n"
        "    def set_lm_head_from_target(self, head):\n"
        "        self.lm_head = head\n"
    )

    def shared_with(draft: str) -> dict[str, Any]:
        pack = tmp_path / f"{draft}.yaml"
        pack.write_text(
            "extends: ling-3.0-flash-dgx-spark\n"
            f"metadata: {{name: site-{draft.lower()}, description: a site pack}}\n"
            f"expect:\n  checkpoint: {{draft_architecture: {draft}}}\n"
        )
        _, report, err = preflight_json_in_process(
            server.env, "--launch-cmd", server.cmd(), "--rules", str(pack)
        )
        assert report, err
        return next(c for c in report["checks"] if c["id"] == "spec.lm_head_shared")

    ling = shared_with("BailingMoeForCausalLMNextN")
    assert ling["status"] == "fail" and ling["evidence"]["set_lm_head_from_target"] is False
    acme = shared_with("AcmeMoeForCausalLMMTP")
    assert acme["status"] == "pass", acme
    assert acme["message"].startswith("AcmeMoeForCausalLMMTP shares the target's LM-head module")
    absent = shared_with("NoSuchNextN")
    assert absent["status"] == "error"
    assert "no draft model file in srt/models defines class NoSuchNextN" in absent["message"]


def test_launch_path_imports_no_server_stack(patched: Server) -> None:
    # launch runs in the server's start-up too; it recognises simulator processes by their command line
    # (validator.sim.process_view), and the simulator package once loaded its whole server with it
    # (engine, asyncio, prometheus_client: about 70 ms of every launch)
    argv = patched.cmd("--enable-fp32-lm-head").split()  # refused (exit 78): the process is not replaced
    rc, heavy = _run_and_list_heavy(
        ["launch", "--report-to", "none", "--", *argv], patched,
        ("torch", "sglang", "prometheus_client", "httpx", "uvicorn", "starlette"),
        ("validator.sim.runner", "validator.sim.engine", "asyncio"),
    )  # fmt: skip
    assert (rc, heavy) == (78, []), heavy


def _run_and_list_heavy(
    args: list[str], server: Server, packages: tuple[str, ...], modules: tuple[str, ...] = ()
) -> tuple[int, list[str]]:
    """Run the CLI in a fresh interpreter with ``args``; its exit code and which of ``packages`` (top-level
    names) and ``modules`` it had imported by the end."""
    code = (
        "import sys\n"
        "from validator.cli import main\n"
        f"rc = main({args!r})\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {packages!r} or m in {modules!r})\n"
        "print('RC', rc, 'HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**server.env, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    found = re.search(r"^RC (-?\d+) HEAVY (\[.*\])$", proc.stderr, re.M)
    assert found is not None, proc.stderr
    return int(found.group(1)), ast.literal_eval(found.group(2))


def test_the_fp8_switch_the_build_must_declare_is_the_packs(tmp_path: Path) -> None:
    """The install reader lists what srt/environ.py declares; lm_head.fp8 looks the pack's own switch up
    in it. On stock 0.5.23, a site pack whose switch is a variable that build declares is supported, and
    Ling's switch, which it does not declare, is not."""
    server = _server(tmp_path, "stock", fp8_lm_head=False, share_hook=False)
    switch = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
    environ = server.python.parent.parent.parent / "site-packages" / "sglang" / "srt" / "environ.py"
    assert f"    {switch} = EnvBool(" in environ.read_text()
    pack = tmp_path / "site.yaml"
    pack.write_text(
        "extends: ling-3.0-flash-dgx-spark\nmetadata: {name: site-switch, description: a site pack}\n"
        f"expect: {{fp8_lm_head_env: {switch}}}\n"
    )
    env = {**server.env, switch: "1", "SGLANG_ENABLE_FP8_LM_HEAD": "1"}
    fp8 = {}
    for rules in (str(pack), "ling-3.0-flash-dgx-spark"):
        _, report, err = preflight_json_in_process(env, "--launch-cmd", server.cmd(), "--rules", rules)
        assert report, err
        fp8[rules] = next(c for c in report["checks"] if c["id"] == "lm_head.fp8")
    assert fp8[str(pack)]["status"] == "pass", fp8[str(pack)]
    assert fp8["ling-3.0-flash-dgx-spark"]["status"] == "fail"
    assert "does not declare SGLANG_ENABLE_FP8_LM_HEAD" in fp8["ling-3.0-flash-dgx-spark"]["message"]
