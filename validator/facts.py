"""Facts: what the evidence sources established, typed per source.

Sources (``validator/sources/``) read the world and return one of these records; checks
(``validator/checks/``) read only these records, never files or sockets. That split keeps checks pure
and testable, and lets one check combine several sources (launch command, server, attestation, log)
and report disagreement between them.

A source that could not be read records why in ``Facts.errors[source]``; a source that does not apply
(no ``--model-dir`` given) is simply absent. Checks turn the first into ``error`` and the second into
``skip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validator.attestation_format import AttestationTrust

# Source names, as they appear in a check result's ``sources`` list.
LAUNCH = "launch"
ENV = "env"
SGLANG = "sglang"
HUMMING = "humming"
CHECKPOINT = "checkpoint"
HOST = "host"
SERVER = "server"
ATTESTATION = "attestation"
LOG = "log"
PROBE = "probe"
WEIGHTS = "weights_checker"
DSPARK_DRAFT = "dspark_draft"
FLASHINFER = "flashinfer"
DEPLOY = "deploy"


@dataclass
class LaunchFacts:
    """The server's command line, parsed against SGLang's real flag table (unresolved, like
    ``prepare_server_args``: defaults filled in, no model-specific resolution)."""

    origin: str  # "--launch-cmd", "unit:/etc/systemd/system/sglang.service", ...
    argv: list[str]  # the server arguments after the entry point (and after --config merging)
    entry: str  # "launch_server" (python -m sglang.launch_server) or "serve" (sglang serve)
    interpreter: str | None  # the python that will run the server, when the command names one
    args: dict[str, Any]  # argparse dest -> value, defaults included
    explicit: set[str]  # dests given on the command line or in --config
    env: dict[str, str]  # the environment the server process will see
    env_origin: dict[str, str] = field(default_factory=dict)  # var -> where it was set
    warnings: list[str] = field(default_factory=list)  # deprecated flags, an ignored --config=FILE, ...
    config_file: Path | None = None  # the --config file SGLang merges, when given
    # what a launcher script or container spec computes only at run time: argparse dest or environment
    # variable -> why; the checks that read one of these cannot be proven statically (error)
    unresolved: dict[str, str] = field(default_factory=dict)
    program: str | None = None  # argv[0] as written; None when an args-only file names no program
    command: list[str] = field(default_factory=list)  # program and its words, as exec'd (env prefix gone)
    interpreter_options: list[str] = field(default_factory=list)  # python's own flags (-I, -E, -s, -P...)
    working_directory: Path | None = None  # the server's cwd when known (unit WorkingDirectory=, launch)
    user: str | None = None  # the unit's User=: the account the server runs as


@dataclass
class ProgramFacts:
    """``launch.program``'s evidence: the launch command's program as the server's exec would find it,
    and where its interpreter, run with the server's flags, environment and working directory, finds
    ``sglang`` (by ``find_spec``, which executes nothing of the package)."""

    written: str | None  # argv[0] as written; None when only the server's arguments are known
    path: Path | None  # resolved as execvp would, with the server's PATH; None when it cannot run
    problem: str | None  # why the program cannot run (missing, not executable, no interpreter)
    interpreter: str | None  # the python that will import sglang
    interpreter_options: list[str] = field(default_factory=list)
    working_directory: Path | None = None  # where the interpreter was asked (the server's cwd)
    working_directory_known: bool = False  # False: an empty directory stood in for an unknown cwd
    sglang_root: Path | None = None  # where that interpreter finds sglang; None: not importable
    probe_error: str | None = None  # the interpreter could not be asked (cannot run, exited, timed out)
    on_server_host: bool = False  # `launch` and `--unit`: this host is the one the server runs on


@dataclass
class SGLangInstallFacts:
    """The SGLang build the launch command will run, read as files (never imported)."""

    root: Path | None  # the ``sglang`` package directory; None when not found
    located_by: str  # how it was found: "interpreter /opt/sglang/venv/bin/python", "--sglang-root DIR"
    version: str | None = None
    declares_fp8_lm_head: bool | None = None  # srt/environ.py declares SGLANG_ENABLE_FP8_LM_HEAD
    nextn_shares_lm_head: bool | None = None  # BailingMoeForCausalLMNextN.set_lm_head_from_target
    moe_runner_backends: list[str] | None = None  # choices of --moe-runner-backend
    declared_env: set[str] = field(default_factory=set)  # every SGLANG_* the build declares
    plugins: set[str] = field(default_factory=set)  # sglang.srt.plugins entry points installed beside it
    site_dirs: list[Path] = field(default_factory=list)  # where the server's interpreter finds distributions
    # SGLANG_* names (of those set but not declared in environ.py) that the package still reads directly
    referenced_env: set[str] | None = None
    # DSpark (srt/speculative/dspark_components/dspark_worker_v2.py): the worker hands the target's lm_head
    # module to the draft (attach_shared_modules) unless the draft class sets uses_own_vocab_modules
    dspark_attaches_lm_head: bool | None = None
    dspark_draft_classes: dict[str, bool | None] | None = None  # class -> uses_own_vocab_modules
    # whether importing sglang points FLASHINFER_WORKSPACE_BASE at SGLANG_CACHE_DIR (sglang/__init__.py)
    redirects_flashinfer_cache: bool | None = None
    note: str | None = None  # why something could not be read


@dataclass
class HummingFacts:
    installed: bool
    version: str | None
    cache_dir: Path
    cache_writable: bool
    tmp_dir: Path
    tmp_writable: bool
    cached_kernels: int  # compiled cubins in the cache; 0 means JIT on the first requests
    service_user: str | None = None
    note: str | None = None
    gb10_bandwidth_safe: bool | None = None  # calculate_gpu_bandwidth survives GB10's NVML (humming#48)


@dataclass
class TensorInfo:
    dtype: str  # safetensors dtype string: "BF16", "F8_E4M3", "U8", ...
    shape: list[int]
    file: str


@dataclass
class CheckpointFacts:
    model_dir: Path
    architectures: list[str]
    config: dict[str, Any]  # config.json as loaded
    num_nextn_predict_layers: int | None
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    quant_method: str | None
    modules_to_not_convert: list[str] | None
    routed_experts_mxfp4: bool | None  # from quantization_config (and tensor dtypes when present)
    tensors: dict[str, TensorInfo]  # only the tensors the checks need, by name
    tensor_count: int
    nextn_tensor_count: int  # weights of the NEXTN (MTP) layer(s)
    files: list[str] = field(default_factory=list)


@dataclass
class DSparkDraftFacts:
    """The DSpark draft checkpoint's ``config.json``, read with SGLang 0.5.23's precedence
    (``dspark_config.parse_dspark_draft_config``)."""

    path: str  # --speculative-draft-model-path as given (or as SGLang would default it)
    config_path: Path | None  # the config.json read; None when the draft could not be found locally
    architectures: list[str] = field(default_factory=list)
    block_size: int | None = None  # gamma: drafted tokens per verify round
    block_size_key: str | None = None  # where it came from: dspark_block_size, dflash_config.block_size, ...
    markov_rank: int | None = None  # DSpark requires > 0
    mask_token_id: int | None = None  # DSpark requires it
    num_hidden_layers: int | None = None
    located_by: str = ""  # "local directory", "Hugging Face cache (refs/main)", "model_path/dspark"
    note: str | None = None  # why it could not be read


@dataclass
class FlashInferFacts:
    """FlashInfer as the server's interpreter will load it (dist-info metadata, caches), never imported."""

    python_version: str | None  # flashinfer-python
    cubin_version: str | None  # flashinfer-cubin (None: not installed)
    jit_cache_version: str | None  # flashinfer-jit-cache (None: not installed)
    cache_dir: Path  # <FLASHINFER_WORKSPACE_BASE>/.cache/flashinfer, as the server resolves it
    cache_dir_rule: str  # how cache_dir was derived (env, SGLang's redirect, home)
    kernels: list[Path] = field(default_factory=list)  # precompiled fused_moe_120 .so usable by the server
    elsewhere: list[Path] = field(default_factory=list)  # built, but where this server does not look
    version_check_disabled: bool = False  # FLASHINFER_DISABLE_VERSION_CHECK set in the server's env
    note: str | None = None


@dataclass
class StartBudgetFacts:
    """How long the supervisor lets the server start before it kills it."""

    origin: str  # "unit:/etc/systemd/system/sglang.service", "kubernetes:deploy.yaml"
    budget_s: float | None  # None: unlimited (TimeoutStartSec=infinity / 0)
    counts_load: bool  # whether the model load falls inside the budget (Type=notify/forking/oneshot)
    detail: str  # "TimeoutStartSec=90s (Type=notify)"


@dataclass
class HostFacts:
    machine: str  # uname -m
    mem_total_bytes: int | None
    gpu_name: str | None  # e.g. "NVIDIA GB10", when it can be read without CUDA
    is_dgx_spark: bool | None
    service_user: str | None
    home: Path | None
    mem_available_bytes: int | None = None  # /proc/meminfo MemAvailable (NVML reports nothing on GB10)


@dataclass
class ServerFacts:
    """What a live server says about itself over HTTP (secrets already redacted)."""

    url: str
    healthy: bool
    server_info: dict[str, Any]
    model_info: dict[str, Any] | None = None
    metrics_text: str | None = None
    server_info_endpoint: str = "/server_info"
    weights_checksums: dict[str, str] | None = None  # from /weights_checker, when asked for


@dataclass
class Facts:
    launch: LaunchFacts | None = None
    sglang: SGLangInstallFacts | None = None
    program: ProgramFacts | None = None
    humming: HummingFacts | None = None
    checkpoint: CheckpointFacts | None = None
    host: HostFacts | None = None
    server: ServerFacts | None = None
    attestation: dict[str, Any] | None = None  # validated attestation document, only once trusted
    attestation_trust: AttestationTrust | None = None  # what attestation.trust judges (read, maybe untrusted)
    log: Any | None = None  # validator.sources.server_log.LogFacts
    probe: Any | None = None  # validator.report.ProbeResult
    dspark_draft: DSparkDraftFacts | None = None
    flashinfer: FlashInferFacts | None = None
    start_budget: StartBudgetFacts | None = None
    errors: dict[str, str] = field(default_factory=dict)  # source -> why it could not be read
    mode: str = "preflight"

    def lookup(self, path: str) -> Any:
        """Resolve a dotted path (``launch.args.mem_fraction_static``) for declarative rules.
        Raises KeyError when any step is missing."""
        head, _, rest = path.partition(".")
        obj: Any = getattr(self, head, None)
        if obj is None:
            raise KeyError(path)
        for part in rest.split(".") if rest else []:
            if isinstance(obj, dict):
                if part not in obj:
                    raise KeyError(path)
                obj = obj[part]
            elif hasattr(obj, part):
                obj = getattr(obj, part)
            else:
                raise KeyError(path)
        return obj
