"""An SGLang-shaped HTTP server on loopback that answers ``/health``, ``/server_info`` and ``/model_info``
with documents a test gives (the simulator's, edited), for live checks that need a server state the
simulator's scenarios do not offer (another model, another tool-call parser, a build without
``launch_command``). Served by uvicorn in a thread (tests/support/probe_live_server.py); no ``/generate``,
so checks run with ``--no-probe``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.probe_live_server import serve


def sim_documents(scenario: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The simulator's ``/server_info`` and ``/model_info`` for ``scenario``, to edit."""
    from validator.sim.engine import SimConfig, SimEngine
    from validator.sim.scenarios import resolve

    engine = SimEngine(SimConfig(scenario=resolve(scenario), startup_seconds=0))
    return engine.server_info(), engine.model_info()


def _app(server_info: dict[str, Any], model_info: dict[str, Any]) -> Starlette:
    async def health(_: Request) -> Response:
        return Response(status_code=200)

    async def info(_: Request) -> JSONResponse:
        return JSONResponse(server_info)

    async def model(_: Request) -> JSONResponse:
        return JSONResponse(model_info)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/server_info", info),
            Route("/get_server_info", info),
            Route("/model_info", model),
        ]
    )


@contextmanager
def document_server(server_info: dict[str, Any], model_info: dict[str, Any]) -> Iterator[str]:
    """Serve the two documents; yields the base URL."""
    with serve(_app(server_info, model_info)) as url:
        yield url
