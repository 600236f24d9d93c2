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


@dataclass
class SGLangInstallFacts:
    """The SGLang build the launch command will run, read as files (never imported)."""

    root: Path | None  # the ``sglang`` package directory; None when not found
    located_by: str  # how it was found: "interpreter /opt/sglang/venv/bin/python", "current environment"
    version: str | None = None
    declares_fp8_lm_head: bool | None = None  # srt/environ.py declares SGLANG_ENABLE_FP8_LM_HEAD
    nextn_shares_lm_head: bool | None = None  # BailingMoeForCausalLMNextN.set_lm_head_from_target
    moe_runner_backends: list[str] | None = None  # choices of --moe-runner-backend
    declared_env: set[str] = field(default_factory=set)  # every SGLANG_* the build declares
    plugins: set[str] = field(default_factory=set)  # sglang.srt.plugins entry points installed beside it
    site_dirs: list[Path] = field(default_factory=list)  # where the server's interpreter finds distributions
    # SGLANG_* names (of those set but not declared in environ.py) that the package still reads directly
    referenced_env: set[str] | None = None
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
class HostFacts:
    machine: str  # uname -m
    mem_total_bytes: int | None
    gpu_name: str | None  # e.g. "NVIDIA GB10", when it can be read without CUDA
    is_dgx_spark: bool | None
    service_user: str | None
    home: Path | None


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
    humming: HummingFacts | None = None
    checkpoint: CheckpointFacts | None = None
    host: HostFacts | None = None
    server: ServerFacts | None = None
    attestation: dict[str, Any] | None = None  # validated attestation document
    log: Any | None = None  # validator.sources.server_log.LogFacts
    probe: Any | None = None  # validator.report.ProbeResult
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
