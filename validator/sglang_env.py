"""How SGLang reads a boolean environment variable (``EnvBool`` in ``srt/environ.py``), for the checks that
judge what a variable asks for and for ``--rules auto``, which must read the request the same way."""

from __future__ import annotations


def env_bool(value: str | None) -> bool | None:
    """SGLang's EnvBool: true/1/yes/y and false/0/no/n (any case); anything else is invalid (None), and
    SGLang then warns and uses the default (False). Unset is False."""
    if value is None:
        return False
    v = value.strip().lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    return None
