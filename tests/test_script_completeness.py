"""How much of published launchers the script reader proves, held at 100%: every launcher in
``tests/corpus/scripts`` (real copies where the source repository publishes a licence, stand-ins written
with the same launch-relevant structure where it publishes none: that folder's README says which) and the
MiaAI-Lab shape below has its launch read, every path followed, with only the values bash computes at run
time left unknown and named (issue 29).

MiaAI-Lab's ``start.sh`` (https://github.com/MiaAI-Lab/Ling-3.0-Flash-SGLang-DSpark-DGX-Spark, path
``start.sh``; the version of 12,714 characters whose line 81 is ``for snapshot in
"${cache_dir}"/snapshots/*/; do``, before commit ``7028b28ddc23f2923218cde11ab4f16d0f1d6efb``) runs
SGLang for an INT4 checkpoint in a container: ``docker run -d --entrypoint /bootstrap.sh ... "${IMAGE}"
--model-path ... --enable-fp32-lm-head``, the entrypoint a here-document the script writes to ``/tmp``,
after a Hugging Face cache probe that loops over a glob of a directory the script made. Every launch
check was ERR at that loop. The repository publishes no licence, so its text is not copied here:
``MIAAI_SHAPE`` is written for this test with the same launch-relevant structure (the probe and its glob
loop, a download fallback that is a ``docker run`` of inline code, the bootstrap here-document, the
snapshot found by ``ls | head -1``, the detached ``docker run`` with the entrypoint mounted from ``/tmp``,
the readiness loop after it). An expert reads it as FAIL for the DGX Spark recipe (no humming backend,
the FP32 head), not as unproven.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.test_script_corpus import BAKEER, LY01325, POCHARLIES, _checkout, _relocated
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch.script import _container, read_exec, resolve, through_entrypoint
from validator.sources.launch.shell.values import Unknown, join

MIAAI_SHAPE = r"""#!/usr/bin/env bash
# Written for tests/test_script_completeness.py after MiaAI-Lab's start.sh (see there): its structure.
set -euo pipefail
REPO_ID="inclusionAI/Ling-3.0-flash-int4"
IMAGE="${IMAGE:-nvcr.io/nvidia/pytorch:26.01-py3}"
NAME="ling-int4"
PORT="${PORT:-8888}"
HF_HOME="${HOME}/.cache/huggingface"
ENTRY="${ENTRY_DIR:-/tmp}/ling-entry.sh"
case "${1:-}" in
  --download-only) ONLY_DOWNLOAD=true; shift ;;
  "") ONLY_DOWNLOAD=false ;;
  *) echo "usage: $0 [--download-only]"; exit 1 ;;
esac
command -v docker >/dev/null 2>&1 || { echo "docker is required"; exit 1; }
export HF_HOME
mkdir -p "${HF_HOME}"
repo_cache() { echo "${HF_HOME}/hub/models--${1//\//--}"; }
cached() {
  local dir snap
  dir="$(repo_cache "$1")"
  [[ -d "$dir/snapshots" ]] || return 1
  for snap in "$dir"/snapshots/*/; do
    [[ -d "$snap" ]] || continue
    [[ -f "$snap/config.json" ]] || continue
    if [[ -f "$snap/model.safetensors.index.json" ]] \
      || compgen -G "$snap/model-"*.safetensors >/dev/null; then
      return 0
    fi
  done
  return 1
}
fetch() {
  docker run --rm --entrypoint python3 -v "${HF_HOME}:/root/.cache/huggingface" "${IMAGE}" \
    -c "from huggingface_hub import snapshot_download; snapshot_download('$1')"
}
if ! cached "$REPO_ID"; then
  fetch "$REPO_ID"
  cached "$REPO_ID" || { echo "download incomplete"; exit 1; }
fi
if ${ONLY_DOWNLOAD}; then exit 0; fi
cat > "$ENTRY" << 'BOOT'
#!/bin/bash
set -e
VENV=/opt/persist/venv
if [[ -x "$VENV/bin/python" ]]; then
  source "$VENV/bin/activate"
fi
exec python -m sglang.launch_server "$@"
BOOT
chmod +x "$ENTRY"
if docker ps -a --format '{{.Names}}' | grep -qx "$NAME"; then docker rm -f "$NAME" >/dev/null; fi
SNAP="$(ls "$(repo_cache "$REPO_ID")/snapshots/" 2>/dev/null | head -1)"
[[ -n "$SNAP" ]] || { echo "no snapshot"; exit 1; }
IN_CONTAINER="/root/.cache/huggingface/hub/models--${REPO_ID//\//--}/snapshots/${SNAP}"
docker pull "$IMAGE" || { echo "pull failed"; exit 1; }
EXTRA=()
if [[ "${ENABLE_NEXTN:-0}" == 1 ]]; then EXTRA+=(--speculative-algorithm NEXTN); fi
docker run -d --name "$NAME" --network host --gpus all --entrypoint /entry.sh \
  -v "$ENTRY:/entry.sh:ro" -v "${HF_HOME}:/root/.cache/huggingface" -e HF_HOME=/root/.cache/huggingface \
  "$IMAGE" \
  --model-path "$IN_CONTAINER" --trust-remote-code --port "$PORT" --tp-size 1 \
  --max-running-requests "${MAX_RUNNING_REQUESTS:-1}" --mem-fraction-static "${MEM_FRACTION_STATIC:-0.75}" \
  --tool-call-parser ling3 --reasoning-parser ling3 --enable-fp32-lm-head "${EXTRA[@]}" >/dev/null
trap 'echo stopped' EXIT
while ! curl -fsS "http://127.0.0.1:${PORT}/v1/models" >/dev/null 2>&1; do
  docker ps --format '{{.Names}}' | grep -qx "$NAME" || exit 1
  sleep 2
done
"""

# docker as a capture shim that records only the detached run (the server's container)
DOCKER_SHIM = """#!/usr/bin/perl
exit 0 unless @ARGV >= 2 && $ARGV[0] eq "run" && $ARGV[1] eq "-d";
open(my $a, ">", "{out}/argv"); print $a join("\\0", $0, @ARGV), "\\0"; close($a);
"""


def _miaai_host(where: Path) -> tuple[Path, dict[str, str]]:
    """The script, a home whose cache holds the checkpoint's snapshot, docker and curl on PATH (shims)."""
    home = where / "home"
    snap = home / ".cache/huggingface/hub/models--inclusionAI--Ling-3.0-flash-int4/snapshots/0123abcd"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text('{"architectures": ["BailingMoeV3ForCausalLM"]}\n')
    (snap / "model.safetensors.index.json").write_text('{"weight_map": {}}\n')
    tools = where / "tools"
    tools.mkdir()
    (where / "out").mkdir()
    (tools / "docker").write_text(DOCKER_SHIM.replace("{out}", str(where / "out")))
    (tools / "curl").write_text("#!/bin/sh\nexit 0\n")
    for t in ("docker", "curl"):
        (tools / t).chmod(0o755)
    script = where / "start.sh"
    script.write_text(MIAAI_SHAPE)
    script.chmod(0o755)
    return script, {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(home), "LANG": "C"}


def test_the_miaai_shape_reads_as_bash_runs_it(tmp_path: Path) -> None:
    """The container's command line is what bash runs, but for the snapshot's name (``ls | head -1``):
    unknown, and the only unknown word."""
    script, env = _miaai_host(tmp_path)
    env["ENTRY_DIR"] = str(tmp_path)
    subprocess.run([str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=60, check=False)
    ran = (tmp_path / "out" / "argv").read_bytes().split(b"\0")[:-1]
    bash_words = [w.decode() for w in ran[1:]]
    ex, _ = read_exec(script, env)
    words = [join(f) for f in ex.argv[1:]]  # type: ignore[union-attr]
    assert len(words) == len(bash_words)
    differ = [(m, b) for m, b in zip(words, bash_words, strict=True) if m != b]
    assert len(differ) == 1 and isinstance(differ[0][0], Unknown), differ
    assert differ[0][1].endswith("/snapshots/0123abcd")


def test_the_miaai_shape_fails_the_recipe_instead_of_erring_at_its_loop(tmp_path: Path) -> None:
    """FAIL (78) for the DGX Spark recipe on what the launch really says (no ``--moe-runner-backend``:
    ``auto``), read through the entrypoint the script wrote; the glob loop makes nothing unknown; the
    entrypoint's place in ``/tmp`` is named as a hazard."""
    script, env = _miaai_host(tmp_path)
    rc, report, err = preflight_json_in_process(env, "--script", str(script), cwd=tmp_path)
    statuses = {c["id"]: c["status"] for c in report.get("checks", [])}
    assert rc == 78 and report["verdict"] == "fail", (err, report.get("checks"))
    assert statuses["moe.backend"] == "fail"
    messages = " ".join(c["message"] for c in report["checks"])
    assert "for over words" not in messages and "snapshots/*/" not in messages
    (warned,) = [c for c in report["checks"] if c["id"] == "launch.warnings"]
    assert "another user could replace it" in warned["message"] and "/tmp/ling-entry.sh" in warned["message"]
    (checkpoint,) = [c for c in report["checks"] if c["id"] == "checkpoint.layout"]
    assert checkpoint["status"] == "error"  # the snapshot's name is known only at run time


def _corpus(where: Path) -> list[tuple[str, Path, dict[str, str]]]:
    """Every launcher of tests/corpus/scripts (copy or stand-in) set up as its README says, and the
    MiaAI-Lab shape."""
    home = where / "home"
    for model in ("Ling-3.0-flash-fp4", "Ling-3.0-flash-dspark"):
        (home / "models" / model).mkdir(parents=True)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C"}
    out: list[tuple[str, Path, dict[str, str]]] = []
    bakeer = _checkout(where / "bakeer", Path(sys.executable))
    out.append(("0xbakeer-ling3-flash-spark/start.sh", bakeer / "start.sh", env))
    root = where / "Ling"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    for name in ("launch-optimized.sh", "launch-baseline.sh"):
        out.append((f"ly01325-ling3-flash-dgx-spark/{name}", _relocated(LY01325 / name, where, root), env))
    shims = where / "shims"
    shims.mkdir()
    (shims / "docker").write_text("#!/bin/sh\nexit 0\n")
    (shims / "docker").chmod(0o755)
    shutil.copy(POCHARLIES / "head.sh", where / "head.sh")
    docker_env = {**env, "PATH": f"{shims}:/usr/bin:/bin"}
    out.append(("pocharlies-qwen38-flash-next-dgx-spark-sglang/head.sh", where / "head.sh", docker_env))
    miaai = where / "miaai"
    miaai.mkdir()
    script, miaai_env = _miaai_host(miaai)
    out.append(("MiaAI-Lab start.sh (shape)", script, miaai_env))
    return out


def test_every_corpus_launcher_is_proven(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The completeness figure: the fraction of corpus launchers whose launch is proven (every path
    followed, the command read, each value known or named as computed at run time). Held at 100%."""
    launchers = _corpus(tmp_path)
    covered = {name.split("/")[0] for name, _, _ in launchers}
    assert covered >= {p.name for p in (BAKEER, LY01325, POCHARLIES)}, covered
    proven: list[str] = []
    not_proven: dict[str, str] = {}
    for name, script, env in launchers:
        try:  # the reader's part: the launch read (SGLang's own parser may still refuse the flags)
            ex, _ = read_exec(script, env)
            argv, server_env, _, _ = resolve(ex)
            container = _container(argv, server_env, ex.where, None)
            if container is not None:
                through_entrypoint(container, ex.written)
        except (UnresolvedLaunch, InputError) as exc:
            not_proven[name] = str(exc)
            continue
        proven.append(name)
    figure = len(proven) / len(launchers)
    with capsys.disabled():
        print(f"\nreal-launcher completeness: {len(proven)}/{len(launchers)} proven ({figure:.0%})")
    assert figure == 1.0, not_proven
