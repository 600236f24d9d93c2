"""Facts: what the evidence sources established, typed per source.

Sources (``validator/sources/``) read the world into these records; checks read only these records, never
files or sockets, so checks stay pure and one check can compare several sources. A source that could not
be read records why in ``Facts.errors[source]`` (the check is ``error``); one that does not apply is absent
(``skip``). The typed view of the settings (``ServerArgs``) is ``validator.server_settings``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

from validator.server_settings import ServerArgs

if TYPE_CHECKING:  # typing only: the records live with their schema (and preflight never needs them)
    from validator.attestation.schema import Attestation
    from validator.attestation.trust import AttestationTrust
    from validator.sources.host.process import ProcessFacts

Mode = Literal["preflight", "check"]  # preflight: before start, static; check: against a live server

# What JSON (or a parsed command line) can hold. Raw documents keep this type; checks read typed views.
JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"

# Source names, as they appear in a check result's ``sources`` list.
LAUNCH = "launch"
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
PROCESS = "process"  # the running server process, from /proc
DECLARED = "declared"  # the unit, script, Compose file or command given beside a running process
NODE = "node"  # this node of a multi-node launch (sources/host/node.py)
METRICS = "metrics"  # the server's own /metrics (its production acceptance)
PROGRESS = "progress"  # whether the server completes work (/metrics across reads, or a request of ours)

_WHERE_IT_RUNS = "run preflight where the server runs"

# Which input lets a check whose evidence came from this source run (``validator.coverage``: the first
# source of an error wins), by the source's name, declared beside the names so that a new source states
# its input here; a source that no check names has none. Words only: the outputs read them.
INPUT_FOR_SOURCE: dict[str, str] = {
    LAUNCH: "the full launch command (--launch-cmd, --unit, --script, or `launch -- CMD`)",
    SGLANG: f"{_WHERE_IT_RUNS} (its interpreter must import sglang), or --sglang-root",
    HUMMING: f"{_WHERE_IT_RUNS}, as or with --service-user for the server's account",
    HOST: "run preflight on the server's host",
    DSPARK_DRAFT: "a local --speculative-draft-model-path",
    FLASHINFER: _WHERE_IT_RUNS,
    CHECKPOINT: "--model-dir (or a local --model-path)",
    SERVER: "a reachable, ready server (--url, --wait, --api-key-file)",
    ATTESTATION: "--attestation (the spark-validate plugin's file, written by the running server)",
    LOG: "--log (the file the running server writes) or --log journal:UNIT",
    PROGRESS: (
        "a ready server with --enable-metrics and traffic, its --log, or a full check (one bounded request)"
    ),
    WEIGHTS: "--weights-checker on a server that serves /weights_checker",
    PROBE: "a ready server with speculative decoding on (the acceptance probe)",
}


@dataclass
class LaunchFacts:
    """The server's command line, parsed against SGLang's real flag table (unresolved, like
    ``prepare_server_args``: defaults filled in, no model-specific resolution)."""

    origin: str  # "--launch-cmd", "unit:/etc/systemd/system/sglang.service", ...
    argv: list[str]  # the server arguments after the entry point (and after --config merging)
    entry: str  # "launch_server" (python -m sglang.launch_server) or "serve" (sglang serve)
    interpreter: str | None  # the python that will run the server, when the command names one
    args: dict[str, JsonValue]  # argparse dest -> value, defaults included (declarative rules read these)
    explicit: set[str]  # dests given on the command line or in --config
    env: dict[str, str]  # the environment the server process will see
    env_origin: dict[str, str] = field(default_factory=dict)  # var -> where it was set
    warnings: list[str] = field(default_factory=list)  # deprecated flags, an ignored --config=FILE, ...
    # those of ``warnings`` the flag table's parse gave (the rest are the readers'): a table that an image's
    # SGLang of unread version may not share makes only these unproven
    table_warnings: list[str] = field(default_factory=list)
    config_file: Path | None = None  # the --config file SGLang merges, when given
    # what a launcher script or container spec computes only at run time: argparse dest or environment
    # variable -> why; the checks that read one of these cannot be proven statically (error). Two keys
    # stand for more: "*" (a sourced file that would set variables nobody knows) and ENVIRONMENT_UNKNOWN
    # (a running server's environment could not be read: every variable)
    unresolved: dict[str, str] = field(default_factory=dict)
    unresolved_at: dict[str, str] = field(default_factory=dict)  # name -> where (file:line); else origin
    # variables the launch itself sets over an environment otherwise unknown (``docker exec -e``, an env
    # prefix of its command): known where ENVIRONMENT_UNKNOWN leaves every other variable unknown
    env_set_over: set[str] = field(default_factory=set)
    program: str | None = None  # argv[0] as written; None when an args-only file names no program
    command: list[str] = field(default_factory=list)  # program and its words, as exec'd (env prefix gone)
    interpreter_options: list[str] = field(default_factory=list)  # python's own flags (-I, -E, -s, -P...)
    working_directory: Path | None = None  # the server's cwd when known (unit WorkingDirectory=, launch)
    user: str | None = None  # the unit's User=: the account the server runs as
    consumed_env: set[str] = field(default_factory=set)  # variables expanded into the command line itself
    # variables a launcher script set without exporting them (they do not reach the server): name -> why
    shell_only: dict[str, str] = field(default_factory=dict)
    # the other users whose files (or process) gave these words: UID -> (which, their groups); what the
    # launch names is read only as far as they could read it (``trusted_files.read_as``)
    named_by: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    @cached_property
    def settings(self) -> ServerArgs:
        """The settings the builtin checks read, typed."""
        return ServerArgs.from_mapping(self.args)


ENVIRONMENT_UNKNOWN = "environment"  # LaunchFacts.unresolved: no variable of the server's is known

PLUGIN_SHARE_ENV = "SPARK_VALIDATE_SHARE_LM_HEAD"  # the switch of the plugin's LM-head remedy


@dataclass(frozen=True)
class PluginState:
    """spark-validate's SGLang plugin as the server will run it (``validator.sources.sglang.plugin_env``)."""

    installed: bool  # the entry point is installed where the server's interpreter looks
    loads: bool  # SGLang loads it and it registers its hooks
    remedy: bool  # ...and its LM-head remedy is switched on
    why: str  # one phrase: what decided it (for messages)


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
    # the problem is this reader's, not the program's: a path it may not look at, an interpreter it may not
    # run as its owner (never run with more privilege): the check is not proven, never failed
    not_provable: bool = False


@dataclass
class SGLangInstallFacts:
    """The SGLang build the launch command will run, read as files (never imported)."""

    root: Path | None  # the ``sglang`` package directory; None when not found
    located_by: str  # how it was found: "interpreter /opt/sglang/venv/bin/python", "--sglang-root DIR"
    version: str | None = None
    # every class of the draft model files (srt/models/*nextn*.py, *mtp*.py, *eagle*.py) -> whether it
    # defines set_lm_head_from_target, taking the target's LM-head module (None: its file does not parse)
    draft_share_hook: dict[str, bool | None] = field(default_factory=dict)
    moe_runner_backends: list[str] | None = None  # choices of --moe-runner-backend
    # what makes the build's worker skip set_lm_head_from_target (the condition around its call, 0.5.23's
    # init_lm_head): server argument -> the algorithms whose worker ignores it (--speculative-token-map,
    # but not under EAGLE3), and the draft attributes (hot_token_id); None: no worker call was read
    share_skipped_by: dict[str, list[str]] | None = None
    share_skipped_by_draft: list[str] | None = None
    draft_sets: dict[str, list[str]] = field(default_factory=dict)  # draft class -> those it gives a value
    declared_env: set[str] = field(default_factory=set)  # every SGLANG_* the build declares
    # every variable srt/environ.py declares (class Envs fields, deprecated_name aliases, _DEPRECATED_ENVS)
    # or honours; None: environ.py could not be read
    environ_declares: set[str] | None = None
    plugins: set[str] = field(default_factory=set)  # sglang.srt.plugins entry points installed beside it
    site_dirs: list[Path] = field(default_factory=list)  # where the server's interpreter finds distributions
    # SGLANG_* names (of those set but not declared in environ.py) that the package still reads directly;
    # None: not asked, or the sources were not read whole (env.undeclared is then error for those names)
    referenced_env: set[str] | None = None
    # DSpark (srt/speculative/dspark_components/dspark_worker_v2.py): the worker hands the target's lm_head
    # module to the draft (attach_shared_modules) unless the draft class sets uses_own_vocab_modules
    dspark_attaches_lm_head: bool | None = None
    dspark_draft_classes: dict[str, bool | None] | None = None  # class -> uses_own_vocab_modules
    # the build knows DSPARK at all (the worker file, or a DSPARK member of SpeculativeAlgorithm)
    dspark_supported: bool | None = None
    # whether importing sglang points FLASHINFER_WORKSPACE_BASE at SGLANG_CACHE_DIR (sglang/__init__.py)
    redirects_flashinfer_cache: bool | None = None
    # --tool-call-parser NAME -> its detector class and the classes it extends, nearest first, as far as
    # srt/function_call/ defines them (read only for the names the launch and the pack use; None: not read)
    tool_call_detectors: dict[str, tuple[str, ...]] | None = None
    # each of those classes -> what it defines itself (class attributes, methods, self.X set in __init__)
    # and its docstring's first paragraph
    detector_members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    detector_docs: dict[str, str] = field(default_factory=dict)
    note: str | None = None  # why something could not be read
    # --sglang-root named this tree, but the launch command's interpreter imports another SGLang: the
    # tree was not read (its files say nothing about the server); launch.program reports the disagreement
    disputed_root: Path | None = None
    # the build a program standing in for SGLang names (it runs instead of these files): the fleet's
    # build hash is its, not the files'
    build_id: str | None = None

    def declares(self, variable: str) -> bool | None:
        """Whether the build reads ``variable`` through srt/environ.py (an undeclared one it ignores
        silently); None when environ.py was not read."""
        return None if self.environ_declares is None else variable in self.environ_declares


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
    gb10_bandwidth_safe: bool | None = None  # no unguarded NVML memory-clock query (humming#48)
    gb10_bandwidth_detail: str | None = None  # where the code showed it (file:line, guard)


@dataclass
class TensorInfo:
    dtype: str  # safetensors dtype string: "BF16", "F8_E4M3", "U8", ...
    shape: list[int]
    file: str


@dataclass
class CheckpointFacts:
    model_dir: Path
    architectures: list[str]
    config: dict[str, JsonValue]  # config.json as loaded
    num_nextn_predict_layers: int | None
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    quant_method: str | None
    modules_to_not_convert: list[str] | None
    routed_experts_mxfp4: bool | None  # from quantization_config (and tensor dtypes when present)
    tensors: dict[str, TensorInfo]  # only the tensors the checks need, by name
    tensor_count: int
    # weights of the NEXTN (MTP) layer(s); None: no SGLang loader layout is known for the architecture
    nextn_tensor_count: int | None
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
    # the draft's shape: it runs on the target's embedding and LM head, so both must be the target's
    vocab_size: int | None = None
    hidden_size: int | None = None
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
    # what the installed release's flashinfer/jit/env.py (``_get_cubin_dir``) does with a flashinfer-cubin
    # of another version: "raises" at import (0.6.x), "ignored" with a warning and cubins downloaded on
    # demand into <cache_dir>/cubins (0.7.x); None: the file could not be read
    cubin_mismatch: str | None = None
    # a flashinfer-jit-cache the release does not accept (its version): "raises" at import (0.6.x),
    # "ignored" and the kernels JIT-compiled (0.7.x), "unknown" (env.py unreadable); None: none refused
    jit_cache_mismatch: str | None = None
    note: str | None = None


@dataclass
class NodeFacts:
    """One node of a (multi-node) launch: the labels it is known by in a fleet and the facts every node
    of its cluster must share (``validator.sources.host.node``)."""

    cluster: str  # --cluster / $SPARK_VALIDATE_CLUSTER, else the --dist-init-addr all ranks share
    node: str  # --node / $SPARK_VALIDATE_NODE, else the host name
    role: str  # "head" (rank 0, serves HTTP), "worker", or "single" (one node)
    node_rank: int
    nnodes: int
    pack: str
    args_hash: str
    build_hash: str
    nccl_hash: str  # "none": no process of the server has NCCL mapped
    nccl_path: str | None = None
    dist_init_addr: str | None = None
    env_known: bool = True  # the server's environment was readable
    host_ip: str | None = None  # $SGLANG_HOST_IP
    nccl_ifname: str | None = None  # from $NCCL_SOCKET_IFNAME
    gloo_ifname: str | None = None  # from $GLOO_SOCKET_IFNAME
    gid_index: str | None = None  # $NCCL_IB_GID_INDEX: a fixed RDMA GID index (not portable across nodes)
    interface: str = "unknown"  # the interface SGLANG_HOST_IP is on
    interface_kind: str = "unknown"  # loopback, wifi, connectx, ethernet, missing
    dist_interface: str | None = None  # the interface the --dist-init-addr host is on or reached through
    arg_hashes: dict[str, str] = field(default_factory=dict)  # flag -> hash of its value (args_hash's parts)

    def labels(self) -> dict[str, str]:
        """The fleet labels every metric of this node's sidecar carries."""
        return {
            "cluster": self.cluster,
            "node": self.node,
            "role": self.role,
            "node_rank": str(self.node_rank),
            "pack": self.pack,
        }


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


# An acceptance length this close to 1.0 is "nothing accepted" (the gauge prints 1.00 then).
NOTHING_ACCEPTED = 1.0 + 1e-6
# Verify rounds a lifetime ratio needs to be proof: a working draft (accept rate 0.5 or more) accepting
# nothing in every one of 64 rounds has odds below 1e-19.
LIFETIME_MIN_VERIFY = 64


@dataclass(frozen=True)
class MetricsReading:
    """One parse of ``/metrics``: the sums and series this project reads, None where a family is absent."""

    accept_lengths: tuple[float, ...]  # one value per ``sglang:spec_accept_length`` series (0 = no interval)
    accept_rate: float | None
    generation_tokens: float | None  # summed over every label set
    verify_calls: float | None
    num_draft_tokens: float | None
    read_at: float = field(default_factory=time.monotonic)
    # work in flight and work done, for ``server.progress`` (None where the family is absent)
    running_reqs: float | None = None  # sglang:num_running_reqs, summed over ranks
    queue_reqs: float | None = None  # sglang:num_queue_reqs
    itl_observations: float | None = None  # sglang:inter_token_latency_seconds_count: grows per chunk
    requests_total: float | None = None  # sglang:num_requests_total: grows per finished request

    @property
    def in_flight(self) -> float | None:
        """Requests running or queued, as the scheduler last said (None: neither gauge served)."""
        if self.running_reqs is None and self.queue_reqs is None:
            return None
        return (self.running_reqs or 0.0) + (self.queue_reqs or 0.0)

    @property
    def work_done(self) -> tuple[float | None, ...]:
        """The counters that grow while the server completes work: tokens at a finish, stream chunks
        while decoding (a non-streamed request is forwarded every 50 tokens too), finished requests."""
        return (self.generation_tokens, self.itl_observations, self.requests_total)

    @property
    def accept_length(self) -> float | None:
        """The mean over the series that have measured an interval (a 0 is SGLang's "none yet")."""
        measured = [v for v in self.accept_lengths if v > 0]
        return sum(measured) / len(measured) if measured else None


class Progress(Enum):
    """What the evidence says of the server's work: advancing (work was completed since the previous
    look), stalled (work waits and none completes), idle (nothing asked of it), unknown."""

    ADVANCING = "advancing"
    STALLED = "stalled"
    IDLE = "idle"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProgressFacts:
    """Whether the server completes work, and from what: its ``/metrics`` across two reads, its log's
    batch lines, or (idle or without either) a bounded request of our own
    (``validator.sources.server.progress``)."""

    state: Progress
    source: str  # "metrics", "log" or "request"
    detail: str  # one line for the report
    stalled_for_s: float | None = None  # how long work has waited with nothing completed
    in_flight: float | None = None  # requests running or queued, as the scheduler last said
    request_tokens: int | None = None  # tokens our own request got (None: none was sent)


@dataclass(frozen=True)
class ServerMetricsFacts:
    """What the server's own metrics say now, for the checks and the report."""

    reading: MetricsReading | None  # None when /metrics could not be read (``note`` says why)
    note: str | None = None  # why there is no reading, or why decoding is not proven
    decoding: bool = False  # a generation counter grew since the previous reading (same process)
    tokens_since: float | None = None  # generated tokens between the two readings
    window_accept_length: float | None = None  # generated tokens / verify calls between them
    progress: Progress = Progress.UNKNOWN  # work completed between reads, or waiting with none completed
    stalled_for_s: float | None = None  # since the reading from which nothing was completed (work waiting)

    @property
    def accept_length(self) -> float | None:
        return self.reading.accept_length if self.reading is not None else None

    @property
    def lifetime_accept_length(self) -> float | None:
        """Tokens generated per verify round over the server's whole life (its two counters, one reading);
        None under ``LIFETIME_MIN_VERIFY`` rounds, too few to say anything for certain."""
        r = self.reading
        if r is None or r.generation_tokens is None or r.verify_calls is None:
            return None
        if r.verify_calls < LIFETIME_MIN_VERIFY:
            return None
        return r.generation_tokens / r.verify_calls

    @property
    def lifetime_collapsed(self) -> bool:
        """One token per verify round over the server's life, the gauge at 1.00 too: every round accepted
        nothing, which a working draft cannot do over that many rounds. One reading proves it: the counters
        only grow within a process, so they are the server's whole history, not a stale figure."""
        al, life = self.accept_length, self.lifetime_accept_length
        return al is not None and al <= NOTHING_ACCEPTED and life is not None and life <= NOTHING_ACCEPTED

    @property
    def collapsed(self) -> bool:
        """The server's own gauge says nothing is accepted, while decoding is proven (between two readings,
        or over its whole life by its counters): the broken-draft signature, on production traffic."""
        al = self.accept_length
        return (self.decoding and al is not None and al <= NOTHING_ACCEPTED) or self.lifetime_collapsed

    def evidence(self) -> dict[str, JsonValue]:
        """The reading as a check's evidence (``spec.accept_length`` adds it to its own)."""
        ev: dict[str, JsonValue] = {"server_accept_length": _round3(self.accept_length)}
        if self.reading is not None:
            ev["server_accept_length_series"] = len(self.reading.accept_lengths)
            ev["server_decoding"] = self.decoding
            if self.tokens_since is not None:
                ev["server_tokens_since_last_read"] = self.tokens_since
            if self.window_accept_length is not None:
                ev["server_window_accept_length"] = _round3(self.window_accept_length)
            if self.reading.verify_calls is not None:
                ev["server_verify_calls_total"] = self.reading.verify_calls
                ev["server_generation_tokens_total"] = self.reading.generation_tokens
                ev["server_lifetime_accept_length"] = _round3(self.lifetime_accept_length)
        if self.note:
            ev["server_metrics_note"] = self.note
        return ev


def _round3(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass
class ServerFacts:
    """What a live server says about itself over HTTP (secrets already redacted)."""

    url: str
    healthy: bool
    server_info: dict[str, JsonValue]  # the raw document (declarative rules read it)
    model_info: dict[str, JsonValue] | None = None
    metrics: ServerMetricsFacts | None = None  # /metrics read as evidence (None: not read in this run)
    server_info_endpoint: str = "/server_info"
    weights_checksums: dict[str, str] | None = None  # from /weights_checker, when asked for
    listener: tuple[int, int] | None = None  # (PID, /proc starttime) listening on a loopback URL's port

    @cached_property
    def settings(self) -> ServerArgs:
        """The resolved settings the builtin checks read, typed."""
        return ServerArgs.from_mapping(self.server_info)


# Logged exactly once per start by an SGLang build whose online FP8 LM head is active.
FP8_HEAD_LINE = "Online FP8 quantization enabled for lm_head."

# ``--log journal:UNIT``: the server's log is the unit's current invocation in the systemd journal.
JOURNAL_PREFIX = "journal:"


@dataclass
class DecodeSample:
    """One ``Decode batch ... accept len: X, accept rate: Y ... gen throughput (token/s): Z`` line."""

    accept_len: float
    accept_rate: float | None  # builds that log only ``accept len`` have none
    gen_throughput: float | None
    line: int  # where it was read: the byte offset in a file, the entry number in the journal


@dataclass(frozen=True)
class BatchLine:
    """The current start's last ``Decode batch`` / ``Prefill batch`` line and how long ago it was written, as
    far as the reader can prove: ``quiet_s`` a lower bound, ``within_s`` an upper bound (None where it cannot
    be bounded: a line first read from a file that has grown since; its stamps are the server's zone)."""

    kind: str  # "decode" or "prefill"
    running: int | None  # ``#running-req`` (None: the build's line has no such field)
    queued: int | None  # ``#queue-req``
    quiet_s: float
    within_s: float | None
    line: int  # where it was read: the byte offset in a file, the entry number in the journal


@dataclass
class LogFacts:
    """What the server log says about the current server start (``validator.sources.server.log``)."""

    path: str  # the file, or "journal:UNIT"
    runs: int = 0  # server starts (``server_args=`` lines) read; a reader skips starts before the last
    run_start_line: int | None = None  # where the current start's ``server_args=`` was read; None: none
    lines_total: int = 0  # lines read
    server_args: dict[str, object] | None = None  # the last start's resolved args (Python literals), redacted
    fp8_lm_head_lines: int = 0
    humming_prepare_lines: int = 0
    humming_indexed_gemm_lines: int = 0
    flashinfer_expert_lines: int = 0
    trtllm_expert_lines: int = 0
    marlin_expert_lines: int = 0
    flashinfer_override: bool = False  # SGLang's own override message: ``auto`` became flashinfer_mxfp4
    # a MoE layer's runner backend as the layer reports it (FlashInfer's deferred-finalize line): backend ->
    # lines; evidence of the backend in effect, not of how it was chosen
    layer_backend_lines: dict[str, int] = field(default_factory=dict)
    loaded_models: list[str] = field(default_factory=list)  # ``Load weight end ... type=`` in order
    draft_graph_begin: int = 0
    # DSpark's worker at start (dspark_worker_v2.py l.279-292): "Initialized DSpark draft runner. ...,
    # model=<class>, gamma=G, verify_num_draft_tokens=N, ..."
    dspark_gamma: int | None = None
    dspark_verify_tokens: int | None = None
    decode_samples: list[DecodeSample] = field(default_factory=list)  # the last MAX_SAMPLES
    decode_sample_count: int = 0
    last_batch: BatchLine | None = None  # the scheduler's last batch line in this start (None: none yet)
    ready: bool = False
    # why this start died before it was ready, as the log says: the exception the scheduler's traceback
    # ended with (or SGLang's "a child failed" line); None while it is starting, and once it is ready
    start_failure: str | None = None
    # why this start died after it was ready (the exception that ended a component's traceback, or the
    # launcher's "a child failed"): the server that was running is dead
    crash: str | None = None
    # how it was read (evidence for server.log)
    generation: int = 0  # starts seen by this reader since it opened; a new start increments it
    bytes_read: int = 0
    bytes_skipped: int = 0  # not parsed: before the last start, or the middle of an oversized region
    truncations: int = 0  # the file shrank under the reader (logrotate copytruncate)
    rotations: int = 0  # a new file appeared at the path (logrotate create)
    note: str | None = None  # a condition of the source now (file gone after rotation, ...)
    stale: str | None = None  # why the current start is not the running server's (a restart seen)

    @property
    def head_dtype_known(self) -> bool:
        """Whether the log can tell the LM head's dtype: SGLang logs the FP8-head line while the target's
        weights load, so its absence says "not FP8" only once a weight load has ended in this start (a log
        cut, or read, before that says nothing of the head)."""
        return self.fp8_lm_head_lines > 0 or bool(self.loaded_models)

    @property
    def mean_accept_len(self) -> float | None:
        s = self.decode_samples
        return sum(x.accept_len for x in s) / len(s) if s else None

    def unusable(self) -> str | None:
        """Why these facts are no evidence about the running server, or None when they are."""
        if self.stale:
            return f"{self.path}: {self.stale}"
        if self.run_start_line is None and self.path.startswith(JOURNAL_PREFIX):
            return (
                f"{self.path}: the unit's current invocation has logged no server start (no server_args= "
                f"line in {self.lines_total} lines): it is no evidence about the running server"
            )
        if self.run_start_line is None:
            what = (
                "is empty"
                if self.bytes_read == 0 and self.lines_total == 0
                else f"holds no server start (no server_args= line in {self.lines_total} lines read)"
            )
            return (
                f"{self.path}: {what}: the log was truncated, rotated or is not this server's, so it is "
                "no evidence about the running server"
            )
        return None


@dataclass(kw_only=True)
class ProbeResult:
    """What the acceptance probe measured (contract: `probe` in `check` mode)."""

    accept_length: float | None
    accept_rate: float | None
    requests: int
    completion_tokens: int
    verify_ct: int
    tpot_ms: float | None
    ttft_ms: float | None
    accept_length_ci: tuple[float, float] | None = None
    accept_length_reported: float | None = None  # SGLang's completion_tokens / spec_verify_ct
    decided_by: str | None = None  # why the sequential rule stopped, for people
    # The sequential rule's verdict, for checks (not in the JSON report: decided_by says it there).
    decision: Literal["pass", "fail", "undecided"] = field(default="undecided", metadata={"exclude": True})
    wall_s: float | None = None
    problems: list[str] = field(default_factory=list)  # degenerate output and the like
    # what the replies lacked that a reading needed (a build's schema, never a verdict on the text)
    missing_fields: list[str] = field(default_factory=list)


@dataclass
class Facts:
    launch: LaunchFacts | None = None
    sglang: SGLangInstallFacts | None = None
    program: ProgramFacts | None = None
    plugin: PluginState | None = None  # the plugin and its remedy, as the server's environment decides
    humming: HummingFacts | None = None
    checkpoint: CheckpointFacts | None = None
    host: HostFacts | None = None
    server: ServerFacts | None = None
    attestation: Attestation | None = None  # validated, and only once trusted (attestation.trust)
    attestation_trust: AttestationTrust | None = None  # what attestation.trust judges (read, maybe untrusted)
    log: LogFacts | None = None
    probe: ProbeResult | None = None
    progress: ProgressFacts | None = None  # whether the server completes work (live only)
    dspark_draft: DSparkDraftFacts | None = None
    flashinfer: FlashInferFacts | None = None
    start_budget: StartBudgetFacts | None = None
    process: ProcessFacts | None = None  # the running server whose argv and environment are judged
    declared: LaunchFacts | None = None  # what a unit/script/command given beside it declares (drift)
    # the checks' outcomes on the declared launch instead of the running one: check id -> status
    declared_outcomes: dict[str, str] | None = None
    drift: list[str] | None = None  # what differs between the declaration and the running server
    node: NodeFacts | None = None  # this node of a multi-node launch (running servers only)
    errors: dict[str, str] = field(default_factory=dict)  # source -> why it could not be read
    mode: Mode = "preflight"

    def lookup(self, path: str) -> object:
        """Resolve a dotted path (``launch.args.mem_fraction_static``) for declarative rules.
        Raises KeyError when any step is missing."""
        head, _, rest = path.partition(".")
        obj: object = getattr(self, head, None)
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
