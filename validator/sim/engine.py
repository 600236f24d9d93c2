"""The simulated scheduler: server state, start-up phase, decode-step accounting and periodic stats.

The HTTP routes (``app.py``) ask this object what to answer; it owns every piece of mutable state, so a
reply, a log line and a metric about the same request always agree. Decode steps are counted as SGLang
counts them (one per verify round under speculation, one per token otherwise); every
``decode_log_interval`` (40) steps the interval's accept length is logged, pushed to the gauges and folded
into the lifetime average that ``/server_info`` shows as ``avg_spec_accept_length``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validator.plugin.procinfo import process_start_time
from validator.sim import attestation, server_args, server_log
from validator.sim.decode import NUM_DRAFT_TOKENS
from validator.sim.metrics import SimMetrics
from validator.sim.scenarios import SERVED_MODEL_NAME, Scenario
from validator.sim.server_args import SGLANG_VERSION

DECODE_LOG_INTERVAL = 40
DEFAULT_STARTUP_SECONDS = 3.0


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


class SimEngine:
    def __init__(self, config: SimConfig) -> None:
        if config.speed <= 0:
            raise ValueError("speed must be positive")
        self.config = config
        self.scenario = config.scenario
        self.log = server_log.ServerLog(config.log_path)
        self.metrics = SimMetrics(SERVED_MODEL_NAME) if self.scenario.metrics else None
        self.ready = False
        self.crashed = False
        self.settled = threading.Event()  # set once ready (or crashed): lets callers wait without polling
        self.on_crash: Callable[[], None] | None = None
        self.created = time.time()
        self._lock = threading.Lock()
        self._flaky = random.Random(f"flaky:{config.seed}")
        self._request_no = 0
        self.running = 0
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
        self.bind(config.port)

    def bind(self, port: int) -> None:
        """Fix the port once it is known (port 0 picks a free one)."""
        self.config.port = port
        key = self.config.api_key if self.scenario.auth or self.config.api_key else None
        self.argv = server_args.launch_argv(self.scenario, host=self.config.host, port=port, api_key=key)
        self.args = server_args.resolved(self.scenario, host=self.config.host, port=port, api_key=key)

    @property
    def api_key(self) -> str | None:
        key = self.args.get("api_key")
        return key if isinstance(key, str) else None

    def sleep_s(self, simulated: float) -> float:
        return simulated / self.config.speed

    # ---- life cycle ----

    async def start_up(self) -> None:
        """The loading phase: log lines spread over ``startup_seconds * startup_factor``, then ready."""
        total = max(0.0, self.config.startup_seconds * self.scenario.startup_factor)
        lines = server_log.startup_lines(self.scenario, self.args)
        step = total / (len(lines) + 1)
        for message, tp in lines:
            self.log.line(message, tp=tp)
            if step > 0:
                await asyncio.sleep(step)
        if self.scenario.plugin:
            path = self.config.attestation_path or attestation.DEFAULT_PATH
            # like the real plugin: the process's own start time, from /proc, so staleness checks hold
            pid = os.getpid()
            started = process_start_time(pid) or self.created
            doc = attestation.build(self.scenario, pid=pid, start_time=round(started, 2))
            await asyncio.to_thread(attestation.write, path, doc)
        if step > 0:
            await asyncio.sleep(step)
        self.ready = True
        self.settled.set()
        self.log.line("The server is fired up and ready to roll!")

    def crash(self) -> None:
        """The scheduler dies: log like SGLang does, then stop answering altogether."""
        if self.crashed:
            return
        self.crashed = True
        self.ready = False
        self.settled.set()
        self.log.line("Scheduler hit an exception: Traceback (most recent call last):", tp=True)
        self.log.line(
            "RuntimeError: CUDA error: an illegal memory access was encountered (simulated)",
            tp=True,
        )
        self.log.line("Received sigquit from a child process. It usually means the child failed.")
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
            accept_rate = self._iv_correct / (self._iv_forward * (NUM_DRAFT_TOKENS - 1))
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
            ),
            tp=True,
        )
        if self.metrics is not None:
            self.metrics.interval(
                running=running,
                throughput=self.last_gen_throughput,
                accept_len=accept_len,
                accept_rate=accept_rate,
            )
        self._iv_accept_tokens = self._iv_correct = self._iv_forward = self._iv_tokens = 0
        self._iv_started = time.monotonic()

    # ---- views ----

    def startup_time(self) -> dict[str, float]:
        total = self.config.startup_seconds * self.scenario.startup_factor
        return {"load_weight": round(total * 0.7, 3), "kv_cache_allocation": round(total * 0.05, 3),
                "scheduler_e2e": round(total * 0.9, 3), "tokenizer_e2e": round(total, 3)}  # fmt: skip

    def internal_state(self) -> dict[str, Any]:
        state = dict(self.args)
        state.update(
            world_size=1,
            startup_time=self.startup_time(),
            effective_max_running_requests_per_dp=self.args.get("max_running_requests") or 128,
            last_gen_throughput=self.last_gen_throughput,
            memory_usage={
                "weight": 67.49,
                "kvcache": 11.2,
                "startup_available": 119.62,
                "token_capacity": 1048576,
                "token_capacity_swa": 0,
                "graph": {"decode": 1.21, "draft_decode": 0.31, "draft_extend": 0.22}
                if self.scenario.spec
                else {"decode": 1.21},
            },
            disaggregation_mode="null",
            decode_cuda_graph_bs=[1, 2, 4, 8, 16, 24, 32, 40, 48],
            decode_cuda_graph_memory_gb=1.21,
        )
        with self._lock:
            if self.scenario.spec and self.total_forward > 0:
                state["avg_spec_accept_length"] = self.total_accept_tokens / self.total_forward
        return state

    def server_info(self) -> dict[str, Any]:
        info = dict(self.args)
        info["launch_command"] = server_args.launch_command(self.argv)
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
        return info

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
