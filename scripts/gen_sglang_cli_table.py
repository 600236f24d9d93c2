"""Regenerate the shipped SGLang flag table: ``validator/sglang_tablegen.py`` run by this interpreter.

Run with the interpreter of a venv that has SGLang installed (``scripts/setup_sglang_env.sh``)::

    .venv-sglang/bin/python scripts/gen_sglang_cli_table.py [--output validator/data/sglang-0.5.23-cli.json]
    .venv-sglang/bin/python scripts/gen_sglang_cli_table.py --stdout     # for the freshness test

The generator is loaded by path (standard library only), so this interpreter needs SGLang, not
spark-validate.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    generator = REPO / "validator" / "sglang_tablegen.py"
    spec = importlib.util.spec_from_file_location("sglang_tablegen", generator)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raise SystemExit(module.main(default_output=REPO / "validator" / "data" / "sglang-0.5.23-cli.json"))
