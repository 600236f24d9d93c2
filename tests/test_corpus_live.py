"""Real SGLang replies (``tests/corpus/``, sources in each folder's README) served from a loopback stand-in:
``check`` and the probe must conclude what an SGLang expert concludes from them.

- ``/server_info`` of SGLang's docs builds has no ``startup_time``, ``launch_command``, ``frontend`` or
  ``kv_events``: the server is read, its identity still known (``random_seed``), and ``spec.config`` never
  blames a ``launch_command`` that the build does not serve.
- The docs ``/metrics`` dump has no speculative series: no finding, the server's acceptance absent. A
  gauge at 1.00 while the generation counter grows fails ``spec.accept_length`` without a probe token.
- Each real ``/generate`` shape gives the acceptance its own fields imply; a reply without ``spec_*``
  fields is missing evidence (``spec.accept_length`` error), never degenerate output.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.cli import json_report
from tests.support.in_process import check_in_process
from tests.support.probe_live_server import serve
from validator.probe import ProbeConfig, ProbePrompt, probe_server
from validator.sources.server.client import SGLangClient
from validator.sources.server.identity import ServerIdentity
from validator.sources.server.metrics_reading import MetricsWatch, parse_metrics

CORPUS = Path(__file__).resolve().parent / "corpus"
OLD_DUMP = CORPUS / "server_info" / "docs-get_server_info-g753da2753.json"
NEW_DUMP = CORPUS / "server_info" / "docs-server_info-g5dd2c243e.json"
METRICS = CORPUS / "metrics" / "docs-production_metrics-llama-3.1-8b.txt"
GENERATE = CORPUS / "generate"
PROMPTS = [ProbePrompt(f"p{i}", f"prompt {i}", 256) for i in range(4)]


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class StandIn:
    """An SGLang-shaped server that answers with the corpus' bodies. ``metrics`` is a callable so that a
    test can make the counters move between scrapes (as a decoding server's do)."""

    def __init__(
        self,
        info: dict[str, Any],
        *,
        info_path: str = "/server_info",
        metrics: Any = None,
        meta: dict[str, Any] | None = None,
        text: str = "The capital of France is Paris, a city on the Seine.",
    ) -> None:
        self.info, self.info_path, self.metrics, self.meta, self.text = info, info_path, metrics, meta, text
        self.generated = 0

    def app(self) -> Starlette:
        async def health(request: Request) -> Response:
            return Response(status_code=200)

        async def info(request: Request) -> Response:
            return JSONResponse(self.info)

        async def metrics(request: Request) -> Response:
            if self.metrics is None:
                return PlainTextResponse('{"detail":"Not Found"}', status_code=404)
            return PlainTextResponse(self.metrics())

        async def generate(request: Request) -> Response:
            body = await request.json()
            self.generated += 1
            reply = {"text": self.text, "meta_info": copy.deepcopy(self.meta or {})}
            if not body.get("stream"):
                return JSONResponse(reply)

            async def frames() -> Any:
                yield f"data: {json.dumps(reply)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(frames(), media_type="text/event-stream")

        return Starlette(
            routes=[
                Route("/health", health),
                Route(self.info_path, info),
                Route("/metrics", metrics),
                Route("/generate", generate, methods=["POST"]),
            ]
        )


@contextmanager
def stand_in(**kw: Any) -> Iterator[tuple[str, StandIn]]:
    info = kw.pop("info")
    s = StandIn(info, **kw)
    with serve(s.app()) as url:
        yield url, s


def _check(url: str, *args: str) -> dict[str, Any]:
    """The real ``check`` front door in this process (tests/support/in_process.py) against the stand-in."""
    run = check_in_process(url, "--wait", "10", *args)
    assert "Traceback" not in run.stderr, run.stderr
    return json_report(run.stdout) | {"_rc": run.rc}


def _one(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


def _nextn(dump: dict[str, Any]) -> dict[str, Any]:
    """The same build serving the recipe's resolved speculation (NEXTN shows as EAGLE with the model's own
    checkpoint as draft); every key the build lacks stays absent."""
    info = copy.deepcopy(dump)
    model = "/models/Ling-3.0-flash-fp4"
    info.update(
        model_path=model,
        served_model_name=model,
        speculative_algorithm="EAGLE",
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
        speculative_draft_model_path=model,
    )
    return info


# ---- /server_info ----


@pytest.mark.parametrize(("dump", "path"), [(OLD_DUMP, "/get_server_info"), (NEW_DUMP, "/server_info")])
def test_real_server_info_is_read_and_no_launch_command_is_blamed(dump: Path, path: str) -> None:
    info = _load(dump)
    assert not {"startup_time", "launch_command", "frontend", "kv_events"} & set(info)
    with stand_in(info=info, info_path=path) as (url, _):
        report = _check(url, "--no-probe")
    ready = _one(report, "server.ready")
    assert ready["status"] == "pass" and ready["evidence"]["version"] == info["version"]
    assert ready["evidence"]["server_info_endpoint"] == path
    spec = _one(report, "spec.config")
    # a Qwen server without speculation does not follow the recipe: said so, for the right reason
    assert spec["status"] == "fail" and "speculative decoding is off" in spec["message"]
    assert "launch_command" not in json.dumps(report)


@pytest.mark.parametrize("dump", [OLD_DUMP, NEW_DUMP])
def test_restart_detection_keys_on_the_seed_every_build_serves(dump: Path) -> None:
    info = _load(dump)
    ident = ServerIdentity.from_server(info)
    assert ident.startup_time is None and ident.random_seed == info["random_seed"]
    assert ident.same_server(ServerIdentity.from_server(copy.deepcopy(info)))
    restarted = {**info, "random_seed": info["random_seed"] + 1}
    assert not ident.same_server(ServerIdentity.from_server(restarted))
    # a field one side lacks is no sign of a restart
    assert ident.same_server(ServerIdentity.from_server({**info, "startup_time": {"load_weight": 1.0}}))


def test_spec_config_judged_from_resolved_fields_without_launch_command() -> None:
    info = _nextn(_load(NEW_DUMP))
    with stand_in(info=info) as (url, _):
        spec = _one(_check(url, "--no-probe"), "spec.config")
    assert spec["status"] == "pass", spec
    assert "lacks" not in spec["message"] and "EAGLE" in spec["message"]
    other = {**info, "speculative_draft_model_path": "/models/some-eagle-head"}
    with stand_in(info=other) as (url, _):
        spec = _one(_check(url, "--no-probe"), "spec.config")
    assert spec["status"] == "fail" and "expected NEXTN" in spec["message"]
    assert "no launch_command" in spec["message"] and "lacks NEXTN" not in spec["message"]


# ---- /metrics ----


def test_real_metrics_dump_parses_without_speculative_series() -> None:
    reading = parse_metrics(METRICS.read_text(encoding="utf-8"))
    assert reading.accept_length is None and reading.accept_lengths == ()
    assert reading.generation_tokens == 7557572.0 and reading.verify_calls is None
    facts = MetricsWatch().observe(reading)
    assert not facts.collapsed and facts.evidence()["server_accept_length"] is None


@pytest.mark.parametrize("served", [True, False])
def test_no_speculative_gauge_or_no_metrics_is_not_a_finding(served: bool) -> None:
    text = METRICS.read_text(encoding="utf-8")
    with stand_in(info=_nextn(_load(NEW_DUMP)), metrics=(lambda: text) if served else None) as (url, _):
        report = _check(url, "--no-probe")
    acc = _one(report, "spec.accept_length")
    assert acc["status"] == "error" and acc["evidence"]["server_accept_length"] is None, acc
    if not served:
        assert "--enable-metrics" in acc["evidence"]["server_metrics_note"]


def _with_gauge(value: float, counter: list[float]) -> Any:
    """The real dump plus the speculative gauge in the same build's label style; the generation counter
    grows by 400 tokens per scrape, as on a server decoding production traffic."""
    base = METRICS.read_text(encoding="utf-8")
    model = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'

    def render() -> str:
        counter[0] += 400
        text = base.replace(
            f"sglang:generation_tokens_total{{{model}}} 7.557572e+06",
            f"sglang:generation_tokens_total{{{model}}} {counter[0]}",
        )
        return (
            text
            + "# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.\n"
            + "# TYPE sglang:spec_accept_length gauge\n"
            + f"sglang:spec_accept_length{{{model}}} {value}\n"
        )

    return render


def test_server_gauge_at_one_while_decoding_fails_without_a_probe_token() -> None:
    counter = [7557572.0]
    with stand_in(info=_nextn(_load(NEW_DUMP)), metrics=_with_gauge(1.0, counter)) as (url, s):
        report = _check(url, "--no-probe")
        assert s.generated == 0  # no probe token spent
    acc = _one(report, "spec.accept_length")
    assert acc["status"] == "fail" and "sglang:spec_accept_length is 1.00" in acc["message"], acc
    assert acc["evidence"]["server_decoding"] is True and acc["evidence"]["server_accept_length"] == 1.0
    assert report["verdict"] == "fail" and report["_rc"] == 78


def test_healthy_server_gauge_is_evidence_not_a_verdict() -> None:
    counter = [7557572.0]
    with stand_in(info=_nextn(_load(NEW_DUMP)), metrics=_with_gauge(3.12, counter)) as (url, _):
        acc = _one(_check(url, "--no-probe"), "spec.accept_length")
    assert acc["status"] == "error" and acc["evidence"]["server_accept_length"] == 3.12


# ---- /generate ----


def _probe(meta: dict[str, Any], info: dict[str, Any] | None = None) -> Any:
    with stand_in(info=info or _nextn(_load(NEW_DUMP)), meta=meta) as (url, _):

        async def go() -> Any:
            async with SGLangClient(url) as client:
                return await probe_server(client, PROMPTS, ProbeConfig(max_total_tokens=2048))

        return asyncio.run(go())


@pytest.mark.parametrize(
    ("name", "extra", "accept_length"),
    [
        ("sglang-bench_sglang_eagle-meta_info.json", {}, 256 / 101),  # completion_tokens / spec_verify_ct
        ("tgl-aliases-meta_info.json", {}, 4.266666666666667),  # the reply's own spec_accept_length
        ("pr33518-dspark-spec_tokens_details.json", {"completion_tokens": 106}, 2.4651162790697674),
    ],
)
def test_real_generate_shapes_give_their_own_acceptance(
    name: str, extra: dict[str, Any], accept_length: float
) -> None:
    meta = {**_load(GENERATE / name), **extra}
    r = _probe(meta)
    assert r.accept_length == pytest.approx(accept_length) and r.problems == [] and r.missing_fields == []
    assert r.accept_length_reported == pytest.approx(accept_length)


def test_reply_without_spec_fields_is_missing_evidence_not_degenerate_text() -> None:
    reply = _load(GENERATE / "docs-generate-g5dd2c243e.json")
    r = _probe(reply["meta_info"])
    assert r.accept_length is None and r.problems == [] and r.missing_fields
    with stand_in(info=_nextn(_load(NEW_DUMP)), meta=reply["meta_info"], text=reply["text"]) as (url, _):
        report = _check(url)
    assert _one(report, "probe.output")["status"] == "pass"
    acc = _one(report, "spec.accept_length")
    assert acc["status"] == "error" and "no spec_verify_ct" in acc["message"]
    # what does fail here is the dump's own configuration (a Qwen server's MoE backend "auto", no FP8
    # head), never the reading of the reply
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert not failed & {"probe.output", "spec.accept_length", "perf.tpot"}, failed
