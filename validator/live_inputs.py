"""What one live check is asked to read: the server's URL and key, the local files beside it (the
attestation, the log), how long to wait, and whether to probe. Each field given on the command line
carries its option as field metadata (``validator.cli_options``, as ``PreflightInputs`` does): ``check``,
``serve`` and ``npd`` add the options with ``add_live_inputs`` and read them back with ``live_inputs_from``,
so a live input with an option is one field here. The live job's readers are given it as
``LiveGathering.inputs``; it is frozen: a caller that needs other values makes a copy (``replace``).

Apart from ``validator.live`` so that a reader below the job can name its type without importing the job.
"""

from __future__ import annotations

import argparse
import math
import os
import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from validator.cli_options import add_option, cli_options, option, read_back
from validator.errors import UsageError
from validator.redact import safe_url

if TYPE_CHECKING:
    import httpx

    from validator.selection import Selection
    from validator.sources.server.log_state import LogReader
    from validator.sources.server.metrics_reading import MetricsWatch

ProgressFn = Callable[[Any], None]


def server_url(value: str) -> str:
    """``--url``: an http(s) URL with a host and a port in range, checked before any connection.

    httpx rejects ``:99999`` only when the first request is built, inside the readiness poll's task group,
    which surfaced as an internal error (exit 1); a bad option is a usage error (exit 2)."""
    shown = safe_url(value)  # the message never repeats credentials written into the URL
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{shown!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"expected http:// or https://, got {shown!r}")
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"{shown!r} names no host")
    if port == 0:
        raise argparse.ArgumentTypeError(f"{shown!r}: port 0 is not a server's port")
    return value


def _non_negative(value: str, parse: type[float] | type[int], what: str) -> float:
    try:
        number = parse(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative {what.split(' ', 1)[1]}, got {value!r}")
    return number


def seconds(value: str) -> float:
    """A non-negative, finite number of seconds: ``--wait -1`` is a usage error, not a silent 'do not
    wait'."""
    return _non_negative(value, float, "a number of seconds")


def count(value: str) -> int:
    """A non-negative whole number (``--retries``)."""
    return int(_non_negative(value, int, "a whole number"))


def server_user(value: str) -> list[int]:
    """``--server-user``: user names or numeric UIDs, as the server runs (a comma list; repeatable)."""
    uids: list[int] = []
    for part in value.split(","):
        raw = part.strip()
        if not raw:
            raise argparse.ArgumentTypeError(f"expected a user name or UID, got {value!r}")
        if raw.isascii() and raw.isdigit():
            uids.append(int(raw))
            continue
        try:
            uids.append(pwd.getpwnam(raw).pw_uid)
        except KeyError:
            raise argparse.ArgumentTypeError(f"no such user: {raw!r}") from None
    return uids


def _uids(groups: Iterable[list[int]] | None) -> tuple[int, ...]:
    """Every UID ``--server-user`` named, in order, once each."""
    return tuple(dict.fromkeys(u for group in (groups or []) for u in group))


def _log_spec(value: str) -> str | Path:
    from validator.sources.server.log import parse_log_spec

    return parse_log_spec(value)


def _api_key(path: Path | None) -> str | None:
    # here: the HTTP client (httpx) loads only once a live job is built
    from validator.sources.server.client import load_api_key

    return load_api_key(path, os.environ)


def _stall_after(value: float) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise UsageError("--stall-after must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class LiveInputs:
    """Everything a live check may be given. The option fields come first, in the order of --help; the
    rest are given by the front door or the daemon."""

    url: str = option(
        "--url",
        None,
        "the SGLang server, e.g. http://127.0.0.1:30000 (default: the servers running on this host)",
        "live",
        server_url,
        default="",
        read=lambda value: value or "",  # not given: each running server's own
    )
    api_key: str | None = option(
        "--api-key-file",
        "FILE",
        "file holding the server's API key (or set SPARK_VALIDATE_API_KEY); never on the command line",
        "live",
        Path,
        read=_api_key,
        late=True,
    )
    attestation: Path | None = option(
        "--attestation", "FILE", "the in-process plugin's attestation file", "live", Path
    )
    # every --server-user: whose processes found from /proc may be judged, beside the reader's own
    server_uids: tuple[int, ...] = option(
        "--server-user",
        "USER|UID[,...]",
        "the server's user (repeatable, or a comma list): with no --url, the processes of these users "
        "are judged beside the reader's own (another user's are listed as ignored); with --url (one user), "
        "it binds the attestation by owner where the server's process is not visible here",
        "live",
        server_user,
        repeat=True,
        default=(),
        read=_uids,
    )
    log: Path | str | None = option(  # a file, or "journal:UNIT"
        "--log",
        "FILE|journal:UNIT",
        "the server's log: a file, or journal:UNIT for the unit's current invocation in the journal",
        "live",
        _log_spec,
    )
    wait_s: float = option(
        "--wait",
        "SECONDS",
        "wait up to this long for the server to become ready, in seconds (default: %(default)s)",
        "live",
        seconds,
        default=0.0,
        parsed_default=0.0,
    )
    probe: bool = option(
        "--no-probe", None, "skip the acceptance probe", "live", action="store_false", default=True
    )
    # server.progress's stall bound: work waiting with nothing completed this long (--stall-after)
    stall_after_s: float = option(
        "--stall-after",
        "SECONDS",
        "server.progress: work seen waiting with nothing completed this long is a stall: over /metrics "
        "readings this far apart, or in the log (no batch line this long after one that said requests were "
        "queued) (default 30: SGLang refreshes its gauges every 30 s while idle; lower it only for a server "
        "that refreshes sooner)",
        "live",
        float,
        default=30.0,
        parsed_default=30.0,
        read=_stall_after,
    )
    retries: int = option(
        "--retries",
        "N",
        "retries per request for transient errors (connect, timeout, 502/503/504; default 3)",
        "live",
        count,
        default=3,
        parsed_default=3,
    )
    weights_checker: bool = option(
        "--weights-checker",
        None,
        "opt-in deep check: compare target and draft LM-head checksums (hashes all weights)",
        "live",
        action="store_true",
        default=False,
    )
    # --allow-partial (the common options'): critical checks that could not run do not block
    allow_partial: bool = False
    # Not options: given by the front door or filled in by the job.
    server_uid: int | None = None  # who the server runs as, where its process is not visible
    # a reader that outlives one run (the sidecar follows the log); None: read ``log`` once
    log_reader: LogReader | None = None
    on_progress: ProgressFn | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    selection: Selection | None = None  # --check / --skip
    # the previous /metrics reading; the sidecar's outlives one run (None: a fresh one per run)
    metrics_watch: MetricsWatch | None = None
    # how the server's HTTP client reaches it; None: the network. Tests hand an in-process server's ASGI
    # app (httpx.ASGITransport) to judge a verdict without starting a server process.
    transport: httpx.AsyncBaseTransport | None = None


def add_live_inputs(p: argparse.ArgumentParser) -> None:
    """The live inputs on a parser (``check``, ``serve``): every option field, in field order."""
    g = p.add_argument_group("live inputs")
    for name, opt in cli_options(LiveInputs):
        add_option(g, name, opt)


def add_server_user(g: argparse._ActionsContainer) -> None:
    """``--server-user`` alone (``npd``, which judges the servers found from /proc)."""
    add_option(g, "server_uids", dict(cli_options(LiveInputs))["server_uids"])


def live_inputs_from(args: argparse.Namespace, **extra: Any) -> LiveInputs:
    """The parsed command line as a live check's inputs: every option field this parser has, by name
    (through its ``read``), then ``extra`` (what the front door decides). One ``--server-user`` is also
    the server's user; several are for /proc only."""
    values = read_back(LiveInputs, args)
    if hasattr(args, "allow_partial"):
        values["allow_partial"] = args.allow_partial
    uids: tuple[int, ...] = values.get("server_uids", ())
    if values.get("url") and len(uids) > 1:
        raise UsageError("--server-user names one user with --url (the server's); several are for /proc")
    values["server_uid"] = uids[0] if len(uids) == 1 else None
    values.update(read_back(LiveInputs, args, late=True))  # the key file, once the options are known good
    return LiveInputs(**{**values, **extra})
