"""The OpenAI-compatible surface: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models[/{model}]``.

Shapes follow ``srt/entrypoints/openai/protocol.py`` as pydantic dumps them (every field, ``None``
included); ``stream: true`` is real SSE as ``serving_completions.py`` (l.240-470) and ``serving_chat.py``
(l.2441-2806) write it, ``sglext`` and usage chunks included, then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from validator.sim import contract
from validator.sim.job import GrammarError, Job

if TYPE_CHECKING:
    from validator.sim.engine import SimEngine

_SPEC_KEYS = (
    "spec_accept_rate",
    "spec_accept_length",
    "spec_cap_length",
    "spec_block_accept_length",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_verify_ct",
    "spec_correct_drafts_histogram",
    "spec_cap_lens_histogram",
)
# Line of each handler's first decorator in srt/entrypoints/http_server.py (FastAPI reports it).
_HANDLERS = {"/v1/completions": ("openai_v1_completions", 1860),
             "/v1/chat/completions": ("openai_v1_chat_completions", 1870)}  # fmt: skip


def as_json(body: Any, status: int = 200) -> Response:
    """A JSON reply as SGLang's server writes it (compact separators); ``app`` answers with it too."""
    return Response(
        json.dumps(body, separators=(",", ":")), status_code=status, media_type="application/json"
    )


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def spec_details(meta: dict[str, Any]) -> dict[str, Any] | None:
    """``SpecTokensDetails`` from a final ``meta_info`` (srt/entrypoints/openai/utils.py:311-340)."""
    if "spec_verify_ct" not in meta:
        return None
    details: dict[str, Any] = {k: meta.get(k) for k in _SPEC_KEYS}
    details["spec_correct_drafts_histogram"] = meta.get("spec_correct_drafts_histogram") or []
    details["spec_cap_lens_histogram"] = meta.get("spec_cap_lens_histogram") or []
    return details


def _prompt(body: dict[str, Any], chat: bool) -> str:
    if chat:
        parts: list[str] = []
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [str(c.get("text", "")) for c in content if isinstance(c, dict)]
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return " ".join(str(p) for p in prompt)
    return str(prompt)


def _params(body: dict[str, Any], chat: bool) -> dict[str, Any]:
    default = 128 if chat else 16  # CompletionRequest.max_tokens defaults to 16; chat runs to EOS
    mnt = body.get("max_completion_tokens") or body.get("max_tokens") or default
    params: dict[str, Any] = {"max_new_tokens": mnt, "temperature": body.get("temperature", 1.0)}
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema", spec.get("schema_")) if isinstance(spec, dict) else None
        params["json_schema"] = json.dumps(schema if schema is not None else {})
    if isinstance(body.get("seed"), int):
        params["sampling_seed"] = body["seed"]
    return params


def routes(engine: SimEngine, gate: Callable[[Request], Response | None],
           body_of: Callable[[Any], Response]) -> list[Route]:  # fmt: skip
    async def models(request: Request) -> Response:
        if denied := gate(request):
            return denied
        return body_of({"object": "list", "data": [engine.model_card()]})

    async def retrieve(request: Request) -> Response:
        """``retrieve_model`` (http_server.py:2025-2046): the served name or a 404 in OpenAI's shape."""
        if denied := gate(request):
            return denied
        model = request.path_params["model"]
        if model != engine.args["served_model_name"]:
            error = {"message": f"The model '{model}' does not exist", "type": "invalid_request_error",
                     "param": "model", "code": "model_not_found"}  # fmt: skip
            return as_json({"error": error}, 404)
        return body_of(engine.model_card(model))

    async def _openai(request: Request, *, chat: bool) -> Response:
        if denied := gate(request):
            return denied
        handler, line = _HANDLERS[request.url.path]
        model = "ChatCompletionRequest" if chat else "CompletionRequest"
        body, bad = contract.decode_body(
            await request.body(),
            model=model,
            method="POST",
            path=request.url.path,
            handler=handler,
            line=line,
        )
        if bad is not None:
            return as_json(bad, 400)
        if not engine.loaded:
            return as_json(contract.bad_request("The server is not ready yet (starting up).", code=503), 503)
        try:
            job = Job(engine, _prompt(body, chat), _params(body, chat), None)
        except GrammarError as exc:
            return as_json(contract.bad_request(str(exc), err_type="BadRequestError"), 400)
        if engine.scenario.crash_after_ready:
            engine.crash()
            await asyncio.Event().wait()  # never answered: the process is going away
        model = body.get("model") or engine.args["served_model_name"]
        if body.get("stream"):
            return StreamingResponse(_stream(job, body, model, chat=chat), media_type="text/event-stream")
        out = await job.run()
        return body_of(_reply(job, out, body, model, chat=chat))

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", retrieve, methods=["GET"]),
        Route("/v1/completions", partial(_openai, chat=False), methods=["POST"]),
        Route("/v1/chat/completions", partial(_openai, chat=True), methods=["POST"]),
    ]


def _finish(meta: dict[str, Any]) -> tuple[str | None, Any]:
    reason = meta.get("finish_reason")
    if not reason:
        return None, None
    return str(reason["type"]), reason.get("matched")


def _reply(job: Job, out: dict[str, Any], body: dict[str, Any], model: str, *, chat: bool) -> dict[str, Any]:
    meta = out["meta_info"]
    finish, matched = _finish(meta)
    if chat:
        message = {"role": "assistant", "content": out["text"], "reasoning_content": None, "tool_calls": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                  "matched_stop": matched, "hidden_states": None, "prompt_token_ids": None,
                  "response_token_ids": None, "meta_info": None}  # fmt: skip
    else:
        choice = _text_choice(out["text"], finish, matched)
    reply: dict[str, Any] = {
        "id": meta["id"],
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(meta["prompt_tokens"], meta["completion_tokens"]),
        "metadata": None,
        "sglext": None,
    }
    details = spec_details(meta) if body.get("return_spec_tokens_details") else None
    if details is not None:
        reply["sglext"] = _sglext(details)
    return reply


def _text_choice(text: str, finish: str | None, matched: Any) -> dict[str, Any]:
    """A completion's choice: the same fields in a reply and in a stream chunk."""
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": matched,
            "hidden_states": None, "token_ids": None, "prompt_token_ids": None}  # fmt: skip


def _sglext(details: dict[str, Any]) -> dict[str, Any]:
    return {"routed_experts": None, "cached_tokens_details": None, "spec_tokens_details": details,
            "input_ids": None, "output_ids": None}  # fmt: skip


def _chunk(job: Job, model: str, created: int, choices: list[dict[str, Any]], *, chat: bool,
           usage: dict[str, Any] | None = None, sglext: dict[str, Any] | None = None) -> bytes:  # fmt: skip
    chunk = {
        "id": job.rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage,
        "sglext": sglext,
    }
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()


def _delta(content: str, role: str | None = None) -> dict[str, Any]:
    return {"role": role, "content": content, "reasoning_content": None, "tool_calls": None,
            "hidden_states": None}  # fmt: skip


async def _stream(job: Job, body: dict[str, Any], model: str, *, chat: bool) -> AsyncIterator[bytes]:
    created = int(time.time())
    opts = body.get("stream_options")
    include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
    offset = 0
    meta: dict[str, Any] = {}
    if chat:
        first = {"index": 0, "delta": _delta("", "assistant"), "logprobs": None, "finish_reason": None,
                 "matched_stop": None}  # fmt: skip
        yield _chunk(job, model, created, [first], chat=True)
    async for frame in job.frames():
        meta = frame["meta_info"]
        text = frame["text"]
        delta, offset = text[offset:], len(text)
        finish, matched = _finish(meta)
        if chat:
            choice = {"index": 0, "delta": _delta(delta), "logprobs": None, "finish_reason": finish,
                      "matched_stop": matched}  # fmt: skip
        else:
            choice = _text_choice(delta, finish, matched)
        yield _chunk(job, model, created, [choice], chat=chat)
    details = spec_details(meta) if body.get("return_spec_tokens_details") else None
    if details is not None:
        yield _chunk(job, model, created, [], chat=chat, sglext=_sglext(details))
    if include_usage and meta:
        usage = _usage(meta["prompt_tokens"], meta["completion_tokens"])
        if chat:
            yield _chunk(job, model, created, [], chat=True, usage=usage)
        else:  # serving_completions.py:488-496 dumps this one with exclude_none=True
            chunk = {"id": job.rid, "object": "text_completion", "created": created, "model": model,
                     "choices": [], "usage": {k: v for k, v in usage.items() if v is not None}}  # fmt: skip
            yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()
    yield b"data: [DONE]\n\n"
