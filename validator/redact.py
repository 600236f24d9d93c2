"""Secret redaction for every output: reports, logs, error messages.

``/server_info`` returns ``api_key`` in clear and ``launch_command`` may carry ``--api-key``; everything that
leaves the process goes through :func:`redact` (structured) or :func:`redact_text` (free text). Known
secret values (``--api-key-file``, URL credentials) are registered once with :func:`register_secret` and
scrubbed wherever echoed. The walk is iterative with a depth cap; :func:`neutralize_controls` makes
server strings safe on a terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

REDACTED = "<redacted>"
TOO_DEEP = "<nested too deeply>"
MAX_DEPTH = 64
_REGISTERED: set[str] = set()
# ``scheme://user:pass@`` in free text (a URL inside an error message, a log line).
_URL_CREDENTIALS_RE = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@?#]+)@")
# C0 controls (newline and tab included: a line stays one line), DEL, C1 controls, and the bidirectional
# overrides that reorder text.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

_ALWAYS = frozenset({"api_key", "admin_api_key"})
_SUBSTRINGS = ("secret", "password", "passwd", "credential", "private_key", "authorization")
# ``--api-key VALUE`` / ``--admin-api-key=VALUE`` / ``api_key=VALUE`` inside command lines and log text.
_FLAG_RE = re.compile(
    r"(?P<flag>--(?:admin[-_])?api[-_]key|--[\w-]*(?:secret|password)[\w-]*|--[\w-]*(?:token|[-_]key)(?![\w-]))"
    r"(?P<sep>[= ]+)(?P<val>[^\s'\",]+)",
    re.IGNORECASE,
)
# ``--wandbKey VALUE`` / ``--hfToken=VALUE``: a camelCase name ending in Key or Token (case matters here)
_CAMEL_FLAG_RE = re.compile(
    r"(?P<flag>--[A-Za-z0-9-]*[a-z0-9](?:Key|Token))(?P<sep>[= ]+)(?P<val>[^\s'\",]+)"
)
# ``HF_TOKEN=...`` / ``HF-TOKEN=...`` / ``OPENAI_API_KEY=...`` / ``DB_PASSWORD=...`` in a unit line or an
# env file quoted in an error message. ``token`` and ``key`` only as the last word of the name (so
# ``max_new_tokens=512`` in evidence stays), the other words anywhere in it.
_ENV_RE = re.compile(
    r"(?P<flag>\b[A-Za-z_][\w-]*?(?:token|[_-]key|api[_-]?key|(?:secret|passw(?:or)?d|credential|private[_-]key)[\w-]*))"
    r"(?P<sep>=)(?P<val>(?!<redacted>)[^\s'\",;}]+)",
    re.IGNORECASE,
)
# Credentials recognisable by their shape alone, wherever they appear (a line holding only a token):
# Hugging Face, OpenAI-style ``sk-``, GitHub, GitLab, Slack, AWS access key ids, JWTs.
_TOKEN_SHAPES_RE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
    r"|glpat-[\w-]{16,}|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,})"
)
_KV_RE = re.compile(
    r"(?P<flag>['\"]?(?:admin_)?api_key['\"]?)(?P<sep>\s*[:=]\s*)(?P<val>(?!None\b|null\b)(?:'[^']*'|\"[^\"]*\"|[^\s,}]+))",
    re.IGNORECASE,
)
_MIN_SECRET_LEN = 4  # shorter literals would shred unrelated text; such keys are worthless anyway


def register_secret(value: str | None) -> None:
    """Scrub ``value`` from every message this process prints from now on (the API key, URL passwords).
    Values shorter than 4 characters are not registered: they would shred unrelated text."""
    if value and len(value) >= _MIN_SECRET_LEN:
        _REGISTERED.add(value)


def safe_url(url: str) -> str:
    """``url`` without its credentials (``http://<redacted>@host:port/...``); the user name and the
    password are registered as secrets, so a server or library echoing them is scrubbed too."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_CREDENTIALS_RE.sub(lambda m: f"{m['scheme']}{REDACTED}@", url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    _user, _, password = userinfo.partition(":")
    # The user name is hidden in the URL itself but not hunted in free text: names such as "admin" would
    # shred unrelated words ("--admin-api-key"). A URL without a password carries its token as the user.
    for value in (userinfo, password, unquote(password)) if password else (userinfo, unquote(userinfo)):
        register_secret(value)
    return parts._replace(netloc=f"{REDACTED}@{host}").geturl()


def neutralize_controls(text: str) -> str:
    """Terminal control sequences made visible and inert: ESC, CR, backspace, C1 controls and bidi
    overrides become ``\\xNN``/``\\uNNNN`` escapes, so a server-supplied string cannot move the cursor,
    redraw a WARN line as PASS, retitle the terminal or reorder what is shown."""

    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        if code == 0x09:
            return " "
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL_RE.sub(escape, text)


def is_secret_key(key: str, value: Any, extra_keys: Iterable[str] = ()) -> bool:
    """True when ``key`` names a credential. ``token`` and ``key`` count only as the last word of the key
    and only for string values, so ``max_new_tokens`` or ``hot_token_id`` stay visible while ``hf_token``
    and ``wandb_key`` do not."""
    k = key.lower()
    if k in _ALWAYS or k in {e.lower() for e in extra_keys}:
        return True
    if any(s in k for s in _SUBSTRINGS):
        return True
    words = re.split(r"[_\-.]", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower())  # wandbKey: wandb_key
    return isinstance(value, str) and words[-1] in ("token", "key")


def environment_credentials(env: Mapping[str, str]) -> list[str]:
    """The variables of an environment that hold a credential: named as one (:func:`is_secret_key`), or
    holding one by its shape under any name (``HFTOKEN=hf_...``, ``DATABASE_URL=postgres://u:pw@h``)."""
    return [
        k
        for k, v in env.items()
        if is_secret_key(k, v)
        or _last_word(k) in _CREDENTIAL_LAST_WORDS
        or _TOKEN_SHAPES_RE.search(v)
        or _URL_CREDENTIALS_RE.search(v)
    ]


# more last words of a variable holding a credential (MY_APIKEY, GH_PAT, DB_PASS, NPM_AUTH), for an
# environment only: the report's own keys keep is_secret_key's narrower rule
_CREDENTIAL_LAST_WORDS = frozenset(
    {"apikey", "apitoken", "pat", "pass", "pwd", "passphrase", "auth", "creds"}
)


def _last_word(key: str) -> str:
    return re.split(r"[_\-.]", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower())[-1]


def register_environment(env: Mapping[str, str]) -> None:
    """Scrub the credentials of this process's environment (:func:`environment_credentials`) from every
    message: a launch file interpolates the reader's environment (a unit's ``${HF_TOKEN}``, Compose's), so
    ``--tool-call-parser x${HF_TOKEN}`` put the whole token, past the shapes' word boundary, into
    argparse's refusal. A value under 8 characters is no credential worth a shred of unrelated text."""
    for name in environment_credentials(env):
        value = env[name]
        if is_secret_key(name, value) and len(value) >= 8:
            register_secret(value)
        for shaped in _TOKEN_SHAPES_RE.finditer(value):
            register_secret(shaped.group())
        for url in _URL_CREDENTIALS_RE.finditer(value):  # as redact_url registers a URL's
            user, _, password = url["userinfo"].partition(":")
            for part in (url["userinfo"], password, unquote(password)) if password else (user, unquote(user)):
                register_secret(part)


# names of settings (the shell's, the system's, the server stack's) that carry no credential; under any
# other name a credential cannot be told from its value (MYSQL_PWD, DATABASE_URL's password)
_PLAIN_NAMES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "PWD", "SHLVL", "TMPDIR"}
    | {"HOSTNAME", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED"}
    | {"LD_LIBRARY_PATH", "LD_PRELOAD"}
)
_PLAIN_PREFIXES: tuple[str, ...] = (
    "LC_",
    "XDG_",
    "SGLANG_",
    "SGL_",
    "HUMMING_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "TORCH_",
)
_PLAIN_PREFIXES += ("PYTORCH_", "TRITON_", "FLASHINFER_", "OMP_", "HF_", "TRANSFORMERS_", "SPARK_VALIDATE_")


def may_be_secret(key: str, value: Any) -> bool:
    """True when ``key`` names a credential (:func:`is_secret_key`) or is none of the plain settings above:
    a value another user's launch must not be handed, since it may carry one under a name not flagged."""
    return is_secret_key(key, value) or not (key in _PLAIN_NAMES or key.startswith(_PLAIN_PREFIXES))


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


def neutralize_deep(obj: Any) -> Any:
    """:func:`neutralize_controls` applied to every string (keys too) in JSON-like data, for renderers
    that print a report on a terminal. The data has gone through :func:`redact`, so it nests at most
    ``MAX_DEPTH`` levels and this recursion is bounded."""
    if isinstance(obj, str):
        return neutralize_controls(obj)
    if isinstance(obj, dict):
        return {neutralize_deep(k): neutralize_deep(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [neutralize_deep(v) for v in obj]
    return obj


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replace every literal secret value (given here or registered), URL credentials, and any
    ``--api-key VALUE`` style pair, in free text."""
    known = {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN} | _REGISTERED
    for s in sorted(known, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    text = _URL_CREDENTIALS_RE.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    text = _TOKEN_SHAPES_RE.sub(REDACTED, text)
    for name_then_value in (_FLAG_RE, _CAMEL_FLAG_RE, _ENV_RE, _KV_RE):  # the name kept, the value gone
        text = name_then_value.sub(lambda m: f"{m['flag']}{m['sep']}{REDACTED}", text)
    return text


def redact(obj: Any, extra_keys: Iterable[str] = (), secrets: Iterable[str | None] = ()) -> Any:
    """A deep copy of ``obj`` with secret values replaced by ``<redacted>``, and every secret value found
    (or given in ``secrets``) scrubbed from the other strings, such as ``launch_command``. Containers
    nested deeper than ``MAX_DEPTH`` are replaced by ``<nested too deeply>`` (iteratively: no recursion)."""
    extra = tuple(extra_keys)
    known = collect_secrets(obj, extra) | {s for s in secrets if s}
    return _redact(obj, extra, known)


def _redact(obj: Any, extra: tuple[str, ...], known: set[str]) -> Any:
    root: list[Any] = [None]
    tuples: list[tuple[Any, Any, list[Any]]] = []  # (parent, slot, list) to freeze, innermost last
    stack: list[tuple[Any, Any, Any, int]] = [(obj, root, 0, 0)]
    while stack:
        cur, parent, slot, depth = stack.pop()
        if isinstance(cur, (dict, list, tuple)) and depth >= MAX_DEPTH:
            parent[slot] = TOO_DEEP
        elif isinstance(cur, dict):
            out: dict[Any, Any] = {}
            parent[slot] = out
            for k, v in cur.items():
                if isinstance(k, str) and is_secret_key(k, v, extra) and v not in (None, "", False):
                    out[k] = REDACTED
                else:
                    out[k] = None  # keeps the key order; filled below
                    stack.append((v, out, k, depth + 1))
        elif isinstance(cur, (list, tuple)):
            items: list[Any] = [None] * len(cur)
            parent[slot] = items
            if isinstance(cur, tuple):
                tuples.append((parent, slot, items))
            stack.extend((v, items, i, depth + 1) for i, v in enumerate(cur))
        elif isinstance(cur, str):
            parent[slot] = redact_text(cur, known)
        else:
            parent[slot] = cur
    for parent, slot, items in reversed(tuples):
        parent[slot] = tuple(items)
    return root[0]
