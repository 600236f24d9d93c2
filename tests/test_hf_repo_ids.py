"""``--model-path ORG/NAME``: a Hugging Face repo id, resolved through the server's hub cache as SGLang's
``snapshot_download`` would (``HF_HUB_CACHE``, ``HF_HOME``, ``--download-dir``, ``refs/<revision>`` ->
``snapshots/<commit>``, ``--revision``), never the network; and what preflight says when it is not cached.

The cache is laid out as huggingface_hub writes it: blobs named by hash, the snapshot's files links into
them, a ref file holding the commit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.in_process import preflight_json_in_process

REPO_ID = "inclusionAI/Ling-3.0-flash-fp4"
MAIN = "a" * 40
TAGGED = "b" * 40
ARGS = (
    "--trust-remote-code --moe-runner-backend humming --speculative-algorithm NEXTN "
    "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
    "--mem-fraction-static 0.6"
)


def _cache(hub: Path, commit: str, ref: str | None) -> Path:
    """``models--inclusionAI--Ling-3.0-flash-fp4`` with one snapshot whose files link into blobs/."""
    root = hub / ("models--" + REPO_ID.replace("/", "--"))
    staged = hub.parent / f"staged-{commit[:4]}"
    write_checkpoint(staged, small=False)
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    (root / "blobs").mkdir(exist_ok=True)
    for f in staged.iterdir():
        blob = root / "blobs" / f"{commit[:8]}-{f.name}"
        shutil.move(str(f), blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    if ref is not None:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return snap


def _preflight(env: dict[str, str], *extra: str) -> tuple[int, dict[str, Any]]:
    cmd = f"python -m sglang.launch_server --model-path {REPO_ID} {ARGS} {' '.join(extra)}"
    rc, report, err = preflight_json_in_process(env, "--launch-cmd", cmd)
    assert report, err
    return rc, {c["id"]: c for c in report["checks"]}


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), **more}


def test_repo_id_in_hf_home_is_read_from_its_snapshot(tmp_path: Path) -> None:
    snap = _cache(tmp_path / "hf" / "hub", MAIN, "main")
    _, checks = _preflight(_env(tmp_path, HF_HOME=str(tmp_path / "hf")))
    layout = checks["checkpoint.layout"]
    assert layout["status"] == "pass", layout
    assert layout["evidence"]["model_dir"] == str(snap)


def test_hf_hub_cache_and_revision_pick_the_snapshot(tmp_path: Path) -> None:
    hub = tmp_path / "elsewhere"
    _cache(hub, MAIN, "main")
    tagged = _cache(hub, TAGGED, "v1.1")
    env = _env(tmp_path, HF_HOME=str(tmp_path / "unused"), HF_HUB_CACHE=str(hub))
    _, checks = _preflight(env, "--revision", "v1.1")
    assert checks["checkpoint.layout"]["evidence"]["model_dir"] == str(tagged)
    _, checks = _preflight(env, "--revision", TAGGED)  # a commit names its snapshot directly
    assert checks["checkpoint.layout"]["evidence"]["model_dir"] == str(tagged)
    _, checks = _preflight(_env(tmp_path), "--download-dir", str(hub))  # SGLang's cache_dir
    assert checks["checkpoint.layout"]["status"] == "pass"


def test_default_cache_is_the_servers_home(tmp_path: Path) -> None:
    _cache(tmp_path / "home" / ".cache" / "huggingface" / "hub", MAIN, "main")
    _, checks = _preflight(_env(tmp_path))
    assert checks["checkpoint.layout"]["status"] == "pass", checks["checkpoint.layout"]


def test_not_cached_says_what_the_server_would_do(tmp_path: Path) -> None:
    _, checks = _preflight(_env(tmp_path, HF_HOME=str(tmp_path / "hf")))
    layout = checks["checkpoint.layout"]
    assert layout["status"] == "error", layout  # never evidence either way: not proven
    message = layout["message"]
    assert "Hugging Face repo id" in message and str(tmp_path / "hf" / "hub") in message
    assert "download it from the Hugging Face Hub when it starts" in message
    assert f"hf download {REPO_ID}" in message
    _, checks = _preflight(_env(tmp_path, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1"))
    assert "would fail at start (HF_HUB_OFFLINE is set)" in checks["checkpoint.layout"]["message"]
    _cache(tmp_path / "hf" / "hub", MAIN, "main")
    _, checks = _preflight(_env(tmp_path, HF_HOME=str(tmp_path / "hf")), "--revision", "v2")
    assert "at revision v2" in checks["checkpoint.layout"]["message"]  # main is cached, v2 is not


def test_a_containers_repo_id_is_read_through_the_mounted_cache_its_environment_names(tmp_path: Path) -> None:
    """World10 F8: SGLang's own docker form (and marie-ai's), ``-v ~/.cache/huggingface:/root/.cache/
    huggingface -e HF_HOME=/root/.cache/huggingface``: the server reads the hub cache the container's
    environment names, which is the host's directory through the bind mount; it was "not a local checkpoint
    here" though the same id on the host resolved. Without a cache setting the default is under the
    image's user's home, and in a volume nothing is visible: not read, saying why."""
    snap = _cache(tmp_path / "hostcache" / "hub", MAIN, "main")
    run = (
        "docker run --gpus all {opts} lmsysorg/sglang:spark python3 -m sglang.launch_server "
        f"--model-path {REPO_ID} {ARGS}"
    )
    mount = f"-v {tmp_path}/hostcache:/root/.cache/huggingface"

    def layout(opts: str) -> dict[str, Any]:
        _, report, err = preflight_json_in_process(_env(tmp_path), "--docker-cmd", run.format(opts=opts))
        assert report, err
        (found,) = [c for c in report["checks"] if c["id"] == "checkpoint.layout"]
        return found

    for opts in (
        f"{mount} -e HF_HOME=/root/.cache/huggingface -e HF_HUB_OFFLINE=1",
        f"-v {tmp_path}/hostcache:/c -e HF_HUB_CACHE=/c/hub -e HF_HOME=/elsewhere",
    ):
        found = layout(opts)
        assert found["status"] == "pass" and found["evidence"]["model_dir"] == str(snap), found
    found = layout(mount)  # HF_HOME not given: the image's home decides
    assert found["status"] == "error" and "image decides" in found["message"], found
    found = layout("-v hf:/root/.cache/huggingface -e HF_HOME=/root/.cache/huggingface")
    assert found["status"] == "error" and "named volume 'hf'" in found["message"], found
