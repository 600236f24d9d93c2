"""Snapshot what users see, to prove a refactoring changed nothing: the JSON report of ``preflight`` on
the recipe (and on one launch per kind of mistake), of ``check`` against every simulator scenario, and the
``rules`` command's output, each from a real subprocess, normalised (timestamps, durations, measured
timings, temporary paths and ports) so that two runs of the same code compare equal.

    python -m scripts.behaviour_snapshot OUT.json              # take a snapshot of this checkout
    python -m scripts.behaviour_snapshot OUT.json --compare BASE.json   # exit 1 and show what differs

Take the baseline on the code before the change, the second snapshot after it; differences are listed as
``case: path: before -> after``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import run_cli
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.sglang_builds import fake_interpreter, make_build

REPO = Path(__file__).resolve().parents[1]


SPEC = (
    "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 4"
)
# Values that differ between two runs of the same code: blanked before comparing.
VOLATILE_KEYS = {"started_at", "duration_s", "tpot_ms", "ttft_ms", "wall_s", "floor_ms", "round_ms"}
VOLATILE_KEYS |= {"pid", "start_time", "observed_start_time", "server_port"}  # the simulator process
VOLATILE_KEYS |= {"listener_pids"}  # the simulator's PID, as the attestation binding found it listening
# the simulated log's and /server_info's lengths vary by a byte or two with the digits of timings in them
VOLATILE_KEYS |= {"bytes_read"}
_JSON_BYTE = re.compile(r"invalid JSON at byte \d+")
_TMP_DIR = re.compile(r"<repo>/\.pytest-tmp/sv-snapshot-[A-Za-z0-9_]+")  # snapshots taken before <tmp>
_NUMBER_IN_TPOT = re.compile(r"\d+(\.\d+)?")
_MEASURED_MESSAGE = ("perf.tpot", "attestation.trust", "server.progress")
_PROGRESS = re.compile(r"^\w+ +\d+\.\ds  (/health|no answer)")
# a process read from /proc (check --pid, launch): its PID, its start, and the interpreter running it
_PID = re.compile(r"\b(PID|process) \d+")
_WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_PYTHON = re.compile(r"(?:<repo>|/[^\s\"']*?)/\.venv/bin/python3?\b")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp / "home"),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
        "COLUMNS": "100",
    }
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], timeout: float = 120.0) -> dict[str, Any]:
    proc = run_cli(*cmd, env=env, timeout=timeout)
    # check's progress lines on stderr say when the simulator answered, which varies between runs.
    stderr = "\n".join(line for line in proc.stderr.splitlines() if not _PROGRESS.match(line))
    out: dict[str, Any] = {"rc": proc.returncode, "stderr": stderr.strip()[-2000:]}
    try:
        out["report"] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        out["stdout"] = proc.stdout
    return out


def _normalise(value: Any, subs: list[tuple[str, str]], key: str = "") -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[k] = "<volatile>" if k in VOLATILE_KEYS and v is not None else _normalise(v, subs, k)
        # measured figures in these messages (server.progress: "our request got 4 token(s) in 0.02 s")
        if value.get("id") in _MEASURED_MESSAGE and isinstance(out.get("message"), str):
            out["message"] = _NUMBER_IN_TPOT.sub("N", out["message"])
        return out
    if isinstance(value, list):
        return [_normalise(v, subs, key) for v in value]
    if isinstance(value, str):
        for old, new in subs:
            value = value.replace(old, new)
        value = _TMP_DIR.sub("<tmp>", _JSON_BYTE.sub("invalid JSON at byte N", value))
        value = _PYTHON.sub("<python>", _WHEN.sub("<time>", _PID.sub(r"\1 N", value)))
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", value)
    return value


def preflight_cases(tmp: Path) -> dict[str, dict[str, Any]]:
    """The recipe, and one launch per kind of mistake each check family reports."""
    patched, stock = tmp / "patched", tmp / "stock"
    make_build(patched)
    make_build(stock, fp8_lm_head=False, share_hook=False)
    for site in (patched, stock):
        dist = site / "humming_kernels-0.1.19.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: humming-kernels\nVersion: 0.1.19\n")
        (site / "humming").mkdir()
        (site / "humming" / "__init__.py").write_text("")
    cache = tmp / "cache"
    (cache / "0").mkdir(parents=True)
    (cache / "0" / "kernel.cubin").write_bytes(b"\x7fELF")
    py = fake_interpreter(tmp / "venv" / "bin", patched)
    py_stock = fake_interpreter(tmp / "venv-stock" / "bin", stock)
    model = write_checkpoint(tmp / "model", small=False)
    bad_model = write_checkpoint(
        tmp / "bad-model", small=True, modules_to_not_convert=(), num_nextn_predict_layers=0
    )
    (tmp / "home").mkdir()
    recipe = (
        f"{py} -m sglang.launch_server --model-path {model} --moe-runner-backend humming {SPEC} "
        f"--speculative-draft-model-path {model}"
    )
    good_env = _env(tmp, SGLANG_ENABLE_FP8_LM_HEAD="1", HUMMING_CACHE_DIR=str(cache))
    cfg = tmp / "extra.yaml"
    cfg.write_text("mem-fraction-static: 0.6\n")
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "preflight recipe": (["--launch-cmd", recipe], good_env),
        "preflight recipe --model-dir --strict": (
            ["--launch-cmd", recipe, "--model-dir", str(model), "--strict"],
            good_env,
        ),
        "preflight stock build": (["--launch-cmd", recipe.replace(str(py), str(py_stock))], good_env),
        "preflight stock build + share plugin env": (
            ["--launch-cmd", recipe.replace(str(py), str(py_stock))],
            {**good_env, "SPARK_VALIDATE_SHARE_LM_HEAD": "1"},
        ),
        "preflight mistakes": (
            [
                "--launch-cmd",
                f"{py} -m sglang.launch_server --model-path {bad_model} --moe-runner-backend auto "
                "--enable-fp32-lm-head --mem-fraction-static 0.9 --speculative-algorithm NEXTN "
                f"--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
                f"--config={cfg}",
            ],
            _env(tmp, SGLANG_ENABLE_FP8_LM_HEAD="maybe", SGLANG_NO_SUCH="1", HUMMING_CACHE_DIR=str(cache)),
        ),
        "preflight fp8+fp32, no spec, empty cache": (
            [
                "--launch-cmd",
                f"{py} -m sglang.launch_server --model-path {model} --moe-runner-backend humming "
                "--enable-fp32-lm-head",
            ],
            _env(tmp, SGLANG_ENABLE_FP8_LM_HEAD="1", HUMMING_CACHE_DIR=str(tmp / "empty-cache")),
        ),
        "preflight draft backend override, not FP8": (
            [
                "--launch-cmd",
                recipe + " --speculative-moe-runner-backend triton",
            ],
            _env(tmp, HUMMING_CACHE_DIR=str(cache)),
        ),
        "preflight no sglang": (
            ["--launch-cmd", recipe.replace(str(py), "/nonexistent/python")],
            good_env,
        ),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (args, env) in cases.items():
        out[name] = _run(["preflight", "--format", "json", *args], env)
    return out


def _start_sim(
    tmp: Path, port: int, scenario: str, log: Path, att: Path, extra: list[str]
) -> subprocess.Popen[bytes]:
    """The simulator in ``scenario`` on ``port``, writing its log and attestation where given."""
    sim_cmd = [
        sys.executable, "-m", "validator.sim", "--port", str(port), "--speed", "50",
        "--startup-seconds", "0.3", "--seed", "7", "--scenario", scenario,
        "--log", str(log), "--attestation", str(att), *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        sim_cmd, cwd=REPO, env=_env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def check_cases(tmp: Path) -> dict[str, dict[str, Any]]:
    """``check`` against each scenario of the simulator, run as its own process."""
    from validator.sim.scenarios import SCENARIOS

    out: dict[str, dict[str, Any]] = {}
    key_file = tmp / "api-key"
    key_file.write_text("sk-snapshot-key\n")
    for scenario in SCENARIOS:
        port = free_port()
        log, att = tmp / f"{scenario}.log", tmp / f"{scenario}.att.json"
        extra = ["--api-key-file", str(key_file)] if scenario == "auth-required" else []
        proc = _start_sim(tmp, port, scenario, log, att, extra)
        try:
            try:
                wait_listening(port, proc, what="simulator")
            except RuntimeError:  # a scenario whose server dies while loading (dspark-ring-16): its exit
                out[f"check {scenario}"] = {"simulator_exit": proc.returncode}
                continue
            args = ["check", "--url", f"http://127.0.0.1:{port}", "--format", "json", "--wait", "20"]
            args += ["--attestation", str(att), "--log", str(log)]
            if scenario == "auth-required":
                args += ["--api-key-file", str(key_file)]
            out[f"check {scenario}"] = _run(args, _env(tmp))
        finally:
            stop(proc)
    return out


def process_cases(tmp: Path) -> dict[str, dict[str, Any]]:
    """The paths that read a running process (``check --pid``, ``launch``) and find a simulator there: the
    SGLang command it stands in for, its install identity and a worker's cluster facts."""
    out: dict[str, dict[str, Any]] = {}
    worker = ["--", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "127.0.0.1:29999"]
    for name, scenario, extra in (
        ("healthy", "healthy", []),
        ("draft-head-weight-only", "draft-head-weight-only", []),
        ("worker", "healthy", worker),
    ):
        port = free_port()
        log, att = tmp / f"pid-{name}.log", tmp / f"pid-{name}.att.json"
        proc = _start_sim(tmp, port, scenario, log, att, extra)
        try:
            if not extra:
                wait_listening(port, proc, what="simulator")
                args = ["--attestation", str(att), "--log", str(log), "--wait", "20"]
            else:  # a worker serves no HTTP: proven by its user, once its process runs
                args = ["--wait", "5"]
            res = _run(["check", "--pid", str(proc.pid), "--format", "json", *args], _env(tmp))
            out[f"check --pid {name}"] = res
        finally:
            stop(proc)
    port = free_port()
    launched = [
        "launch", "--format", "json", "--output", str(tmp / "launch.json"), "--",
        sys.executable, "-m", "validator", "sim", "--port", str(port), "--scenario", "draft-head-weight-only",
    ]  # fmt: skip
    res = _run(launched, _env(tmp))
    res["report"] = json.loads((tmp / "launch.json").read_text())  # refused: the report, not the server
    out["launch -- sim draft-head-weight-only"] = res
    return out


def rules_cases(tmp: Path) -> dict[str, dict[str, Any]]:
    env = _env(tmp)
    pack = str(REPO / "rules" / "ling-3.0-flash-dgx-spark.yaml")
    return {
        "rules list": _run(["rules", "list"], env),
        "rules show lm_head.fp8": _run(["rules", "show", "lm_head.fp8"], env),
        "rules lint builtin": _run(["rules", "lint", pack], env),
    }


def snapshot() -> dict[str, Any]:
    # not under /tmp: packs, env files and attestations are trusted only where nobody else can write
    private = REPO / ".pytest-tmp"
    private.mkdir(mode=0o755, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sv-snapshot-", dir=private) as tmp_s:
        tmp = Path(tmp_s)
        cases = {**preflight_cases(tmp), **check_cases(tmp), **process_cases(tmp), **rules_cases(tmp)}
        # the temporary directory first: it lies inside the repository
        subs = [(tmp_s, "<tmp>"), (str(Path(tmp_s).resolve()), "<tmp>"), (str(REPO), "<repo>")]
        return {name: _normalise(case, subs) for name, case in cases.items()}


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            _diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            key = x.get("id", i) if isinstance(x, dict) else i
            _diff(x, y, f"{path}[{key}]", out)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:400]} -> {json.dumps(b)[:400]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="write the snapshot here")
    ap.add_argument("--compare", type=Path, help="a baseline snapshot: list differences, exit 1 if any")
    args = ap.parse_args()
    snap = snapshot()
    args.out.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    if args.compare is None:
        print(f"{args.out}: {len(snap)} cases")
        return 0
    # the baseline normalised again, so that one taken before a normalisation was added still compares
    base = _normalise(json.loads(args.compare.read_text()), [])
    snap = _normalise(snap, [])
    diffs: list[str] = []
    _diff(base, snap, "", diffs)
    for d in diffs:
        print(d)
    print(f"{len(snap)} cases, {len(diffs)} differences against {args.compare}")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
