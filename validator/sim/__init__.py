"""An SGLang 0.5.23-compatible simulated server for Ling-3.0-flash-fp4 with the failures the validator
catches.

``SimServer`` runs it in-process (``demo``, tests); ``spark-validate sim`` / ``python -m validator.sim`` run
it in the foreground. starlette and uvicorn are imported only when a server is actually built.

One module per surface: ``scenarios`` (the table, as data), ``server_args`` (launch command and resolved
args), ``engine`` (state, start-up phases, step accounting), ``decode`` (acceptance and timing), ``job`` (one
prompt's replies), ``app`` (native routes), ``openai_api``, ``auth``, ``contract`` (request checks and error
bodies), ``metrics``, ``server_log``, ``weights`` (``/weights_checker``), ``attestation``, ``runner``.
"""

from __future__ import annotations

from validator.sim.runner import SimServer
from validator.sim.scenarios import SCENARIOS, Scenario, resolve

__all__ = ["SCENARIOS", "Scenario", "SimServer", "resolve"]
