"""Secret redaction for every output: reports, logs, error messages.

SGLang's ``/server_info`` returns ``api_key`` and ``admin_api_key`` in clear, and ``launch_command`` may
carry ``--api-key VALUE``; a validator that echoes evidence would leak them into JSON reports, JUnit
files, journald and Prometheus. Everything that leaves the process goes through :func:`redact` (for
structured data) or :func:`redact_text` (for free text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"

_ALWAYS = frozenset({"api_key", "admin_api_key"})
_SUBSTRINGS = ("secret", "password", "passwd", "credential", "private_key", "authorization")
# ``--api-key VALUE`` / ``--admin-api-key=VALUE`` / ``api_key=VALUE`` inside command lines and log text.
_FLAG_RE = re.compile(
    r"(?P<flag>--(?:admin-)?api-key|--[\w-]*(?:secret|password)[\w-]*|--[\w-]*token(?![\w-]))"
    r"(?P<sep>[= ]+)(?P<val>[^\s'\",]+)",
    re.IGNORECASE,
)
_KV_RE = re.compile(
    r"(?P<flag>['\"]?(?:admin_)?api_key['\"]?)(?P<sep>\s*[:=]\s*)(?P<val>(?!None\b|null\b)(?:'[^']*'|\"[^\"]*\"|[^\s,}]+))",
    re.IGNORECASE,
)
_MIN_SECRET_LEN = 4  # shorter literals would shred unrelated text; such keys are worthless anyway


def is_secret_key(key: str, value: Any, extra_keys: Iterable[str] = ()) -> bool:
    """True when ``key`` names a credential. ``token`` counts only as the last word of the key and only
    for string values, so ``max_new_tokens`` or ``hot_token_id`` stay visible while ``hf_token`` does not."""
    k = key.lower()
    if k in _ALWAYS or k in {e.lower() for e in extra_keys}:
        return True
    if any(s in k for s in _SUBSTRINGS):
        return True
    words = re.split(r"[_\-.]", k)
    return isinstance(value, str) and words[-1] == "token"


def collect_secrets(obj: Any, extra_keys: Iterable[str] = ()) -> set[str]:
    """Literal secret values found under secret keys anywhere in ``obj`` (to scrub them elsewhere)."""
    found: set[str] = set()
    extra = tuple(extra_keys)
    stack: list[Any] = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                if isinstance(k, str) and is_secret_key(k, v, extra) and isinstance(v, str) and v:
                    found.add(v)
                else:
                    stack.append(v)
        elif isinstance(cur, (list, tuple)):
            stack.extend(cur)
    return found


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replace every literal secret value, and any ``--api-key VALUE`` style pair, in free text."""
    for s in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    text = _FLAG_RE.sub(lambda m: f"{m['flag']}{m['sep']}{REDACTED}", text)
    return _KV_RE.sub(lambda m: f"{m['flag']}{m['sep']}{REDACTED}", text)


def redact(obj: Any, extra_keys: Iterable[str] = (), secrets: Iterable[str | None] = ()) -> Any:
    """A deep copy of ``obj`` with secret values replaced by ``<redacted>``, and every secret value found
    (or given in ``secrets``) scrubbed from the other strings, such as ``launch_command``."""
    extra = tuple(extra_keys)
    known = collect_secrets(obj, extra) | {s for s in secrets if s}
    return _redact(obj, extra, known)


def _redact(obj: Any, extra: tuple[str, ...], known: set[str]) -> Any:
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k, v, extra) and v not in (None, "", False):
                out[k] = REDACTED
            else:
                out[k] = _redact(v, extra, known)
        return out
    if isinstance(obj, list):
        return [_redact(v, extra, known) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_redact(v, extra, known) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj, known)
    return obj
