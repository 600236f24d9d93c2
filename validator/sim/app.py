"""The ASGI routes of the simulated SGLang 0.5.23 server (starlette).

Paths, auth levels, status codes and body shapes follow ``srt/entrypoints/http_server.py``: empty-bodied
200/503 for ``/health``, ``/health_generate`` and ``/ready``; ``{"error": "Unauthorized"}`` with 401 when a
key is set and missing; ``{"error": {"message": ...}}`` with 400 for bad generate input; SSE ``data:``
frames ending in ``data: [DONE]`` for streaming. Failure scenarios bend exactly one thing each.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from validator.sim import decode as dm
from validator.sim import weights
from validator.sim.engine import SimEngine

_OPEN_PATHS = ("/health", "/health_generate", "/ready", "/metrics")


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")), status_code=status, media_type="application/json"
    )


def _error(message: str, status: int = 400) -> Response:
    return _json({"error": {"message": message}}, status)


def create_app(engine: SimEngine) -> Starlette:
    sc = engine.scenario

    def gate(request: Request) -> Response | None:
        """Auth, crash, start-up and flakiness, in the order a client meets them."""
        key = engine.api_key
        open_path = request.url.path in _OPEN_PATHS
        if key is not None and not open_path and request.headers.get("authorization", "") != f"Bearer {key}":
            return _json({"error": "Unauthorized"}, 401)
        if engine.flaky_hit():
            return _error("Service temporarily unavailable (simulated flaky-5xx)", 503)
        return None

    def body_of(payload: Any) -> Response:
        if sc.malformed_json:
            text = json.dumps(payload)
            return Response(text[: max(1, len(text) // 2)], media_type="application/json")
        return _json(payload)

    async def health(request: Request) -> Response:
        if not engine.ready or engine.crashed:
            return Response(status_code=503)
        # the real handler sends a 1-token generation and polls once a second for its answer
        await asyncio.sleep(engine.sleep_s(1.0))
        return Response(status_code=200 if engine.ready else 503)

    async def ready(request: Request) -> Response:
        return Response(status_code=200 if engine.ready else 503)

    async def model_info(request: Request) -> Response:
        return gate(request) or body_of(engine.model_info())

    async def server_info(request: Request) -> Response:
        return gate(request) or body_of(engine.server_info())

    async def models(request: Request) -> Response:
        denied = gate(request)
        if denied:
            return denied
        name = engine.args["served_model_name"]
        card = {"id": name, "object": "model", "created": int(engine.created), "owned_by": "sglang",
                "root": name, "parent": None, "max_model_len": 262144}  # fmt: skip
        return body_of({"object": "list", "data": [card]})

    async def metrics(request: Request) -> Response:
        assert engine.metrics is not None
        return Response(engine.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def weights_checker(request: Request) -> Response:
        denied = gate(request)
        if denied:
            return denied
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return _error("request body is not valid JSON", 422)
        status, payload = weights.reply(sc, engine.config.seed, body if isinstance(body, dict) else {})
        return _json(payload, status)

    async def read_json(request: Request) -> Any:
        raw = await request.body()
        return json.loads(raw)

    async def generate(request: Request) -> Response:
        denied = gate(request)
        if denied:
            return denied
        try:
            body = await read_json(request)
        except ValueError:
            return _error("request body is not valid JSON")
        if not isinstance(body, dict):
            return _error("invalid type: expected a JSON object")
        if not engine.loaded:
            return _error("The server is not ready yet (starting up).", 503)
        texts = body.get("text")
        ids = body.get("input_ids")
        if texts is None and ids is None:
            return _error("Either text or input_ids should be provided.")
        batch = isinstance(texts, list) or (isinstance(ids, list) and bool(ids) and isinstance(ids[0], list))
        prompts: list[str]
        if isinstance(texts, list):
            prompts = [str(t) for t in texts]
        elif texts is not None:
            prompts = [str(texts)]
        else:
            seqs: list[Any] = list(ids) if batch and isinstance(ids, list) else [ids]
            prompts = [" ".join(str(i) for i in seq) if isinstance(seq, list) else str(seq) for seq in seqs]
        params = body.get("sampling_params") or {}
        plist = params if isinstance(params, list) else [params] * len(prompts)
        if len(plist) != len(prompts) or not all(isinstance(p, dict) for p in plist):
            return _error("sampling_params must be an object or a list matching the batch")
        rids = body.get("rid")
        if sc.crash_after_ready:
            engine.crash()
            await asyncio.Event().wait()  # never answered: the process is going away
        stream = bool(body.get("stream"))
        jobs = [_Job(engine, prompt, plist[i], _rid(rids, i)) for i, prompt in enumerate(prompts)]
        if stream:
            return StreamingResponse(_stream(engine, jobs), media_type="text/event-stream")
        outs = await asyncio.gather(*(job.run() for job in jobs))
        return body_of(outs if batch else outs[0])

    async def completions(request: Request) -> Response:
        return await _openai(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await _openai(request, chat=True)

    async def _openai(request: Request, *, chat: bool) -> Response:
        denied = gate(request)
        if denied:
            return denied
        try:
            body = await read_json(request)
        except ValueError:
            err = {"object": "error", "message": "invalid JSON", "type": "BadRequestError", "code": 400}
            return _json(err, 400)
        if not isinstance(body, dict):
            return _error("invalid type: expected a JSON object")
        if not engine.loaded:
            return _error("The server is not ready yet (starting up).", 503)
        if chat:
            msgs = body.get("messages") or []
            prompt = "\n".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
        else:
            prompt = str(body.get("prompt", ""))
        params = {
            "max_new_tokens": body.get("max_completion_tokens") or body.get("max_tokens") or 16,
            "temperature": body.get("temperature", 1.0),
        }
        if sc.crash_after_ready:
            engine.crash()
            await asyncio.Event().wait()
        job = _Job(engine, prompt, params, None)
        out = await job.run()
        meta = out["meta_info"]
        finish = "length"
        usage = {"prompt_tokens": meta["prompt_tokens"], "completion_tokens": meta["completion_tokens"],
                 "total_tokens": meta["prompt_tokens"] + meta["completion_tokens"]}  # fmt: skip
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None, "matched_stop": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": out["text"], "reasoning_content": None,
                                 "tool_calls": None}  # fmt: skip
        else:
            choice["text"] = out["text"]
        reply: dict[str, Any] = {
            "id": meta["id"],
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or engine.args["served_model_name"],
            "choices": [choice],
            "usage": usage,
        }
        if body.get("return_spec_tokens_details") and "spec_verify_ct" in meta:
            keys = (
                "spec_accept_rate",
                "spec_accept_length",
                "spec_num_correct_drafts",
                "spec_num_proposed_drafts",
                "spec_verify_ct",
                "spec_correct_drafts_histogram",
            )
            details = {k: meta[k] for k in keys}
            details.update(spec_cap_length=None, spec_block_accept_length=None, spec_cap_lens_histogram=None)
            reply["sglext"] = {"spec_tokens_details": details}
        return body_of(reply)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/server_info", server_info, methods=["GET"]),
        Route("/get_server_info", server_info, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/generate", generate, methods=["POST", "PUT"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/weights_checker", weights_checker, methods=["GET", "POST"]),
    ]
    if engine.metrics is not None:
        routes.append(Route("/metrics", metrics, methods=["GET"]))
    return Starlette(routes=routes)


def _rid(rids: Any, i: int) -> str | None:
    if isinstance(rids, list):
        return str(rids[i]) if i < len(rids) else None
    return str(rids) if rids is not None else None


class _Job:
    """One prompt of a request: decode it, sleep its simulated time, build SGLang's reply."""

    def __init__(self, engine: SimEngine, prompt: str, params: dict[str, Any], rid: str | None) -> None:
        self.engine = engine
        self.rid = rid or engine.next_request_id()
        temperature = params.get("temperature", 1.0)
        self.temperature = float(temperature) if isinstance(temperature, (int, float)) else 1.0
        mnt = params.get("max_new_tokens", 128)
        self.max_new_tokens = int(mnt) if isinstance(mnt, int) and mnt > 0 else 128
        seed = params.get("sampling_seed")
        self.result = dm.decode(
            engine.scenario,
            seed=engine.config.seed,
            prompt=prompt,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            sampling_seed=seed if isinstance(seed, int) else None,
        )
        self.received = time.time()

    def meta(self, completion_tokens: int, *, final: bool) -> dict[str, Any]:
        d, sc = self.result, self.engine.scenario
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": {"type": "length", "length": self.max_new_tokens} if final else None,
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
        if final:
            meta["e2e_latency"] = d.ttft_s + d.decode_s
            if d.verify_ct > 0:
                proposed = d.verify_ct * sc.drafts_per_verify
                meta.update(
                    spec_accept_rate=d.correct_drafts / proposed,
                    spec_accept_length=d.completion_tokens / d.verify_ct,
                    spec_num_correct_drafts=d.correct_drafts,
                    spec_num_proposed_drafts=proposed,
                    spec_verify_ct=d.verify_ct,
                    spec_correct_drafts_histogram=d.histogram(),
                )
        return meta

    def _finish(self, streaming: bool) -> None:
        d, m = self.result, self.engine.metrics
        if m is not None:
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
        e.running += 1
        try:
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

    async def frames(self) -> AsyncIterator[dict[str, Any]]:
        d, e = self.result, self.engine
        chunks = dm.stream_chunks(d)
        per_chunk = d.decode_s / max(1, len(chunks) - 1)
        words = d.text.split(" ") if not e.scenario.degenerate else list(d.text)
        sep = "" if e.scenario.degenerate else " "
        e.running += 1
        try:
            sent = 0
            for n, size in enumerate(chunks):
                await asyncio.sleep(e.sleep_s(d.ttft_s if n == 0 else per_chunk))
                sent += size
                if n > 0:
                    k = d.rounds[n - 1] if d.rounds else None
                    e.account([k] if k is not None else [], 0 if d.rounds else 1, size)
                final = sent >= d.completion_tokens
                yield {"text": sep.join(words[:sent]), "output_ids": d.output_ids[:sent],
                       "meta_info": self.meta(sent, final=final)}  # fmt: skip
                if final:
                    break
        finally:
            e.running -= 1
        self._finish(streaming=True)


async def _stream(engine: SimEngine, jobs: list[_Job]) -> AsyncIterator[bytes]:
    for index, job in enumerate(jobs):
        async for frame in job.frames():
            if len(jobs) > 1:
                frame["index"] = index
            text = json.dumps(frame, separators=(",", ":"))
            if engine.scenario.malformed_json:
                text = text[: max(1, len(text) // 2)]
            yield f"data: {text}\n\n".encode()
    yield b"data: [DONE]\n\n"
