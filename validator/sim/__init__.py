"""An SGLang 0.5.23-compatible simulated server for Ling-3.0-flash-fp4 with the failures the validator
catches: ``SimServer`` in-process (``demo``, tests), ``spark-validate sim`` in the foreground.

One module per surface (``scenarios``, ``server_args``, ``engine``, ``decode``, ``job``, ``app``,
``openai_api``, ``auth``, ``contract``, ``metrics``, ``server_log``, ``weights``, ``attestation``,
``runner``). The package imports none of them, so ``process_view`` stays light for ``launch``: import what
you use from its module (``validator.sim.runner.SimServer``).
"""
