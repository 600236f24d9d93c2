"""The ASGI app of the simulated SGLang 0.5.23 server (starlette): the native routes, and the wiring.

Paths, auth, status codes and body shapes follow ``srt/entrypoints/http_server.py``: empty-bodied 200/503
for ``/health``, ``/health_generate`` and ``/ready``; the API-key middleware of ``auth.py`` in front of
everything; the three ``/generate`` error replies of ``contract.py``; SSE ``data:`` frames ending in
``data: [DONE]`` for streaming. The OpenAI surface is ``openai_api.py``, one prompt's decoding ``job.py``.
Failure scenarios bend exactly one thing each.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from validator.sim import contract, openai_api, weights
from validator.sim.auth import ApiKeyMiddleware
from validator.sim.engine import SimEngine
from validator.sim.job import GrammarError, Job
from validator.sim.openai_api import as_json

_GENERATE_LINE = 928  # the line of generate_request's @app.api_route in http_server.py (FastAPI reports it)
_FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)


def create_app(engine: SimEngine) -> Starlette:
    sc = engine.scenario

    def gate(request: Request) -> Response | None:
        """Flakiness, after auth (the middleware) and before the handler."""
        if engine.flaky_hit():
            return as_json(contract.value_error("Service temporarily unavailable (simulated flaky-5xx)"), 503)
        return None

    def body_of(payload: Any) -> Response:
        if sc.malformed_json:
            text = json.dumps(payload)
            return Response(text[: max(1, len(text) // 2)], media_type="application/json")
        return as_json(payload)

    async def health(request: Request) -> Response:
        if not engine.ready or engine.crashed:
            return Response(status_code=503)
        # health_generate (http_server.py:745-784): a 1-token generation, polled once a second
        await asyncio.sleep(engine.sleep_s(1.0))
        return Response(status_code=200 if engine.ready else 503)

    async def ready(request: Request) -> Response:
        return Response(status_code=200 if engine.ready else 503)

    def _deprecated(request: Request) -> None:
        """``/get_model_info`` and ``/get_server_info`` log a warning first (http_server.py:805-811)."""
        old = request.url.path
        if old.startswith("/get_") and engine.api_style.server_info_route:  # deprecated only once renamed
            engine.log.line(
                f"Endpoint '{old}' is deprecated and will be removed in a future version. "
                f"Please use '{old.replace('/get_', '/', 1)}' instead."
            )

    async def model_info(request: Request) -> Response:
        _deprecated(request)
        return gate(request) or body_of(engine.model_info())

    async def server_info(request: Request) -> Response:
        _deprecated(request)
        return gate(request) or body_of(engine.server_info())

    async def metrics(request: Request) -> Response:
        assert engine.metrics is not None
        return Response(engine.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def flush_cache(request: Request) -> Response:
        """``flush_cache`` (http_server.py:1025-1043): plain text, 200 when nothing is running."""
        if denied := gate(request):
            return denied
        if engine.running:
            return Response("Flush cache failed.\n", status_code=400)
        engine.log.line("Cache flushed successfully!", tp=True)
        return Response(_FLUSHED, media_type="text/plain")

    async def weights_checker(request: Request) -> Response:
        if denied := gate(request):
            return denied
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return as_json(contract.value_error("request body is not valid JSON"), 422)
        status, payload = weights.reply(sc, engine.config.seed, body if isinstance(body, dict) else {})
        return as_json(payload, status)

    async def generate(request: Request) -> Response:
        if denied := gate(request):
            return denied
        body, bad = contract.decode_body(
            await request.body(), model="GenerateReqInput", method=request.method, path="/generate",
            handler="generate_request", line=_GENERATE_LINE,
        )  # fmt: skip
        if bad is not None:
            return as_json(bad, 400)
        try:
            contract.check_generate(body)
        except contract.ContractError as exc:
            return as_json({"error": str(exc)}, 400)
        if not engine.loaded:
            return as_json(contract.value_error("The server is not ready yet (starting up)."), 503)
        stream = bool(body.get("stream"))
        try:
            jobs, batch = _jobs(engine, body)
        except (ValueError, GrammarError) as exc:
            if stream:
                return StreamingResponse(_error_stream(str(exc)), media_type="text/event-stream")
            return as_json(contract.value_error(str(exc)), 400)
        if sc.crash_after_ready:
            engine.crash()
            await asyncio.Event().wait()  # never answered: the process is going away
        if stream:
            return StreamingResponse(_stream(engine, jobs), media_type="text/event-stream")
        outs = await asyncio.gather(*(job.run() for job in jobs))
        return body_of(outs if batch else outs[0])

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        *(
            [Route("/server_info", server_info, methods=["GET"])]
            if engine.api_style.server_info_route
            else []
        ),
        Route("/get_server_info", server_info, methods=["GET"]),
        Route("/generate", generate, methods=["POST", "PUT"]),
        Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
        Route("/weights_checker", weights_checker, methods=["GET", "POST"]),
        *openai_api.routes(engine, gate, body_of),
    ]
    if engine.metrics is not None:
        routes.append(Route("/metrics", metrics, methods=["GET"]))
    return Starlette(routes=routes, middleware=[Middleware(ApiKeyMiddleware, api_key=engine.api_key)])


def _jobs(engine: SimEngine, body: dict[str, Any]) -> tuple[list[Job], bool]:
    """The request's prompts as jobs; ``ValueError`` where ``GenerateReqInput`` normalisation raises."""
    texts = body.get("text")
    ids = body.get("input_ids")
    if texts is None and ids is None:
        raise ValueError(contract.NO_INPUT)
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
    if len(plist) != len(prompts):
        raise ValueError("The length of sampling_params does not match the batch size.")
    rids = body.get("rid")
    logprobs = None
    if body.get("return_logprob") is True:
        logprobs = {k: body.get(k) for k in ("top_logprobs_num", "return_text_in_logprobs")}
    jobs = [
        Job(engine, prompt, plist[i], _rid(rids, i), logprobs=logprobs) for i, prompt in enumerate(prompts)
    ]
    return jobs, batch


def _rid(rids: Any, i: int) -> str | None:
    if isinstance(rids, list):
        return str(rids[i]) if i < len(rids) else None
    return str(rids) if rids is not None else None


async def _error_stream(message: str) -> AsyncIterator[bytes]:
    yield f"data: {json.dumps(contract.stream_error(message), separators=(',', ':'))}\n\n".encode()
    yield b"data: [DONE]\n\n"


async def _stream(engine: SimEngine, jobs: list[Job]) -> AsyncIterator[bytes]:
    for index, job in enumerate(jobs):
        async for frame in job.frames():
            if len(jobs) > 1:
                frame["index"] = index
            text = json.dumps(frame, separators=(",", ":"))
            if engine.scenario.malformed_json:
                text = text[: max(1, len(text) // 2)]
            yield f"data: {text}\n\n".encode()
    yield b"data: [DONE]\n\n"
