"""What the sidecar answers on each path, rendered from the latched state: ``/readyz`` (and its
``?verbose`` form), ``/livez``, ``/metrics``, ``/report`` and ``/`` (the HTML status page).

Each answer is a reply built once per state version (or metrics change) and sent as often as asked, so
a request costs a dictionary look-up; nothing here reads the network, the server or a file, and nothing
can trigger a probe (SGLang's own ``/health`` runs a generation per call and piles up requests when a
prober hammers it). :mod:`validator.daemon.http` serves these replies.
"""

from __future__ import annotations

import json
from typing import Any

import h11
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from validator.daemon.metrics import DaemonMetrics
from validator.daemon.state import DaemonState, iso_utc
from validator.outputs import render
from validator.outputs.html import SidecarView, page, waiting_page
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
# The status page runs no script and loads nothing: the browser is told so, so that even text that slipped
# past escaping could not execute or fetch anything.
PAGE_HEADERS = (
    (
        b"Content-Security-Policy",
        b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"X-Content-Type-Options", b"nosniff"),
    (b"Referrer-Policy", b"no-referrer"),
)

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}

PATHS = ("/", "/readyz", "/livez", "/metrics", "/report")

Reply = tuple[h11.Response, bytes]
"""A response's status line and headers, and its body: HEAD sends the first alone."""


def response(status: int, body: bytes, ctype: str, *, extra: tuple[tuple[bytes, bytes], ...] = ()) -> Reply:
    """A reply built once and sent as often as asked (h11 validates the headers here, not per request).
    h11 adds ``Connection: close`` itself when the connection will not be kept."""
    headers = [
        (b"Content-Type", ctype.encode("ascii")),
        (b"Content-Length", str(len(body)).encode("ascii")),
        (b"Cache-Control", b"no-store"),
        *extra,
    ]
    return h11.Response(status_code=status, reason=REASONS[status].encode("ascii"), headers=headers), body


def _has_param(query: bytes, name: bytes) -> bool:
    """``name`` among the query's parameters (``?verbose``, ``?verbose=1``, ``?a&verbose``)."""
    return any(p.partition(b"=")[0] == name for p in query.split(b"&")) if query else False


def readyz_verbose(state: DaemonState, secrets: tuple[str, ...] = ()) -> str:
    """``/readyz?verbose`` as the Kubernetes API server writes it: ``[+]name ok`` or ``[-]name failed:
    reason`` per check, then ``readyz check passed`` or ``readyz check failed``. A line is ``[-]`` exactly
    when that check keeps the verdict from passing; a check that could not be proven but was accepted
    (``--allow-partial``) is ``[+]`` and says so. Messages are the redacted report's, on one line."""

    lines: list[str] = []
    report = state.current()
    if state.restarted_at is not None:
        lines.append(f"[-]check failed: {' '.join(state.unjudged().split())} ({state.phase})")
    elif report is None:
        lines.append(f"[-]check failed: no check has finished yet ({state.phase})")
    else:
        data = neutralize_deep(safe_dict(report, secrets))
        passed = data["verdict"] == "pass"
        for c in data["checks"]:
            why = " ".join(str(c["message"]).split())
            status, blocking = c["status"], c["severity"] == "critical" or data.get("strict")
            if c["waived"]:
                lines.append(f"[+]{c['id']} waived: {status}: {why}")
            elif status == "pass":
                lines.append(f"[+]{c['id']} ok")
            elif status == "skip":
                lines.append(f"[+]{c['id']} skipped: {why}")
            elif status in ("warn", "info") and not (data.get("strict") and status == "warn"):
                lines.append(f"[+]{c['id']} ok ({status}: {why})")
            elif status == "error" and not blocking:
                lines.append(f"[+]{c['id']} not proven ({c['severity']}, does not block): {why}")
            elif status == "error" and passed:
                lines.append(f"[+]{c['id']} not proven (accepted by --allow-partial): {why}")
            else:
                lines.append(f"[-]{c['id']} failed: {'not proven: ' if status == 'error' else ''}{why}")
    if not state.ready and state.reason and state.restarted_at is None:
        lines.append(f"[-]readiness failed: {' '.join(state.reason.split())}")
    lines.append("readyz check passed" if state.ready else "readyz check failed")
    return "\n".join(lines) + "\n"


def json_body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"


class Endpoints:
    """Renders each endpoint's answer from the state, once per state version (or metrics change)."""

    def __init__(
        self,
        state: DaemonState,
        metrics: DaemonMetrics,
        *,
        secrets: tuple[str, ...] = (),
        livez_stale_s: float = 15.0,
        probe_interval_s: float | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.secrets = secrets
        self.livez_stale_s = livez_stale_s
        self.probe_interval_s = probe_interval_s
        self._version = -1
        self._replies: dict[bytes, Reply] = {}  # by path (``/readyz?verbose`` apart), per state version
        self._live = (response(200, b'{"alive":true}\n', JSON), response(503, b'{"alive":false}\n', JSON))
        self._metrics_src: bytes | None = None
        self._metrics: Reply = response(503, b"", TEXT)
        self.method_not_allowed = response(
            405, json_body({"error": "only GET and HEAD"}), JSON, extra=((b"Allow", b"GET, HEAD"),)
        )
        self.not_found = response(404, json_body({"error": "not found", "endpoints": list(PATHS)}), JSON)

    def answer(self, method: bytes, target: bytes) -> Reply:
        """The reply to ``method target``: ``GET`` and ``HEAD`` of the paths above (``HEAD`` sends the
        same head without the body), 405 for any other method, 404 for any other path. ``/readyz?verbose``
        (the Kubernetes API server's convention): the same status, one line per check."""
        if method not in (b"GET", b"HEAD"):
            return self.method_not_allowed
        path, _, query = target.partition(b"?")
        if path == b"/livez":
            return self._live[0] if self.state.alive(self.livez_stale_s) else self._live[1]
        if path == b"/metrics":
            return self.metrics_reply()
        self._refresh()
        if path == b"/readyz" and _has_param(query, b"verbose"):
            path = b"/readyz?verbose"
        return self._replies.get(path, self.not_found)

    def _refresh(self) -> None:
        s = self.state
        if s.version == self._version:
            return
        report = s.current()
        body: dict[str, Any] = {
            "ready": s.ready,
            "verdict": s.verdict(),
            "partial": report.partial if report is not None else False,
            "phase": s.phase,
        }
        if not s.ready:
            body["reason"] = s.reason
            body["failed"] = s.failed_ids()
        if s.restarted_at is not None:
            body["restarted_at"] = iso_utc(s.restarted_at)
        status = 200 if s.ready else 503
        self._replies[b"/readyz"] = response(status, json_body(body), JSON)
        self._replies[b"/readyz?verbose"] = response(status, readyz_verbose(s, self.secrets).encode(), TEXT)
        view = SidecarView(
            ready=s.ready,
            phase=s.phase,
            reason=s.reason,
            last_run_end=s.last_run_end,
            probe_interval_s=self.probe_interval_s,
            probe_history=tuple(s.history.probe),
            server_history=tuple(s.history.server),
        )
        if s.restarted_at is not None:
            # the last report is the previous process's: never served as the answer about this one
            unjudged = {"error": s.unjudged(), "restarted_at": iso_utc(s.restarted_at), "phase": s.phase}
            self._replies[b"/report"] = response(503, json_body(neutralize_deep(unjudged)), JSON)
            html = waiting_page(view, word="RESTARTED", note=s.unjudged())
        elif report is None:
            waiting = {"error": "no check has finished yet", "phase": s.phase}
            self._replies[b"/report"] = response(503, json_body(waiting), JSON)
            html = waiting_page(view)
        else:
            text = render(report, "json", secrets=self.secrets).encode()
            self._replies[b"/report"] = response(200, text, JSON)
            html = page(report, secrets=self.secrets, view=view)
        self._replies[b"/"] = response(200, html.encode("utf-8"), HTML, extra=PAGE_HEADERS)
        self._version = s.version

    def metrics_reply(self) -> Reply:
        text = self.metrics.render()
        if text is not self._metrics_src:
            self._metrics = response(200, text, CONTENT_TYPE_LATEST)
            self._metrics_src = text
        return self._metrics
