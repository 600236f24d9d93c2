"""One prompt of a request: decode it, sleep its simulated time, and build SGLang's replies for it.

``meta_info`` follows ``srt/managers/tokenizer_manager.py`` (about l.2507-2770 and
``_calculate_spec_decoding_metrics`` at l.3138-3200); logprobs follow ``add_logprob_to_meta_info``
(l.2840-2870): ``[logprob, token_id, text or None]`` entries. A ``json_schema`` constrains the output to an
instance of the schema, ended by EOS (``finish_reason`` ``stop``) unless ``max_new_tokens`` cuts it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from validator.sim import api_style
from validator.sim import decode as dm
from validator.sim.api_style import ApiStyle
from validator.sim.metrics import SimMetrics
from validator.sim.scenarios import VOCAB, Scenario
from validator.sim.server_log import ServerLog

EOS_TOKEN_ID = 156892  # the simulated tokenizer's EOS, reported as finish_reason.matched


class GrammarError(ValueError):
    """The ``json_schema`` is not a JSON object: SGLang aborts such a request with a 400."""


def schema_instance(schema_text: str, seed: int) -> str:
    """A compact JSON text that satisfies ``schema_text`` (the subset of JSON Schema a grammar backend
    compiles: types, properties, required, enum, const, items, anyOf/oneOf)."""
    try:
        schema = json.loads(schema_text)
    except ValueError as exc:
        raise GrammarError(f"Invalid json_schema: {exc}") from None
    if not isinstance(schema, dict):
        raise GrammarError("Invalid json_schema: the schema must be a JSON object")
    rng = random.Random(seed)
    return json.dumps(_instance(schema, rng, 0), separators=(",", ":"))


def _instance(schema: Any, rng: random.Random, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _instance(schema[key][0], rng, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {str(k): _instance(v, rng, depth + 1) for k, v in props.items()}
    if kind == "array":
        low = schema.get("minItems", 1)
        count = low if isinstance(low, int) and 0 <= low <= 8 else 1
        return [_instance(schema.get("items", {}), rng, depth + 1) for _ in range(max(1, count))]
    if kind == "integer":
        return rng.randrange(0, 100)
    if kind == "number":
        return round(rng.uniform(0, 100), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return dm.word(rng.randrange(1000, 5000))


def _logprob(token_id: int) -> float:
    """A stable log-probability per token (greedy-looking: mostly near 0)."""
    h = int.from_bytes(hashlib.sha256(str(token_id).encode()).digest()[:2], "big")
    return -round((h % 1000) / 400.0, 4)


class _Seeded(Protocol):
    @property
    def seed(self) -> int: ...


class Engine(Protocol):
    """What a job uses of the engine that runs it (``validator.sim.engine.SimEngine``, which makes the
    jobs): stated here, so that the engine imports the job and not the other way round."""

    running: int  # requests in flight, counted up and down by each job

    @property
    def config(self) -> _Seeded: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def api_style(self) -> ApiStyle: ...
    @property
    def metrics(self) -> SimMetrics | None: ...
    @property
    def log(self) -> ServerLog: ...
    def next_request_id(self) -> str: ...
    def sleep_s(self, simulated: float) -> float: ...
    def prefilled(self) -> None: ...
    async def admitted(self, counted: bool) -> None: ...
    def account(self, rounds: list[int], plain_steps: int, new_tokens: int) -> None: ...


class Job:
    """One prompt of a request, with its whole outcome decided up front (so replays are identical)."""

    def __init__(self, engine: Engine, prompt: str, params: dict[str, Any], rid: str | None,
                 *, logprobs: dict[str, Any] | None = None, log_metrics: bool = True) -> None:  # fmt: skip
        self.engine = engine
        self.log_metrics = log_metrics  # GenerateReqInput.log_metrics: False keeps it out of /metrics
        self.rid = rid or engine.next_request_id()
        temperature = params.get("temperature", 1.0)
        self.temperature = float(temperature) if isinstance(temperature, (int, float)) else 1.0
        mnt = params.get("max_new_tokens", 128)
        self.max_new_tokens = int(mnt) if isinstance(mnt, int) and mnt > 0 else 128
        seed = params.get("sampling_seed")
        schema = params.get("json_schema")
        constrained = (
            schema_instance(schema, engine.config.seed + len(prompt)) if isinstance(schema, str) else None
        )
        self.logprobs = logprobs
        self.prompt = prompt
        self.params = params
        self.prompt_ids = [1000 + (ord(c) * 131 + i) % (VOCAB - 1000) for i, c in enumerate(prompt[:64])]
        self.result = dm.decode(
            engine.scenario,
            seed=engine.config.seed,
            prompt=prompt,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            sampling_seed=seed if isinstance(seed, int) else None,
            constrained=constrained,
        )
        self.received = time.time()

    @property
    def finish_reason(self) -> dict[str, Any]:
        if self.result.stopped:
            return {"type": "stop", "matched": EOS_TOKEN_ID}
        return {"type": "length", "length": self.max_new_tokens}

    def _logprob_fields(self, completion_tokens: int) -> dict[str, Any]:
        assert self.logprobs is not None
        with_text = bool(self.logprobs.get("return_text_in_logprobs"))
        out_ids = self.result.output_ids[:completion_tokens]
        out: list[list[Any]] = [[_logprob(t), t, dm.word(t) if with_text else None] for t in out_ids]
        last = self.prompt_ids[-1] if self.prompt_ids else 1000
        fields: dict[str, Any] = {
            "input_token_logprobs": [[None, last, dm.word(last) if with_text else None]],
            "output_token_logprobs": out,
            "output_token_logprobs_length": len(out),
        }
        top = self.logprobs.get("top_logprobs_num")
        if isinstance(top, int) and top > 0:
            fields["input_top_logprobs"] = [None]
            fields["output_top_logprobs"] = [
                [[_logprob(t) - 0.5 * i, (t + i) % VOCAB, None] for i in range(top)] for t in out_ids
            ]
        return fields

    def meta(self, completion_tokens: int, *, final: bool) -> dict[str, Any]:
        d, sc = self.result, self.engine.scenario
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": self.finish_reason if final else None,
            "prompt_tokens": d.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
        }
        if sc.metrics:
            first = self.received + d.ttft_s
            done = first + d.decode_s
            meta.update(
                request_received_ts=self.received,
                api_server_dispatch_finish_ts=self.received + 0.0004,
                queue_time=0.0003,
                forward_entry_time=self.received + 0.001,
                prefill_finished_time=first,
                first_token_latency=d.ttft_s,
            )
            if final:
                meta.update(
                    request_finished_ts=done,
                    response_sent_to_client_ts=done + 0.0002,
                    decode_throughput=(d.completion_tokens - 1) / d.decode_s if d.decode_s > 0 else 0.0,
                )
        meta.update(reasoning_tokens=0, completion_tokens=completion_tokens, cached_tokens=0)
        if self.logprobs is not None:
            meta.update(self._logprob_fields(completion_tokens))
        if final:
            meta["e2e_latency"] = d.ttft_s + d.decode_s
            if d.verify_ct > 0:
                meta.update(
                    api_style.spec_meta(
                        self.engine.api_style,
                        completion_tokens=d.completion_tokens,
                        verify_ct=d.verify_ct,
                        correct=d.correct_drafts,
                        proposed=d.verify_ct * sc.drafts_per_verify,
                        histogram=d.histogram(),
                    )
                )
        return meta

    def _finish(self, streaming: bool) -> None:
        d, m = self.result, self.engine.metrics
        self.engine.log.finished(self.rid, d.text, d.completion_tokens)
        if m is not None and self.log_metrics:
            m.finished(
                streaming=streaming,
                prompt_tokens=d.prompt_tokens,
                completion_tokens=d.completion_tokens,
                verify_ct=d.verify_ct,
                ttft=d.ttft_s,
                decode_s=d.decode_s,
                chunks=dm.stream_chunks(d),
            )

    async def run(self) -> dict[str, Any]:
        d, e = self.result, self.engine
        e.log.received(self.rid, self.prompt, self.params)
        e.running += 1
        try:
            await e.admitted(self.log_metrics)  # held here while the scheduler is stalled
            e.prefilled()
            await asyncio.sleep(e.sleep_s(d.ttft_s + d.decode_s))
        finally:
            e.running -= 1
        e.account(d.rounds, d.completion_tokens - 1 if not d.rounds else 0, d.completion_tokens)
        self._finish(streaming=False)
        return {
            "text": d.text,
            "output_ids": d.output_ids,
            "meta_info": self.meta(d.completion_tokens, final=True),
        }

    def _text_upto(self, tokens: int) -> str:
        d = self.result
        if tokens >= d.completion_tokens:
            return d.text
        if self.engine.scenario.degenerate:
            return d.text[:tokens]
        if d.stopped or " " not in d.text:  # constrained text: about four characters per token
            return d.text[: tokens * 4]
        return " ".join(d.text.split(" ")[:tokens])

    async def frames(self) -> AsyncIterator[dict[str, Any]]:
        """Cumulative ``/generate`` stream frames: the prefill token, then one frame per verify round."""
        d, e = self.result, self.engine
        chunks = dm.stream_chunks(d)
        per_chunk = d.decode_s / max(1, len(chunks) - 1)
        e.log.received(self.rid, self.prompt, self.params)
        e.running += 1
        try:
            await e.admitted(self.log_metrics)  # held here while the scheduler is stalled
            e.prefilled()
            sent = 0
            for n, size in enumerate(chunks):
                await asyncio.sleep(e.sleep_s(d.ttft_s if n == 0 else per_chunk))
                sent += size
                if n > 0:
                    k = d.rounds[n - 1] if d.rounds else None
                    e.account([k] if k is not None else [], 0 if d.rounds else 1, size)
                final = sent >= d.completion_tokens
                yield {"text": self._text_upto(sent), "output_ids": d.output_ids[:sent],
                       "meta_info": self.meta(sent, final=final)}  # fmt: skip
                if final:
                    break
        finally:
            e.running -= 1
        self._finish(streaming=True)
