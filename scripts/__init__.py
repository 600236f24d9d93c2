"""Maintenance scripts, run from the checkout (``python -m scripts.NAME``, or by path with another
interpreter, like ``gen_sglang_cli_table.py`` under the SGLang venv)."""
