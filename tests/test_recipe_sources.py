"""Evidence sources for the recipes beyond NVIDIA's: the DSpark draft, the installed DSpark worker,
FlashInfer's precompiled MoE kernels, MemAvailable and the supervisor's start budget, over real files.

The DSpark rules are held to SGLang 0.5.23's own source (the wheel's files): the ring check in
``memory_pool.py``, the worker's ``attach_shared_modules`` call and its ``uses_own_vocab_modules`` guard.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from validator.checks.spec_dspark import ring_problems, smallest_ring, verify_width, width_conflict
from validator.errors import InputError
from validator.sources.host.dspark_draft import read_dspark_draft
from validator.sources.host.flashinfer import read_flashinfer
from validator.sources.host.platform import read_host
from validator.sources.launch.start_budget import from_unit, parse_timespan
from validator.sources.launch.systemd_unit import load_unit
from validator.sources.sglang.install import read_sglang_install

LING_DRAFT: dict[str, Any] = {
    "architectures": ["LingDSparkModel"],
    "num_hidden_layers": 5,
    "block_size": 16,  # the top-level key loses to dflash_config.block_size, as in SGLang
    "dflash_config": {
        "block_size": 8,
        "markov_rank": 256,
        "markov_head_type": "vanilla",
        "mask_token_id": 156895,
    },
}


def write_draft(d: Path, config: dict[str, Any] | str = LING_DRAFT) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return d


def test_draft_block_size_with_sglangs_precedence(tmp_path: Path) -> None:
    d = write_draft(tmp_path / "draft")
    f = read_dspark_draft(str(d), None)
    assert (f.block_size, f.block_size_key) == (8, "dflash_config.block_size")
    assert f.architectures == ["LingDSparkModel"] and f.markov_rank == 256 and f.mask_token_id == 156895
    assert f.num_hidden_layers == 5 and f.config_path == d / "config.json"
    write_draft(d, {**LING_DRAFT, "dspark_block_size": 4})
    assert read_dspark_draft(str(d), None).block_size == 4  # the prefixed key wins
    write_draft(d, {"architectures": ["LingDSparkModel"], "block_size": 6})
    f = read_dspark_draft(str(d), None)
    assert (f.block_size, f.block_size_key, f.markov_rank) == (6, "block_size", None)


@pytest.mark.parametrize(
    ("prefixed", "name"), [("dspark_markov_rank", "markov_rank"), ("dspark_noise_token_id", "mask_token_id")]
)
def test_draft_markov_rank_and_mask_token_with_sglangs_precedence(
    tmp_path: Path, prefixed: str, name: str
) -> None:
    """Both fields: the prefixed top-level key, then dspark_config over dflash_config, then text_config,
    then the top level; a value that is not an integer is refused, naming the key it was read from."""
    d = tmp_path / "draft"
    doc: dict[str, Any] = {
        "architectures": ["LingDSparkModel"],
        prefixed: 1,
        "dspark_config": {name: 2},
        "dflash_config": {name: 3},
        "text_config": {name: 4},
        name: 5,
    }
    for expected, outranking in enumerate((prefixed, "dspark_config", "dflash_config", "text_config"), 1):
        write_draft(d, doc)
        assert getattr(read_dspark_draft(str(d), None), name) == expected
        del doc[outranking]
    write_draft(d, doc)
    assert getattr(read_dspark_draft(str(d), None), name) == 5
    write_draft(d, {**doc, "dspark_config": {name: "8"}})
    with pytest.raises(InputError, match=f"dspark_config.{name} must be an integer, not '8'"):
        read_dspark_draft(str(d), None)


COMMIT = "abc123" + "0" * 34  # huggingface_hub's refs/<branch> hold a 40-hex commit


def test_draft_found_in_hub_cache_and_model_subfolder(tmp_path: Path) -> None:
    hub = tmp_path / "hub" / "models--inclusionAI--Ling-3.0-flash-dspark"
    write_draft(hub / "snapshots" / COMMIT)
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text(COMMIT + "\n")
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    f = read_dspark_draft("inclusionAI/Ling-3.0-flash-dspark", None, env=env)
    assert f.block_size == 8 and "abc123" in f.located_by
    missing = read_dspark_draft("inclusionAI/other", None, env=env)
    assert missing.config_path is None and missing.note and "not in the local hub cache" in missing.note
    model = tmp_path / "model"
    write_draft(model / "dspark")
    f = read_dspark_draft(None, str(model))
    assert f.block_size == 8 and f.path == str(model / "dspark")
    assert read_dspark_draft(None, str(tmp_path)).config_path is None


@pytest.mark.parametrize(
    ("variable", "value", "cache"),
    [("HUGGINGFACE_HUB_CACHE", "hub", "hub"), ("XDG_CACHE_HOME", "xdg", "xdg/huggingface/hub")],
)
def test_draft_found_where_huggingface_hub_caches_it(
    tmp_path: Path, variable: str, value: str, cache: str
) -> None:
    """The draft's repo id is looked up in the cache huggingface_hub (and so SGLang) would use, by the
    target's reader (``hf_cache``): HUGGINGFACE_HUB_CACHE and XDG_CACHE_HOME were not followed for the
    draft, which then read as not cached."""
    root = tmp_path / cache / "models--inclusionAI--Ling-3.0-flash-dspark"
    write_draft(root / "snapshots" / COMMIT)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT)
    env = {"HOME": str(tmp_path / "home"), variable: str(tmp_path / value)}
    found = read_dspark_draft("inclusionAI/Ling-3.0-flash-dspark", None, env=env)
    assert found.block_size == 8 and found.config_path == root / "snapshots" / COMMIT / "config.json"


@pytest.mark.parametrize(
    "config",
    [
        "{not json",
        "[1, 2]",
        json.dumps({**LING_DRAFT, "dflash_config": [8]}),
        json.dumps({"block_size": "8"}),
    ],
)
def test_malformed_draft_config_is_an_input_error(tmp_path: Path, config: str) -> None:
    d = write_draft(tmp_path / "d", config)
    with pytest.raises(InputError) as exc:
        read_dspark_draft(str(d), None)
    assert str(d / "config.json") in str(exc.value)


def test_draft_config_fifo_does_not_block(tmp_path: Path) -> None:
    import os

    d = tmp_path / "d"
    d.mkdir()
    os.mkfifo(d / "config.json")
    with pytest.raises(InputError, match="FIFO"):
        read_dspark_draft(str(d), None)


def test_ring_rule_is_sglangs() -> None:
    width, how = verify_width(8, {})
    assert width == 9 and "block size 8" in how
    assert ring_problems(16, width) == ["spec-verify ring too small: 16 < 2 * 9 (early-flush margin)"]
    assert ring_problems(24, width) == ["spec-verify ring length must be a power of two, got 24"]
    assert ring_problems(32, width) == []
    assert smallest_ring(9) == 32 and smallest_ring(4) == 8
    assert verify_width(8, {"speculative_dspark_block_size": 3})[0] == 4  # the flag wins
    assert verify_width(None, {"speculative_num_draft_tokens": 5})[0] == 5
    assert verify_width(None, {})[0] == 8  # SGLang's DEFAULT_DSPARK_GAMMA 7, plus one
    assert width_conflict(8, {"speculative_num_draft_tokens": 4}) is not None
    assert width_conflict(8, {"speculative_num_draft_tokens": 9}) is None


def test_ring_rule_matches_the_wheels_source(stock_sglang_root: Path) -> None:
    """The two raises this module reproduces, word for word, in memory_pool.py (KDA spec-verify ring) and
    the verify window in _handle_dspark."""
    pool = (stock_sglang_root / "srt/mem_cache/memory_pool.py").read_text()
    assert "if L & (L - 1) != 0:" in pool
    assert 'f"spec-verify ring length must be a power of two, got {L}"' in pool
    assert "and L < 2 * speculative_num_draft_tokens" in pool
    assert "2 * {speculative_num_draft_tokens} (early-flush margin)" in pool
    hook = (stock_sglang_root / "srt/arg_groups/speculative_hook.py").read_text()
    assert "verify_window = int(gamma) + 1" in hook
    config = (stock_sglang_root / "srt/speculative/dspark_components/dspark_config.py").read_text()
    assert "DEFAULT_DSPARK_GAMMA = 7" in config


def test_installed_dspark_worker_shares_the_head(stock_sglang_root: Path) -> None:
    sg = read_sglang_install(stock_sglang_root, "test", dspark=True)
    assert sg.dspark_attaches_lm_head is True and sg.note is None
    classes = sg.dspark_draft_classes or {}
    assert classes["LingDSparkModel"] is False and classes["Qwen3DSparkModel"] is False
    assert classes["DeepseekV4ForCausalLMDSpark"] is None  # `uses_own_vocab_modules = _is_npu`
    assert sg.redirects_flashinfer_cache is True
    assert read_sglang_install(stock_sglang_root, "test").dspark_draft_classes is None  # only when asked


def _dspark_build(tmp_path: Path, root: Path, worker_edit: tuple[str, str] | None = None) -> Path:
    build = tmp_path / "sglang"
    for rel in ("srt/environ.py", "__init__.py", "srt/speculative/dspark_components/dspark_worker_v2.py"):
        (build / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, build / rel)
    (build / "srt/models").mkdir(parents=True)
    for model in root.glob("srt/models/*dspark*.py"):
        shutil.copyfile(model, build / "srt/models" / model.name)
    if worker_edit:
        worker = build / "srt/speculative/dspark_components/dspark_worker_v2.py"
        text = worker.read_text()
        assert worker_edit[0] in text
        worker.write_text(text.replace(worker_edit[0], worker_edit[1]))
    return build


def test_dspark_build_variants(tmp_path: Path, stock_sglang_root: Path) -> None:
    no_share = _dspark_build(
        tmp_path / "a", stock_sglang_root, ("lm_head=lm_head,", "lm_head_unused=lm_head,")
    )
    assert read_sglang_install(no_share, "t", dspark=True).dspark_attaches_lm_head is False
    own = _dspark_build(tmp_path / "b", stock_sglang_root)
    dspark_py = own / "srt/models/dspark.py"
    dspark_py.write_text(
        dspark_py.read_text().replace(
            "class LingDSparkModel(DSparkDraftModel):\n",
            "class LingDSparkModel(DSparkDraftModel):\n    uses_own_vocab_modules = True\n",
        )
    )
    classes = read_sglang_install(own, "t", dspark=True).dspark_draft_classes or {}
    assert classes["LingDSparkModel"] is True and classes["Qwen3DSparkModel"] is False
    (tmp_path / "c" / "sglang" / "srt").mkdir(parents=True)
    bare = read_sglang_install(tmp_path / "c" / "sglang", "t", dspark=True)
    assert bare.dspark_attaches_lm_head is None  # a build without DSpark says nothing


def test_mem_available(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text(
        "MemTotal:  127600748 kB\nMemFree:   1000 kB\nMemAvailable:   118566368 kB\n"
    )
    h = read_host(service_user=None, proc_root=proc, sys_root=tmp_path)
    assert h.mem_available_bytes == 118566368 * 1024 and h.mem_total_bytes == 127600748 * 1024
    (proc / "meminfo").write_text("MemTotal:  127600748 kB\nMemAvailable: lots kB\n")
    assert read_host(service_user=None, proc_root=proc, sys_root=tmp_path).mem_available_bytes is None


def _dist(site: Path, name: str, version: str) -> None:
    d = site / f"{name}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")


def _kernel(cache: Path, version: str, arch: str = "121a") -> Path:
    so = cache / version / arch / "cached_ops" / "fused_moe_120" / "fused_moe_120.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"\x7fELF")
    return so


def test_flashinfer_kernels_where_the_server_looks(tmp_path: Path) -> None:
    site, home = tmp_path / "site", tmp_path / "home"
    _dist(site, "flashinfer_python", "0.6.3")
    _dist(site, "flashinfer_cubin", "0.6.3")
    f = read_flashinfer({}, site_dirs=[site], home=home, sglang_redirects=True)
    assert f.python_version == "0.6.3" and f.cubin_version == "0.6.3" and f.kernels == []
    assert f.cache_dir == home / ".cache/sglang/.cache/flashinfer" and "SGLANG_CACHE_DIR" in f.cache_dir_rule
    plain = _kernel(home / ".cache/flashinfer", "0.6.3")  # precompiled with plain FlashInfer
    f = read_flashinfer({}, site_dirs=[site], home=home, sglang_redirects=True)
    assert f.kernels == [] and f.elsewhere == [plain]
    assert read_flashinfer({}, site_dirs=[site], home=home, sglang_redirects=False).kernels == [plain]
    served = _kernel(home / ".cache/sglang/.cache/flashinfer", "0.6.3")
    _kernel(home / ".cache/sglang/.cache/flashinfer", "0.6.3", arch="90a")  # another GPU family
    f = read_flashinfer({}, site_dirs=[site], home=home, sglang_redirects=True)
    assert f.kernels == [served]
    env = {"FLASHINFER_WORKSPACE_BASE": str(tmp_path / "ws"), "FLASHINFER_DISABLE_VERSION_CHECK": "1"}
    f = read_flashinfer(env, site_dirs=[site], home=home, sglang_redirects=True)
    assert f.kernels == [] and f.cache_dir == tmp_path / "ws/.cache/flashinfer" and f.version_check_disabled
    old = _kernel(tmp_path / "ws/.cache/flashinfer", "0.6.2")  # built by the previous FlashInfer
    assert old in read_flashinfer(env, site_dirs=[site], home=home, sglang_redirects=True).elsewhere


def test_flashinfer_aot_and_versions(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "flashinfer_python", "0.6.3")
    _dist(site, "flashinfer_cubin", "0.6.2")
    aot = site / "flashinfer/data/aot/fused_moe_120/fused_moe_120.so"
    aot.parent.mkdir(parents=True)
    aot.write_bytes(b"\x7fELF")
    f = read_flashinfer({}, site_dirs=[site], home=tmp_path, sglang_redirects=True)
    assert f.kernels == [aot] and f.cubin_version == "0.6.2"
    none = read_flashinfer({}, site_dirs=[tmp_path / "empty"], home=tmp_path, sglang_redirects=True)
    assert none.python_version is None and none.note and "not installed" in none.note


def _unit(tmp_path: Path, service: str) -> Path:
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nExecStart=/opt/venv/bin/python -m sglang.launch_server --model-path /m\n{service}"
    )
    return unit


@pytest.mark.parametrize(
    ("service", "budget", "counts"),
    [
        ("Type=notify\nTimeoutStartSec=5min\n", 300.0, True),
        ("Type=exec\nTimeoutStartSec=5min\n", 300.0, False),
        ("", 90.0, False),  # systemd's default, Type=simple
        ("ExecStartPost=/usr/bin/wait-ready\nTimeoutSec=1h 30s\n", 3630.0, True),
        ("Type=notify\nTimeoutStartSec=infinity\n", None, True),
        ("Type=oneshot\nTimeoutStartSec=0\n", None, True),
        ("Type=notify\nTimeoutStartSec=90\nTimeoutStartSec=20min\n", 1200.0, True),
    ],
)
def test_start_budget_from_unit(tmp_path: Path, service: str, budget: float | None, counts: bool) -> None:
    facts = from_unit(load_unit(_unit(tmp_path, service)))
    assert (facts.budget_s, facts.counts_load) == (budget, counts), facts.detail


def test_timespan_parser() -> None:
    assert parse_timespan("2min 30s", "u") == 150.0
    assert parse_timespan("1.5h", "u") == 5400.0
    assert parse_timespan("500ms", "u") == 0.5
    for bad in ("", "5 parsecs", "min", "-5s"):
        with pytest.raises(InputError):
            parse_timespan(bad, "u")


# humming/utils/device.py shapes, written for the test beside the real releases (test_humming_releases.py):
# the unguarded query of humming 0.1.0-0.1.11 (inclusionAI/humming#48), a try that catches the NVML error,
# an early return for sm_121 (as 0.1.12 does), and a launcher's shim appended to an unfixed file.
_UNGUARDED = """
import pynvml
def calculate_gpu_bandwidth(gpu_index=0):
    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
    try:
        bus = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
    except pynvml.NVMLError_FunctionNotFound:
        bus = 5120
    clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
    return clock * 2 * bus / 8 / 1000
"""
_CAUGHT = _UNGUARDED.replace(
    "    clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)\n",
    "    try:\n        clock = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)\n"
    "    except pynvml.NVMLError:\n        return 200.0\n",
)
_EARLY = _UNGUARDED.replace(
    "    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)\n",
    "    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)\n"
    "    if pynvml.nvmlDeviceGetCudaComputeCapability(handle) == (12, 1):\n        return 273.0\n",
)
_SHIM = (
    _UNGUARDED
    + """
_orig = calculate_gpu_bandwidth
def calculate_gpu_bandwidth(*a, **k):
    try:
        return _orig(*a, **k)
    except Exception:
        return 1000.0
"""
)


@pytest.mark.parametrize(
    ("source", "safe"),
    [
        (_UNGUARDED, False),
        (_CAUGHT, True),
        (_EARLY, True),
        (_SHIM, True),
        ("x = 1\n", True),  # no NVML query at all (humming 0.1.14 onwards)
        ("h = 1\nNVML_CLOCK_MEM = (\n", None),  # mentions the query, cannot be parsed
    ],
)
def test_humming_gb10_bandwidth_probe(tmp_path: Path, source: str, safe: bool | None) -> None:
    from validator.sources.host.humming import read_humming

    site = tmp_path / "site"
    _dist(site, "humming_kernels", "0.1.11")
    (site / "humming" / "utils").mkdir(parents=True)
    (site / "humming" / "__init__.py").write_text("")
    (site / "humming" / "utils" / "device.py").write_text(source)
    h = read_humming({"HOME": str(tmp_path)}, site_dirs=[site], service_user=None)
    assert h.installed and h.gb10_bandwidth_safe is safe


def test_sglang_reaches_hummings_bandwidth_probe(stock_sglang_root: Path) -> None:
    """The start-up path humming#48 crashes on: SGLang's humming MoE runner asks humming for its default
    tuning configs while it prepares the experts."""
    runner = (stock_sglang_root / "srt/layers/moe/moe_runner/humming.py").read_text()
    assert "HummingMethod.get_default_tuning_configs(" in runner


def test_start_budget_from_kubernetes(tmp_path: Path) -> None:
    from validator.sources.launch.start_budget import from_kubernetes

    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        "        - name: sglang\n          command: [python3, -m, sglang.launch_server]\n"
        "          startupProbe: {httpGet: {path: /ready, port: 30000}, periodSeconds: 10,\n"
        "                         failureThreshold: 30}\n"
        "        - name: sidecar\n          command: [spark-validate, serve]\n"
    )
    b = from_kubernetes(manifest)
    assert (b.budget_s, b.counts_load) == (300.0, True) and "startupProbe" in b.detail
    manifest.write_text(manifest.read_text().replace("startupProbe", "livenessProbe"))
    b = from_kubernetes(manifest)
    assert b.budget_s == 300.0 and "no startupProbe" in b.detail
    real = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes" / "deployment.yaml"
    b = from_kubernetes(real, container="sglang")
    assert b.budget_s is not None and b.budget_s >= 600  # the shipped manifest covers a cold start
    assert from_kubernetes(real).detail == b.detail  # the server container is told by its command
    with pytest.raises(InputError, match="no container 'nope' \\(containers: sglang, spark-validate\\)"):
        from_kubernetes(real, container="nope")


def test_log_reads_the_dspark_runner_line(tmp_path: Path) -> None:
    """The line dspark_worker_v2.py logs once the draft runner is built (l.279-292): the block it drafts."""
    from validator.sources.server.log import read_server_log

    log = tmp_path / "server.log"
    log.write_text(
        "[2026-12-01 10:00:00] server_args=ServerArgs(model_path='/m', speculative_algorithm='DSPARK')\n"
        "[2026-12-01 10:01:00] Initialized DSpark draft runner. attention_backend=flashinfer, "
        "model=LingDSparkModel, gamma=8, verify_num_draft_tokens=9, query_token_num=8, "
        "sample_from_anchor=True, mask_token_id=156895, markov_head=VanillaMarkov\n"
    )
    facts = read_server_log(log)
    assert (facts.dspark_gamma, facts.dspark_verify_tokens) == (8, 9)


def test_a_containers_draft_is_found_through_its_mounts(tmp_path: Path) -> None:
    """World10 F5: ``--speculative-draft-model-path /models/...`` in a container was read as a host path
    ("not a directory", so ``spec.dspark`` could not judge the ring) while ``--model-path`` went through the
    same ``-v``. SGLang opens both inside the container: the draft is the host's directory through the bind
    mount (the model's ``dspark/`` subfolder and a Hub id through the mounted cache alike), else unread,
    saying why (a volume, the image, a container started earlier)."""
    from validator.sources.host.dspark_draft import in_container
    from validator.sources.launch.docker_run import parse_docker_cmd

    write_draft(tmp_path / "models" / "draft")
    write_draft(tmp_path / "models" / "target" / "dspark")
    hub = tmp_path / "hf" / "hub" / "models--inclusionAI--Ling-3.0-flash-dspark"
    write_draft(hub / "snapshots" / COMMIT)
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text(COMMIT)
    spec = parse_docker_cmd(
        f"docker run -v {tmp_path}/models:/models:ro -v {tmp_path}/hf:/hf -e HF_HOME=/hf img python3", {}
    )
    found = in_container("/models/draft", "/models/target", spec, revision=None, env=spec.env)
    assert found.block_size == 8 and found.path == "/models/draft", found
    assert f"mounted from {tmp_path}/models" in found.located_by
    found = in_container(None, "/models/target", spec, revision=None, env=spec.env)
    assert found.block_size == 8 and found.path == "/models/target/dspark", found
    found = in_container("inclusionAI/Ling-3.0-flash-dspark", None, spec, revision=None, env=spec.env)
    assert found.block_size == 8 and found.config_path == hub / "snapshots" / COMMIT / "config.json"
    for draft, why in (
        ("/opt/draft", "inside the image"),
        ("draft", "relative to the container's working directory"),
        ("inclusionAI/other", "not in the Hugging Face cache"),
    ):
        found = in_container(draft, "/models/target", spec, revision=None, env=spec.env)
        assert found.config_path is None and found.note is not None and why in found.note, found
    execd = parse_docker_cmd("docker exec node1 python3", {})
    found = in_container("/models/draft", None, execd, revision=None, env={})
    assert found.config_path is None and "whose mounts are not visible" in str(found.note)


def test_a_relative_draft_is_the_servers_working_directorys_never_this_processs(tmp_path: Path) -> None:
    """Red team 21: a relative ``--speculative-draft-model-path ./draft`` (or the target's ``dspark/``
    beside a relative --model-path) was read from the directory preflight stands in, whatever the
    launch's working directory: a script's (its own directory, or one its cd computes) named another
    draft than the one judged. Read where the server starts; where that is known only at run time,
    nothing is read."""
    server, here = tmp_path / "server", tmp_path / "here"
    write_draft(server / "draft")
    write_draft(here / "draft")
    (here / "draft" / "config.json").write_text('{"architectures": ["Other"]}')  # preflight's own
    cwd = os.getcwd()
    os.chdir(here)
    try:
        f = read_dspark_draft("./draft", None, cwd=server)
        assert f.config_path == server / "draft" / "config.json" and f.block_size == 8
        unknown = read_dspark_draft("./draft", None, cwd_unknown="$(cat ~/where) runs at run time")
        assert (
            unknown.config_path is None
            and unknown.note is not None
            and "relative to the server's working directory" in unknown.note
        )
        assert read_dspark_draft(None, "m", cwd_unknown="why").config_path is None
    finally:
        os.chdir(cwd)
