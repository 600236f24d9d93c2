"""The simulator's Prometheus metrics, with SGLang 0.5.23's names, help texts, label sets and buckets.

A private registry per server. Scheduler gauges are pushed together at each prefill and every
``decode_log_interval`` steps (srt/observability/metrics_collector.py:1674-1679), spec gauges at 0 with
speculation off; like SGLang's multiprocess collector, no ``_created`` series.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from validator.sim.api_style import ApiStyle
    from validator.sim.scenarios import Scenario

_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
                 200.0, 400.0)  # fmt: skip
_ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
                0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip
_E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
                200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0)  # fmt: skip


# Scheduler-side gauges, in SGLang's registration order (the spec ones: metrics_collector.py:511-546).
_SCHEDULER_GAUGES = (
    ("num_running_reqs", "The number of running requests."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("spec_accept_length",
     "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward)."),
    ("spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."),
    ("spec_cap_length",
     "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when no "
     "cap is scheduled)."),
    ("spec_block_accept_length",
     "Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact only "
     "in DSpark cap-accept mode)."),
    ("spec_num_steps", "Currently active speculative_num_steps."),
    ("spec_num_draft_tokens",
     "Currently active speculative_num_draft_tokens (decouples from steps under topk>1)."),
)  # fmt: skip


_DSPARK_ONLY = frozenset({"spec_cap_length", "spec_block_accept_length"})


class SimMetrics:
    def __init__(self, model_name: str, scenario: Scenario, style: ApiStyle) -> None:
        self._spec = (scenario.num_steps, scenario.num_draft_tokens) if scenario.spec else (0, 0)
        self.registry = CollectorRegistry()
        r = self.registry
        old = self._old = style.labels_model_name_only
        self._base = (
            {"model_name": model_name} if old else {"model_name": model_name, "engine_type": "unified"}
        )
        self._sched = (
            self._base if old else {**self._base, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        )
        base, sched = list(self._base), list(self._sched)
        strm = base if old else [*base, "is_streaming"]
        # the two DSpark gauges exist on builds that have DSpark (style.dspark_gauges), on every server
        self._gauges = {
            name: Gauge(f"sglang:{name}", text, sched, registry=r)
            for name, text in _SCHEDULER_GAUGES
            if style.dspark_gauges or name not in _DSPARK_ONLY
        }
        self._accept = (0.0, 0.0)
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens_total",
            "Number of prefill tokens processed.",
            strm,
            registry=r,
        )
        self.generation_tokens = Counter(
            "sglang:generation_tokens_total",
            "Number of generation tokens processed.",
            strm,
            registry=r,
        )
        self.spec_verify_calls = Counter(
            "sglang:spec_verify_calls_total",
            "Number of speculative decoding verification calls.",
            base,
            registry=r,
        )
        self.num_requests = Counter(
            "sglang:num_requests_total", "Number of requests processed.", strm, registry=r
        )
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            strm, buckets=_TTFT_BUCKETS, registry=r,
        )  # fmt: skip
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", base,
            buckets=_ITL_BUCKETS, registry=r,
        )  # fmt: skip
        self.tpot = Histogram(
            "sglang:request_time_per_output_token_seconds",
            "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
            strm, buckets=_ITL_BUCKETS, registry=r,
        )  # fmt: skip
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
            strm, buckets=_E2E_BUCKETS, registry=r,
        )  # fmt: skip

    def log_stats(
        self,
        *,
        running: int,
        throughput: float,
        accept_len: float | None = None,
        accept_rate: float | None = None,
        queue: int = 0,
    ) -> None:
        """Push every scheduler gauge; the spec values keep their last interval's figures between
        intervals (``self.stats`` persists in SGLang's reporter)."""
        if accept_len is not None and accept_rate is not None:
            self._accept = (accept_len, accept_rate)
        values = {
            "num_running_reqs": running,
            "gen_throughput": throughput,
            "num_queue_reqs": queue,
            "spec_accept_length": self._accept[0],
            "spec_accept_rate": self._accept[1],
            "spec_cap_length": 0,  # no DSpark confidence scheduling in the simulator
            "spec_block_accept_length": 0,
            "spec_num_steps": self._spec[0],
            "spec_num_draft_tokens": self._spec[1],
        }
        for name, value in values.items():
            if name in self._gauges:
                self._gauges[name].labels(**self._sched).set(value)

    def finished(
        self,
        *,
        streaming: bool,
        prompt_tokens: int,
        completion_tokens: int,
        verify_ct: int,
        ttft: float,
        decode_s: float,
        chunks: list[int],
    ) -> None:
        """Tokenizer-side metrics for one finished request (times in simulated seconds)."""
        s = dict(self._base) if self._old else {**self._base, "is_streaming": str(streaming).lower()}
        self.prompt_tokens.labels(**s).inc(prompt_tokens)
        self.generation_tokens.labels(**s).inc(completion_tokens)
        self.num_requests.labels(**s).inc()
        if verify_ct:
            self.spec_verify_calls.labels(**self._base).inc(verify_ct)
        self.ttft.labels(**s).observe(ttft)
        self.e2e.labels(**s).observe(ttft + decode_s)
        if completion_tokens > 1:
            self.tpot.labels(**s).observe(decode_s / (completion_tokens - 1))
            per_chunk = decode_s / max(1, len(chunks) - 1)
            itl = self.itl.labels(**self._base)
            for n in chunks[1:]:
                for _ in range(n):
                    itl.observe(per_chunk / n)

    def render(self) -> bytes:
        """The exposition without ``_created`` samples (the multiprocess collector has none)."""
        lines = generate_latest(self.registry).split(b"\n")
        return b"\n".join(ln for ln in lines if not _is_created(ln))


def _is_created(line: bytes) -> bool:
    if line.startswith(b"# "):
        parts = line.split(b" ", 3)
        return len(parts) > 2 and parts[2].endswith(b"_created")
    return line.split(b"{", 1)[0].split(b" ", 1)[0].endswith(b"_created")
