"""The simulated scheduler: server state, start-up phases, decode-step accounting and periodic stats; it owns
all mutable state, so a reply, a log line and a metric about one request agree.

Start-up has SGLang's two phases: *load* (port closed, or 503 with ``--answer-while-loading``) and *warm-up*
(``_execute_server_warmup``, srt/entrypoints/http_server.py:2360-2530: ``/health`` 503 until ``Up``).
Decode steps count as SGLang counts them; every ``decode_log_interval`` steps the accept length is logged,
pushed to the gauges and folded into ``avg_spec_accept_length``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from validator.attestation.writer import write_document
from validator.procinfo import process_start_time
from validator.sim import api_style, attestation, server_args, server_log
from validator.sim.job import Job
from validator.sim.metrics import SimMetrics
from validator.sim.scenarios import SERVED_MODEL_NAME, Scenario
from validator.sim.server_args import SGLANG_VERSION

DECODE_LOG_INTERVAL = 40
DEFAULT_STARTUP_SECONDS = 3.0
WARMUP_TOKENS = 8  # _execute_server_warmup's max_new_tokens for a generation model (http_server.py:2407)
WARMUP_PROMPT = "The capital city of France is"  # http_server.py:2462-2466


@dataclass
class SimConfig:
    scenario: Scenario
    seed: int = 0
    speed: float = 1.0
    startup_seconds: float = DEFAULT_STARTUP_SECONDS
    api_key: str | None = None
    log_path: Path | None = None
    attestation_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    extra_args: tuple[str, ...] = ()  # SGLang arguments given after `--`, on top of the scenario's
    log_style: str = "dict"  # the build family the log imitates (server_log.LOG_STYLES)
    api_style: str = api_style.DEFAULT  # which build family's HTTP shapes (validator/sim/api_style.py)
    collapse_after_s: float | None = None  # the draft breaks this many seconds after ready (None: never)
    # SGLang's scheduler pushes its gauges while idle every 30 s (``check_memory``); tests shorten it
    idle_metrics_s: float = 30.0


def _tp_size(value: object) -> int:
    """The launch's ``--tp`` as the attestation records it (1 when absent or not a positive integer)."""
    return value if isinstance(value, int) and value > 0 else 1


class SimEngine:
    def __init__(self, config: SimConfig) -> None:
        if config.speed <= 0:
            raise ValueError("speed must be positive")
        self.config = config
        self.scenario = config.scenario
        self.api_style = api_style.resolve(config.api_style)
        self.log = server_log.ServerLog(config.log_path, style=server_log.LOG_STYLES[config.log_style])
        self.metrics = (
            SimMetrics(SERVED_MODEL_NAME, self.scenario, self.api_style) if self.scenario.metrics else None
        )
        self.loaded = False  # weights and graphs are ready: the warm-up request can be served
        self.ready = False  # warm-up done: ServerStatus.Up
        self.crashed = False
        self.settled = threading.Event()  # set once ready (or crashed): lets callers wait without polling
        self.on_crash: Callable[[], None] | None = None
        self.created = time.time()
        self._t0 = time.perf_counter()
        self.load_weight_s = 0.0  # measured like SGLang's weight_load_time: differs on every start
        self.scheduler_e2e_s = 0.0
        self.tokenizer_e2e_s = 0.0
        self._lock = threading.Lock()
        self._flaky = random.Random(f"flaky:{config.seed}")
        self._request_no = 0
        self.running = 0
        self.held = 0  # requests accepted and held by a stalled scheduler
        self.accepted = 0  # requests accepted since ready (the stall's trigger)
        self.ready_at: float | None = None
        self.stall_started: float | None = None
        self.stall_over = False
        self._last_stats = time.monotonic()
        self.decode_steps = 0
        self._iv_accept_tokens = 0  # accepted drafts + bonus, this interval
        self._iv_forward = 0
        self._iv_correct = 0
        self._iv_tokens = 0
        self._iv_started = time.monotonic()
        self.total_accept_tokens = 0
        self.total_forward = 0
        self.last_gen_throughput = 0.0
        self.argv: list[str] = []
        self.args: dict[str, Any] = {}
        # SGLang draws the seed at start when --random-seed is not given (arg_groups/serving_hook.py:660-664):
        # a value every build serves in /server_info, and one a restart changes
        self.random_seed = random.SystemRandom().randint(0, 1 << 30)
        self.bind(config.port)

    def bind(self, port: int) -> None:
        """Fix the port once it is known (port 0 picks a free one)."""
        self.config.port = port
        key = self.config.api_key or None
        host, extra = self.config.host, self.config.extra_args
        self.argv = server_args.launch_argv(self.scenario, host=host, port=port, api_key=key, extra=extra)
        self.args = server_args.resolved(self.scenario, host=host, port=port, api_key=key, extra=extra)
        if self.args.get("random_seed") is None:
            self.args["random_seed"] = self.random_seed

    @property
    def api_key(self) -> str | None:
        key = self.args.get("api_key")
        return key if isinstance(key, str) else None

    def sleep_s(self, simulated: float) -> float:
        return simulated / self.config.speed

    # ---- life cycle ----

    async def load(self) -> bool:
        """The load phase: log lines spread over ``startup_seconds * startup_factor``; False when the server
        dies here (the ReplaySSM ring error, raised at pool allocation after the weights have loaded)."""
        sc = self.scenario
        total = max(0.0, self.config.startup_seconds * sc.startup_factor)
        lines = server_log.startup_lines(sc, self.args, self.log.style)
        step = total / (len(lines) + 1)
        for message, tp in lines:
            self.log.line(message, tp=tp)
            if message.startswith("Load weight end."):
                self.load_weight_s = round(time.perf_counter() - self._t0, 6)
            if step > 0:
                await asyncio.sleep(step)
        if sc.ring_error is not None:
            self.crash(server_log.ring_failure_lines(sc.ring_error))
            return False
        if sc.plugin:
            path = self.config.attestation_path or attestation.default_path(int(self.args["port"]))
            # like the real plugin: the process's own start time, from /proc, and the address it serves
            pid = os.getpid()
            started = process_start_time(pid) or self.created
            doc = attestation.build(
                sc,
                pid=pid,
                start_time=round(started, 2),
                host=str(self.args["host"]),
                port=int(self.args["port"]),
                load_weight_s=self.load_weight_s,
                tp_size=_tp_size(self.args.get("tp_size")),
            )
            if path is not None:
                await asyncio.to_thread(write_document, path, doc)  # the plugin's own writer
        if step > 0:
            await asyncio.sleep(step)
        self.scheduler_e2e_s = round(time.perf_counter() - self._t0, 6)
        self.tokenizer_e2e_s = round(time.perf_counter() - self._t0, 6)
        self.log.line(server_log.startup_timings_line(self.startup_time()))
        self.loaded = True
        return True

    async def warm_up(self) -> None:
        """The warm-up phase, with the port open: a first poll a second in, one real 8-token generation
        (``_execute_server_warmup``), then ``Up``. Kept out of the tokenizer-side counters, unlike SGLang's,
        so the shipped SGLangServedAcceptLengthLow rule does not go pending on a healthy server."""
        await asyncio.sleep(self.sleep_s(1.0))
        if self.crashed:
            return
        params = {"max_new_tokens": WARMUP_TOKENS, "temperature": 0.0}
        await Job(self, WARMUP_PROMPT, params, None, log_metrics=False).run()
        if self.crashed:
            return
        self.ready = True
        self.ready_at = time.monotonic()
        self.settled.set()
        self.log.line("The server is fired up and ready to roll!")
        await asyncio.gather(self._collapse_later(), self._idle_metrics())

    async def _collapse_later(self) -> None:
        if self.config.collapse_after_s is not None:
            await asyncio.sleep(self.config.collapse_after_s)
            self.collapse_draft()

    async def _idle_metrics(self) -> None:
        """SGLang's idle gauge refresh: with no batch to run, the scheduler pushes its gauges (running,
        queued, throughput 0) once ``idle_metrics_s`` has passed since it last did; requests held by a
        stall are its waiting queue."""
        while True:
            await asyncio.sleep(min(1.0, self.config.idle_metrics_s / 4))
            self.stalled()  # starts or ends a stall on time, also with no request arriving
            idle = self.running == self.held
            if self.metrics is None or not idle:
                continue
            with self._lock:
                if time.monotonic() - self._last_stats < self.config.idle_metrics_s:
                    continue
                self._last_stats = time.monotonic()
                self.metrics.log_stats(running=0, throughput=0.0, queue=self.held)

    def stalled(self) -> bool:
        """Whether the scheduler completes nothing now (``Scenario.stall_*``): starts on the first trigger
        after ready, ends once ``stall_for_s`` has passed, and does not come back."""
        sc = self.scenario
        if not sc.stalls or self.stall_over or self.ready_at is None:
            return False
        now = time.monotonic()
        if self.stall_started is None:
            by_count = sc.stall_after_requests is not None and self.accepted > sc.stall_after_requests
            by_time = sc.stall_after_s is not None and now - self.ready_at >= sc.stall_after_s
            if not (by_count or by_time):
                return False
            self.stall_started = now
            # to the simulator's own stderr (never the server log, which holds SGLang's lines only), with
            # the system-wide monotonic clock, so that a benchmark can time the detection
            sys.stderr.write(f"spark-validate sim: scheduler stalled (monotonic {now:.3f})\n")
        if sc.stall_for_s is not None and now - self.stall_started >= sc.stall_for_s:
            self.stall_over = True
            sys.stderr.write(f"spark-validate sim: scheduler recovered (monotonic {now:.3f})\n")
            return False
        return True

    async def admitted(self, counted: bool) -> None:
        """A request enters the scheduler: counted towards the stall's trigger (the warm-up is not), then
        held for as long as the scheduler is stalled (polled: a stall ends on time)."""
        if counted and self.ready:
            self.accepted += 1
        if not self.stalled():
            return
        self.held += 1
        self.log.held(queued=self.held)  # the last batch line, counting what waits (server_log.held)
        try:
            while self.stalled():
                await asyncio.sleep(0.05)
        finally:
            self.held -= 1

    def collapse_draft(self) -> None:
        """From now on the draft proposes garbage: every verify accepts nothing (acceptance 1.00), as when
        a broken draft head is hot-swapped in, or weights are corrupted under a running server. Nothing
        else changes: configuration, attestation and ``/health`` still look healthy."""
        with self._lock:
            self.scenario = replace(self.scenario, drafter_broken=True)

    async def start_up(self) -> None:
        """Both phases, for a simulator that listens from the start."""
        if await self.load():
            await self.warm_up()

    def crash(self, lines: list[tuple[str, bool | None]] | None = None) -> None:
        """The scheduler dies: log like SGLang does, then stop answering altogether."""
        if self.crashed:
            return
        self.crashed = True
        self.ready = False
        self.settled.set()
        if lines is None:
            lines = server_log.crash_lines(
                "Traceback (most recent call last):\n"
                "RuntimeError: CUDA error: an illegal memory access was encountered (simulated)"
            )
        for message, tp in lines:
            self.log.line(message, tp=tp)
        self.log.close()
        if self.on_crash is not None:
            self.on_crash()

    def close(self) -> None:
        self.log.close()

    # ---- per request ----

    def next_request_id(self) -> str:
        with self._lock:
            self._request_no += 1
            n = self._request_no
        return hashlib.sha256(f"{self.config.seed}:rid:{n}".encode()).hexdigest()[:32]

    def flaky_hit(self) -> bool:
        if self.scenario.flaky_rate <= 0:
            return False
        with self._lock:
            return self._flaky.random() < self.scenario.flaky_rate

    def prefilled(self) -> None:
        """A prefill ran: SGLang's ``report_prefill_stats`` pushes every scheduler gauge with the current
        stats (metrics_reporter.py:897), so the spec gauges exist (at 0 without speculation) from the first
        request on."""
        self.log.prefill(max(1, self.running))
        if self.metrics is not None:
            with self._lock:
                self._last_stats = time.monotonic()
                self.metrics.log_stats(running=max(1, self.running), throughput=self.last_gen_throughput)

    def account(self, rounds: list[int], plain_steps: int, new_tokens: int) -> None:
        """Count decode steps (verify rounds, or plain steps without spec) and emit interval stats."""
        with self._lock:
            self._iv_tokens += new_tokens
            steps: list[int | None] = list(rounds) if rounds else [None] * plain_steps
            for k in steps:
                self.decode_steps += 1
                if k is not None:
                    self._iv_accept_tokens += k + 1
                    self._iv_correct += k
                    self._iv_forward += 1
                if self.decode_steps % DECODE_LOG_INTERVAL == 0:
                    self._emit_interval()

    def _emit_interval(self) -> None:
        elapsed = max(1e-9, (time.monotonic() - self._iv_started) * self.config.speed)
        self.last_gen_throughput = self._iv_tokens / elapsed
        accept_len = accept_rate = None
        if self.scenario.spec and self._iv_forward:
            accept_len = self._iv_accept_tokens / self._iv_forward
            accept_rate = self._iv_correct / (self._iv_forward * self.scenario.drafts_per_verify)
            self.total_accept_tokens += self._iv_accept_tokens
            self.total_forward += self._iv_forward
        running = max(1, self.running)
        self.log.line(
            server_log.decode_batch_line(
                running=running,
                used_tokens=2048 * running,
                accept_len=accept_len,
                accept_rate=accept_rate,
                throughput=self.last_gen_throughput,
                style=self.log.style,
                iteration=self.decode_steps,
                rounds=self._iv_forward,
            ),
            tp=True,
        )
        if self.metrics is not None:
            self._last_stats = time.monotonic()
            self.metrics.log_stats(
                running=running,
                throughput=self.last_gen_throughput,
                accept_len=accept_len or 0.0,
                accept_rate=accept_rate or 0.0,
            )
        self._iv_accept_tokens = self._iv_correct = self._iv_forward = self._iv_tokens = 0
        self._iv_started = time.monotonic()

    # ---- views ----

    def _graph_phases(self, figure: int) -> dict[str, float]:
        """Seconds (``figure`` 0) or GB (1) per phase under SGLang's stable key set (GRAPH_MEMORY_USAGE_KEYS,
        srt/model_executor/graph_memory_usage.py:5-16), zero where nothing was captured."""
        out = dict.fromkeys(
            ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend"), 0.0
        )
        out.update((phase, figures[figure]) for phase, figures in self.scenario.graphs.items())
        return out

    def scheduler_startup_time(self) -> dict[str, Any]:
        """``build_scheduler_startup_time`` (srt/observability/startup_time.py:11-28): what each
        ``internal_states[i]["startup_time"]`` holds."""
        return {
            "load_weight": self.load_weight_s,
            "kv_cache_allocation": 0.412,
            "scheduler_e2e": self.scheduler_e2e_s,
            "cuda_graph": self._graph_phases(0),
        }

    def startup_time(self) -> dict[str, Any]:
        """``build_engine_startup_time`` (startup_time.py:62-69): the launcher's view, ``/server_info``'s
        top-level ``startup_time``, adds ``tokenizer_e2e``."""
        return {**self.scheduler_startup_time(), "tokenizer_e2e": self.tokenizer_e2e_s}

    def internal_state(self) -> dict[str, Any]:
        """``SchedulerInternalStateController.get_internal_state``
        (srt/managers/scheduler_components/internal_state.py:45-130)."""
        state = dict(self.args)
        graph_memory = self._graph_phases(1)
        state.update(
            world_size=1,
            startup_time=self.scheduler_startup_time(),
            effective_max_running_requests_per_dp=self.args.get("max_running_requests") or 128,
            last_gen_throughput=self.last_gen_throughput,
            # build_memory_usage (srt/managers/scheduler_components/memory_usage.py:15-40)
            memory_usage={
                "weight": round(
                    67.49 + (2.72 if self.scenario.dspark else 1.62 if self.scenario.spec else 0.0), 3
                ),
                "kvcache": 11.2,
                "startup_available": 119.62,
                "token_capacity": 1048576,
                "token_capacity_swa": None,
                "graph": graph_memory,
            },
            disaggregation_mode="null",
            decode_cuda_graph_bs=[1, 2, 4, 8, 16, 24, 32, 40, 48],
            decode_cuda_graph_memory_gb=round(
                sum(graph_memory[k] for k in ("decode", "target_verify", "draft_decode", "draft_extend")), 3
            ),
        )
        with self._lock:
            if self.scenario.spec and self.total_forward > 0:
                state["avg_spec_accept_length"] = self.total_accept_tokens / self.total_forward
        return state

    def server_info(self) -> dict[str, Any]:
        info = dict(self.args)
        # the launcher's " ".join(sys.argv[1:]), recorded at parse time (srt/server_args.py): it starts with
        # the first flag, and secrets are *not* redacted
        info["launch_command"] = " ".join(self.argv)
        info.update(
            status="ready",
            max_total_num_tokens=1048576,
            max_req_input_len=262138,
            hicache_object_layout=None,
            kv_events=None,
            startup_time=self.startup_time(),
            internal_states=[self.internal_state()],
            version=SGLANG_VERSION,
            frontend="python",
        )
        return {k: v for k, v in info.items() if k not in self.api_style.server_info_absent}

    def model_card(self, name: str | None = None) -> dict[str, Any]:
        """``ModelCard`` (srt/entrypoints/openai/protocol.py:87-96); ``created`` is the time of the call."""
        model = name or self.args["served_model_name"]
        return {"id": model, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                "root": model, "parent": None, "max_model_len": 262144}  # fmt: skip

    def model_info(self) -> dict[str, Any]:
        return {
            "model_path": self.args["model_path"],
            "served_model_name": self.args["served_model_name"],
            "tokenizer_path": self.args["tokenizer_path"],
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": "auto",
            "reasoning_parser": None,
            "tool_call_parser": None,
            "disaggregation_mode": "null",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "bailing_hybrid",
            "architectures": ["BailingMoeV3ForCausalLM"],
        }
