"""An SGLang 0.5.23-compatible simulated server for Ling-3.0-flash-fp4 with the failures the validator
catches.

``SimServer`` runs it in-process (``demo``, tests); ``spark-validate sim`` / ``python -m validator.sim`` run
it in the foreground. starlette and uvicorn are imported only when a server is actually built.

One module per surface: ``scenarios`` (the table, as data), ``server_args`` (launch command and resolved
args), ``engine`` (state, start-up phases, step accounting), ``decode`` (acceptance and timing), ``job`` (one
prompt's replies), ``app`` (native routes), ``openai_api``, ``auth``, ``contract`` (request checks and error
bodies), ``metrics``, ``server_log``, ``weights`` (``/weights_checker``), ``attestation``, ``runner``.

The package itself imports none of them: ``launch`` and ``check`` read a simulator's command line through
``process_view`` (which needs only ``scenarios`` and ``server_args``), and importing ``runner`` with it
would load the engine, asyncio and prometheus_client into every ``launch`` (about 70 ms). Import what you
use from its module: ``validator.sim.runner.SimServer``, ``validator.sim.scenarios.SCENARIOS``.
"""
