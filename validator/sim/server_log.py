"""A server log in SGLang's format, so log-reading checks and operators' grep rules can be tried.

``[%(asctime)s{prefix}] %(message)s``, flushed line by line; rank prefixes only for ranks that exist
(srt/managers/scheduler.py:6279-6291); the API key masked in ``server_args=``. ``--log-style``
(:data:`LOG_STYLES`) imitates other build families (the ``ServerArgs(...)`` repr, level and location
prefixes, rank tags) and the noise of a busy server (access lines, prompt echoes, progress bars).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from validator.sim.scenarios import MOE_LAYERS, NUM_LAYERS, TARGET_CLASS, Scenario

_BS = [1, 2, 4, 8, 16, 24, 32, 40, 48]


@dataclass(frozen=True)
class LogStyle:
    """One build family's way of logging (see the module docstring)."""

    dataclass_args: bool = False  # server_args=ServerArgs(key=value, ...) instead of the dict
    levels: bool = False  # "INFO file.py:N: " after the stamp
    ranks: str = ""  # a scheduler line's rank tags (" DP0 TP0 EP0")
    decode: str = "0.5.23"  # the decode line's family: "0.5.23", "2025" (no accept rate), "iterations"
    noise: bool = False  # access lines, progress bars, Prefill batch, Memory pool end
    log_requests: bool = False  # --log-requests: Receive:/Finish: echoes of every request


LOG_STYLES: dict[str, LogStyle] = {
    # the current dict form (SGLang 0.5.23, the Ling-3.0 DGX Spark deployment)
    "dict": LogStyle(),
    # the dataclass repr and the decode line without accept rate of 2025 builds, on a busy server
    "dataclass": LogStyle(dataclass_args=True, decode="2025", noise=True),
    # 2026 builds: level and location, rank tags, iteration numbers, spec tokens/rounds, --log-requests
    "dataclass-ranked": LogStyle(
        dataclass_args=True,
        levels=True,
        ranks=" DP0 TP0 EP0",
        decode="iterations",
        noise=True,
        log_requests=True,
    ),
}
DEFAULT_STYLE = LOG_STYLES["dict"]

# where SGLang logs each message from (for the level/location prefix of 2026 builds)
_LOCATIONS = (
    ("server_args=", "engine.py:177"),
    ("Load weight", "model_runner.py:1373"),
    ("Decode batch", "scheduler_metrics_mixin.py:263"),
    ("Prefill batch", "scheduler_metrics_mixin.py:171"),
    ("The server is fired up", "http_server.py:2600"),
    ("Scheduler hit an exception", "scheduler.py:6372"),
    ("Received sigquit", "engine.py:1978"),
    ("Receive:", "request_logger.py:116"),
    ("Finish:", "request_logger.py:197"),
    ("Capture ", "cuda_graph_setup.py:757"),
    ("Memory pool end", "kv_cache_configurator.py:499"),
)


def _location(message: str) -> str:
    return next((where for start, where in _LOCATIONS if message.startswith(start)), "engine.py:1")


class ServerLog:
    """Append-only log file (or nothing when no path is given); safe to call from any thread.

    ``tp`` marks a scheduler line; it gets the style's rank tags (a single-rank server has no ``TP0``
    prefix); ``tp=None`` writes the text as it is, with no logger prefix (a progress bar)."""

    def __init__(self, path: Path | None, *, style: LogStyle = DEFAULT_STYLE) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self.style = style
        self._prefix = style.ranks
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def line(self, message: str, *, tp: bool | None = False, located: bool = True) -> None:
        """One record; ``located=False`` for a logger that adds no level and location of SGLang's
        (uvicorn's access logger writes its own ``INFO:`` level)."""
        if self._fh is None:
            return
        if tp is None:
            text = message
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            prefix = self._prefix if tp else ""
            level = ""
            if self.style.levels and located:
                severe = message.startswith(("Scheduler hit an exception", "Received sigquit"))
                level = f"{'ERROR' if severe else 'INFO'} {_location(message)}: "
            text = f"[{stamp}{prefix}] {level}{message}"
        with self._lock:
            if self._fh is None:
                return
            self._fh.write(text + "\n")
            self._fh.flush()

    def access(self, client: str, method: str, target: str, status: int) -> None:
        """uvicorn's access line, as SGLang's log shows it (the raw request line of any client)."""
        if self.style.noise:
            phrase = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}.get(status, "")
            request = f'"{method} {target} HTTP/1.1"'
            self.line(f"INFO:     {client} - {request} {status} {phrase}".rstrip(), located=False)

    def prefill(self, running: int) -> None:
        if self.style.noise:
            self.line(
                "Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.00, "
                f"#running-req: {running - 1}, #queue-req: 0, #pending-token: 0, cuda graph: False, "
                "input throughput (token/s): 1024.00",
                tp=True,
            )

    def held(self, queued: int) -> None:
        """A request joined a stalled scheduler (``Engine.admitted``): SGLang writes a batch line after each
        forward (batch_result_processor.py), so a wedged scheduler's last line counts what then waited; the
        simulator writes it as each request joins, in every style, in 0.5.23's format."""
        self.line(prefill_batch_line(running=0, queued=queued), tp=True)

    def received(self, rid: str, prompt: str, params: dict[str, Any]) -> None:
        """``--log-requests``: the request as SGLang echoes it (the prompt's repr, whatever it holds)."""
        if self.style.log_requests:
            self.line(
                f"Receive: obj=GenerateReqInput(rid={rid!r}, text={prompt!r}, sampling_params={params!r})"
            )

    def finished(self, rid: str, text: str, completion_tokens: int) -> None:
        if self.style.log_requests:
            out = {"text": text, "meta_info": {"id": rid, "completion_tokens": completion_tokens}}
            self.line(f"Finish: obj=GenerateReqInput(rid={rid!r}), out={out!r}")

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def access_logged(app: App, log: ServerLog) -> App:
    """The ASGI app with uvicorn's access line written to the simulated log after each response (only
    for the styles that imitate a busy real server)."""
    if not log.style.noise:
        return app

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        status = 0

        async def send_status(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 0))
            await send(message)

        try:
            await app(scope, receive, send_status)
        finally:
            client = scope.get("client") or ("127.0.0.1", 0)
            query = scope.get("query_string", b"").decode("ascii", "replace")
            target = scope.get("path", "/") + (f"?{query}" if query else "")
            log.access(f"{client[0]}:{client[1]}", str(scope.get("method", "GET")), target, status)

    return wrapped


def server_args_message(args: dict[str, Any], style: LogStyle = DEFAULT_STYLE) -> str:
    """The launcher's ``server_args=`` line: the resolved dict, or the dataclass repr of older builds."""
    masked = _masked(args)
    if not style.dataclass_args:
        return f"server_args={masked!r}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in masked.items()) + ")"


def _masked(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for key in ("api_key", "admin_api_key"):
        if out.get(key) is not None:
            out[key] = "***"
    return out


def _graph_lines(role: str, phase: str, tokens: int, elapsed: float, usage: float, avail: float) -> list[str]:
    """``capture_decode_graph`` (srt/model_executor/model_runner_components/cuda_graph_setup.py:737-795):
    ``Capture {role} {verify|decode} CUDA graph begin/end``, the end line with bs, elapsed, mem usage and
    avail mem."""
    return [
        f"Capture {role} {phase} CUDA graph begin. backend=full, num_tokens_per_req={tokens}, "
        f"avail mem={avail:.2f} GB",
        f"Capture {role} {phase} CUDA graph end. bs={_BS}, elapsed={elapsed:.2f} s, "
        f"mem usage={usage:.2f} GB, avail mem={avail - usage:.2f} GB.",
    ]


def _eagle_draft_graph_lines(scenario: Scenario, avail: float) -> list[str]:
    """``EagleDraftWorker.init_cuda_graphs`` (srt/speculative/eagle_worker_v2.py:512-545 and 631-660):
    decode (only when steps > 1) then extend, end lines with ``elapsed=, mem usage=, avail mem=``."""
    out: list[str] = []
    for name, tokens in (("decode", 1), ("extend", scenario.num_draft_tokens)):
        elapsed, usage = scenario.graphs[f"draft_{name}"]
        out.append(
            f"Capture draft {name} CUDA graph begin. backend=full, num_tokens_per_req={tokens}, "
            f"bs={_BS}, avail mem={avail:.2f} GB"
        )
        out.append(
            f"Capture draft {name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, "
            f"avail mem={avail - usage:.2f} GB."
        )
        avail -= usage
    return out


def startup_lines(
    scenario: Scenario, args: dict[str, Any], style: LogStyle = DEFAULT_STYLE
) -> list[tuple[str, bool | None]]:
    """(message, scheduler?) in the order a real start-up prints them, up to the end of graph capture.

    With a ReplaySSM ring the pool rejects (``Scenario.ring_error``), the lines stop after the weights
    have loaded, where ``memory_pool.py`` raises: :func:`ring_failure_lines` follows."""
    lines: list[tuple[str, bool | None]] = []

    def add(*messages: str, tp: bool | None = True) -> None:
        lines.extend((m, tp) for m in messages)

    if scenario.moe_backend_flag == "auto":
        add(
            f"Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for {TARGET_CLASS}.",
            tp=False,
        )
    if scenario.spec:
        add(
            "Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests.",
            tp=False,
        )
    add(server_args_message(args, style), tp=False)
    if scenario.plugin:
        add(*plugin_lines())
    add(
        "Detected fp8 checkpoint.",
        "Detected mixed checkpoint layout: routed experts are MXFP4.",
        "Load weight begin. avail mem=119.62 GB",
    )
    if style.noise:  # tqdm's bars: no logger prefix
        add(
            "Loading safetensors checkpoint shards:   0% Completed | 0/27 [00:00<?, ?it/s]",
            "Loading safetensors checkpoint shards: 100% Completed | 27/27 [00:52<00:00,  1.94s/it]",
            tp=None,
        )
    if scenario.fp8_head:
        add("Online FP8 quantization enabled for lm_head.")
    add(*(_moe_line(scenario, f"model.layers.{i}.mlp.experts") for i in range(1, MOE_LAYERS + 1)))
    add(
        f"Load weight end. elapsed=52.41 s, type={TARGET_CLASS}, quant=fp8, avail mem=52.13 GB, "
        "mem usage=67.49 GB.",
    )
    if scenario.dspark:
        gamma = scenario.dspark_block_size
        add(
            "Load weight begin. avail mem=52.13 GB",
            # a BF16 checkpoint has no quantization config: no ``quant=`` (model_runner.py:1373-1379)
            f"Load weight end. elapsed=4.06 s, type={scenario.draft_class}, avail mem=49.41 GB, "
            "mem usage=2.72 GB.",
            # srt/speculative/dspark_components/dspark_worker_v2.py:279-292
            "Initialized DSpark draft runner. attention_backend=triton, "
            f"model={scenario.draft_class}, gamma={gamma}, verify_num_draft_tokens={gamma + 1}, "
            f"query_token_num={gamma + 1}, sample_from_anchor=False, mask_token_id=156895, "
            "markov_head=VanillaMarkov",
        )
    elif scenario.spec:
        add(
            "Load weight begin. avail mem=52.13 GB",
            _moe_line(scenario, f"model.layers.{NUM_LAYERS}.mlp.experts"),
            f"Load weight end. elapsed=3.12 s, type={scenario.draft_class}, quant=fp8, "
            "avail mem=50.51 GB, mem usage=1.62 GB.",
        )
    if scenario.ring_error is not None:
        return lines
    # srt/mem_cache/memory_pool.py:1004-1009 (the ring error above is raised just before it)
    add(
        "Mamba Cache is allocated. max_mamba_cache_size: 48, conv_state size: 0.12GB, "
        "ssm_state size: 0.84GB ",
    )
    if style.noise:
        add("Memory pool end. avail mem=40.02 GB")
    if scenario.moe_backend == "humming":
        add("Using indexed gemm for humming moe")
    phase = "verify" if scenario.spec else "decode"
    tokens = scenario.num_draft_tokens if scenario.spec else 1
    if style.noise:
        add(
            "Capturing batches (bs=48 avail_mem=40.02 GB): 100%|██████████| 9/9 [00:21<00:00,  2.37s/it]",
            tp=None,
        )
    target = scenario.graphs["target_verify" if scenario.spec else "decode"]
    add(*_graph_lines("target", phase, tokens, *target, 40.02))
    if scenario.dspark:
        add(*_graph_lines("draft", "verify", tokens, *scenario.graphs["draft_decode"], 38.81))
    elif scenario.spec:
        add(*_eagle_draft_graph_lines(scenario, 38.81))
    add(
        "max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={args.get('max_running_requests') or 128}, context_len=262144",
    )
    return lines


# The targets the real plugin hooks (validator/plugin/hooks.py HOOKS), restated so that the simulator
# never imports the in-server plugin; tests/test_plugin_contract.py holds the two lists equal.
PLUGIN_HOOK_TARGETS = (
    "sglang.srt.model_executor.model_runner.ModelRunner.load_model",
    "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker.init_lm_head",
    "sglang.srt.speculative.multi_layer_eagle_worker_v2.MultiLayerEagleDraftWorker.init_lm_head",
    "sglang.srt.speculative.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker.__init__",
    "sglang.srt.speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2.__init__",
)


def plugin_lines() -> list[str]:
    """``load_plugins`` in the scheduler (srt/plugins/__init__.py:62-82 and l.134), then one line per hooked
    target from ``HookRegistry.apply_hooks`` (srt/plugins/hook_registry.py:305-310) for each of the
    plugin's AFTER hooks."""
    group = "sglang.srt.plugins"
    lines = [
        f"Available plugins for group {group}:",
        "  - spark_validate -> spark_validate_plugin.plugin:register",
        f"Loaded plugin spark_validate from group {group}",
        "Executed general plugin: spark_validate",
    ]
    lines += [
        f"Applied 1 hook(s) to {t} (from: plugin=spark_validate, dist=spark-validate-plugin)"
        for t in PLUGIN_HOOK_TARGETS
    ]
    return lines


def startup_timings_line(startup: dict[str, Any]) -> str:
    """The launcher's summary once every scheduler is up (srt/entrypoints/engine.py:1115-1128)."""
    graphs = ", ".join(f"{phase}={value:.2f}" for phase, value in startup["cuda_graph"].items())
    return (
        f"Engine startup timings (s): load_weight={startup['load_weight']:.2f}, "
        f"kv_cache_allocation={startup['kv_cache_allocation']:.2f}, "
        f"scheduler_e2e={startup['scheduler_e2e']:.2f}, cuda_graph={{{graphs}}}, "
        f"tokenizer_e2e={startup['tokenizer_e2e']:.2f}"
    )


def crash_lines(trace: str) -> list[tuple[str, bool | None]]:
    """What a scheduler that raised leaves in the log before the process tree dies: ``Scheduler hit an
    exception: <traceback>`` (srt/managers/scheduler.py:6370-6373), then the launcher's SIGQUIT handler
    line (srt/entrypoints/engine.py:1976-1980)."""
    return [
        (f"Scheduler hit an exception: {trace}", True),
        ("Received sigquit from a child process. It usually means the child failed.", False),
    ]


def ring_failure_lines(error: str) -> list[tuple[str, bool | None]]:
    """The crash of a scheduler whose ReplaySSM pool allocation raised (``memory_pool.py``)."""
    trace = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 6352, '
            "in run_scheduler_process",
            "    scheduler = Scheduler(",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/mem_cache/memory_pool.py", line 821, '
            "in __init__",
            "    raise ValueError(",
            f"ValueError: {error}",
        ]
    )
    return crash_lines(trace)


def _moe_line(scenario: Scenario, layer: str) -> str:
    if scenario.moe_backend == "humming":
        return f"Preparing DeepSeekV4 MXFP4 experts for Humming backend (layer: {layer})..."
    return f"Preparing DSv4 MXFP4 experts for FlashInfer SM120 CUTLASS W4A8 (layer: {layer})..."


def prefill_batch_line(*, running: int, queued: int) -> str:
    """SGLang 0.5.23's prefill line (metrics_reporter.py ``report_prefill_stats``: counts, the hybrid
    model's pool usage, ``#running-req``, ``#queue-req``, ``#pending-token``, graph, throughput)."""
    return (
        "Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, full token usage: 0.00, "
        f"mamba usage: 0.00, #running-req: {running}, #queue-req: {queued}, #pending-token: 0, "
        "cuda graph: False, input throughput (token/s): 0.00"
    )


def decode_batch_line(
    *,
    running: int,
    used_tokens: int,
    accept_len: float | None,
    accept_rate: float | None,
    throughput: float,
    style: LogStyle = DEFAULT_STYLE,
    iteration: int = 0,
    rounds: int = 0,
) -> str:
    """The scheduler's periodic line in the style's build family; the KDA hybrid model shows the mamba
    fields in 0.5.23's. ``iteration`` and ``rounds`` (the interval's verify rounds) fill the fields of the
    builds that log them."""
    usage = used_tokens / 1048576
    spec = accept_len is not None and accept_rate is not None
    if style.decode == "2025":  # no accept rate (pre-0.5 builds)
        msg = f"Decode batch. #running-req: {running}, #token: {used_tokens}, token usage: {usage:.2f}, "
        if spec:
            msg += f"accept len: {accept_len:.2f}, "
        return msg + f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: 0"
    if style.decode == "iterations":  # iteration numbers, spec tokens and rounds
        msg = (
            f"Decode batch [{iteration}], #running-req: {running}, #full token: {used_tokens}, "
            f"full token usage: {usage:.2f}, "
        )
        if spec:
            assert accept_len is not None and accept_rate is not None
            msg += (
                f"spec tokens: {round(accept_len * rounds)}, spec rounds: {rounds}, "
                f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
            )
        return msg + f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: 0"
    msg = (
        f"Decode batch, #running-req: {running}, #full token: {used_tokens}, full token usage: {usage:.2f}, "
        f"mamba num: {running}, mamba usage: {min(1.0, running / 48):.2f}, "
    )
    if spec:
        msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
    return msg + f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: 0"
