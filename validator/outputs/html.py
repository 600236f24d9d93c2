"""``--format html``: the report as one self-contained page for people (the sidecar serves it at ``/``).

Most Spark owners run no Grafana: this is their dashboard and what they attach to an issue. No JavaScript
or external assets (inline CSS and SVG, meta refresh); rendered from the redacted report, every string
through :func:`html.escape`, and the sidecar's CSP allows no script. Top to bottom: verdict and coverage,
what was not proven and what would prove it, acceptance and its history, every check, failures first.
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from validator.outputs import output
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep
from validator.report import Report

# Failures first: what the operator must act on, then what could not be proven, then the rest.
_ORDER = {"fail": 0, "error": 1, "warn": 2, "info": 3, "pass": 4, "skip": 5}
_LABEL = {"error": "NOT PROVEN"}  # every other status is shown as its name in capitals
_REFRESH_S = 15  # the sidecar's page reloads itself this often


class Sample(Protocol):
    """One acceptance reading (``validator.daemon.state.AcceptSample`` has these)."""

    @property
    def t(self) -> float: ...
    @property
    def value(self) -> float: ...
    @property
    def ci(self) -> tuple[float, float] | None: ...


@dataclass(frozen=True)
class SidecarView:
    """What only the sidecar knows, beside the report: readiness, phase, the history of acceptance."""

    ready: bool
    phase: str
    reason: str = ""
    last_run_end: float | None = None
    probe_interval_s: float | None = None
    probe_history: Sequence[Sample] = field(default_factory=tuple)
    server_history: Sequence[Sample] = field(default_factory=tuple)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _utc(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts):
        return "never"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _num(v: object, digits: int = 2) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return "n/a"
    return f"{v:.{digits}f}"


_CSS = """
:root{--bg:#f6f7f9;--fg:#1d2330;--mut:#5b6475;--card:#fff;--line:#dde1e8;--pass:#1a7f37;--fail:#c62828;
--inc:#8e44ad;--warn:#b26a00;--skip:#6b7280;--info:#0b6bcb;--chip:#eef1f5}
@media (prefers-color-scheme:dark){:root{--bg:#111418;--fg:#e6e9ef;--mut:#9aa3b2;--card:#1a1f26;
--line:#2c333d;--chip:#252b34;--pass:#3fb950;--fail:#ff6b6b;--inc:#c58af9;--warn:#e3a008;--info:#58a6ff}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Ubuntu,sans-serif}
main{max-width:1100px;margin:0 auto;padding:20px 18px 40px}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:0 0 10px}
.meta{color:var(--mut);margin:4px 0 16px;font-size:13px}.meta span+span:before{content:" · "}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;
margin:0 0 16px}
.verdict{display:flex;flex-wrap:wrap;gap:8px 28px;align-items:center;border-left:8px solid var(--c)}
.v-pass{--c:var(--pass)}.v-fail{--c:var(--fail)}.v-inconclusive{--c:var(--inc)}
.word{font-size:38px;font-weight:800;letter-spacing:.02em;color:var(--c)}
.note{font-weight:600;color:var(--warn)}.cov{min-width:260px;flex:1}
.bar{height:10px;background:var(--chip);border-radius:5px;overflow:hidden;margin-top:6px}
.bar span{display:block;height:100%;background:var(--c)}
.ready{font-weight:600}.ready.no{color:var(--fail)}.ready.yes{color:var(--pass)}
ul.missing{margin:0;padding-left:20px}ul.missing li{margin:4px 0}
.fig{display:flex;flex-wrap:wrap;gap:10px 26px;margin-bottom:8px}.fig div{min-width:120px}
.fig b{display:block;font-size:22px}.fig small{color:var(--mut)}
svg.chart{width:100%;height:auto;max-height:220px}svg text{fill:var(--mut);font-size:11px}
table{width:100%;border-collapse:collapse}
td{border-top:1px solid var(--line);padding:9px 8px;vertical-align:top}
tr:first-child td{border-top:0}
.badge{display:inline-block;min-width:96px;white-space:nowrap;text-align:center;font-size:12px;font-weight:700;
border-radius:999px;padding:2px 8px;color:#fff;background:var(--skip)}
.s-pass{background:var(--pass)}.s-fail{background:var(--fail)}.s-error{background:var(--inc)}
.s-warn{background:var(--warn)}.s-info{background:var(--info)}.s-waived{background:var(--skip)}
.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-weight:600;white-space:nowrap}
.sev{color:var(--mut);font-size:12px}.msg{margin:0}
dl{margin:6px 0 0;display:grid;grid-template-columns:max-content 1fr;gap:3px 12px;font-size:13px}
dt{color:var(--mut)}dd{margin:0;overflow-wrap:anywhere}
dd.remedy{font-weight:600}code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:12px}pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
details summary{cursor:pointer;color:var(--mut);font-size:12px}
footer{color:var(--mut);font-size:12px}
"""


def _evidence(ev: dict[str, Any]) -> str:
    rows = []
    for k, v in ev.items():
        shown = json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict | list) else str(v)
        if len(shown) > 2000:
            shown = shown[:1997] + "..."
        rows.append(f"<dt>{_e(k)}</dt><dd><code>{_e(shown)}</code></dd>")
    return "".join(rows)


def _check_row(c: dict[str, Any]) -> str:
    status = str(c["status"])
    waived = c.get("waived")
    label, cls = (
        (f"WAIVED {status.upper()}", "waived") if waived else (_LABEL.get(status, status.upper()), status)
    )
    details = [
        f"<dt>{key}</dt><dd{extra}>{_e(c[key])}</dd>"
        for key, extra in (("why", ""), ("remedy", ' class="remedy"'))
        if c.get(key)
    ]
    if waived:
        details.append(
            f"<dt>waived</dt><dd>until {_e(waived['expires'])}: {_e(waived['justification'])}</dd>"
        )
    if c.get("sources"):
        details.append(f"<dt>sources</dt><dd>{_e(', '.join(c['sources']))}</dd>")
    evidence = _evidence(c.get("evidence") or {})
    body = "<dl>" + "".join(details) + "</dl>" if details else ""
    if evidence:
        shown = "<dl>" + evidence + "</dl>"
        # the evidence of a passing check is there to look at, not in the way
        body += shown if status != "pass" else f"<details><summary>evidence</summary>{shown}</details>"
    return (
        f'<tr class="check" id="check-{_e(c["id"])}" data-status="{_e(status)}">'
        f'<td><span class="badge s-{_e(cls)}">{_e(label)}</span></td>'
        f'<td><div class="id">{_e(c["id"])}</div><div class="sev">{_e(c["severity"])}</div></td>'
        f'<td><p class="msg">{_e(c["message"])}</p>{body}</td></tr>'
    )


def _chart(view: SidecarView, threshold: float | None) -> str:
    """An inline SVG of the acceptance over time: the probe's points with their intervals, the server's
    own reading as a line, the pack's threshold dashed. Numbers only: no supplied text reaches it."""
    probe, server = list(view.probe_history), list(view.server_history)
    if not probe and not server:
        return '<p class="meta">No acceptance measured yet: the chart fills in as the sidecar probes.</p>'
    w, h, left, right, top, bottom = 640, 190, 38, 10, 10, 26
    times = [s.t for s in probe + server]
    end = max([*times, view.last_run_end or 0.0])
    span = max(end - min(times), 120.0)
    start = end - span
    values = [s.value for s in probe + server] + [hi for s in probe if s.ci for hi in s.ci[1:]]
    ymax = max(4.0, math.ceil(max(values) + 0.25))
    ymin = 1.0 if min(values) >= 1.0 else math.floor(min(values))

    def x(t: float) -> float:
        return left + (w - left - right) * (t - start) / span

    def y(v: float) -> float:
        return top + (h - top - bottom) * (1 - (min(max(v, ymin), ymax) - ymin) / (ymax - ymin))

    parts = [f'<svg class="chart" viewBox="0 0 {w} {h}" role="img" aria-label="acceptance length over time">']
    for tick in range(int(ymin), int(ymax) + 1):
        parts.append(
            f'<line x1="{left}" x2="{w - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="currentColor" stroke-opacity=".12"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    for frac in (0.0, 0.5, 1.0):
        t = start + frac * span
        anchor = ("start", "middle", "end")[int(frac * 2)]
        when = datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M")
        parts.append(f'<text x="{x(t):.1f}" y="{h - 8}" text-anchor="{anchor}">{when} UTC</text>')
    if threshold is not None and math.isfinite(threshold):
        parts.append(
            f'<line x1="{left}" x2="{w - right}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" '
            'stroke="#c62828" stroke-dasharray="5 4"/>'
            f'<text x="{w - right}" y="{y(threshold) - 4:.1f}" text-anchor="end">'
            f"threshold {threshold:g}</text>"
        )
    if server:
        pts = " ".join(f"{x(s.t):.1f},{y(s.value):.1f}" for s in server)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#0b6bcb" stroke-width="2"/>')
    for s in probe:
        if s.ci:
            parts.append(
                f'<line x1="{x(s.t):.1f}" x2="{x(s.t):.1f}" y1="{y(s.ci[0]):.1f}" y2="{y(s.ci[1]):.1f}" '
                'stroke="#1a7f37" stroke-width="2" stroke-opacity=".5"/>'
            )
        below = threshold is not None and math.isfinite(threshold) and s.value < threshold
        color, status = ("#c62828", "fail") if below else ("#1a7f37", "pass")
        parts.append(
            f'<circle cx="{x(s.t):.1f}" cy="{y(s.value):.1f}" r="4" fill="{color}" data-status="{status}"/>'
        )
    parts.append("</svg>")
    legend = ['<span style="color:#1a7f37">● probe (with its interval)</span>']
    if any(threshold is not None and s.value < threshold for s in probe):
        legend.append('<span style="color:#c62828">● probe below the threshold</span>')
    if server:
        legend.append('<span style="color:#0b6bcb">━ the server\'s own reading</span>')
    return "".join(parts) + f'<p class="meta">{" &nbsp; ".join(legend)}</p>'


def _acceptance(data: dict[str, Any], view: SidecarView | None) -> str:
    probe = data.get("probe")
    checks = {c["id"]: c for c in data["checks"]}
    ev = (checks.get("spec.accept_length") or {}).get("evidence") or {}
    threshold = ev.get("threshold") if isinstance(ev.get("threshold"), int | float) else None
    server = next(
        (
            c["evidence"][k]
            for c in data["checks"]
            for k in ("server_accept_length", "server_avg_spec_accept_length")
            if isinstance((c.get("evidence") or {}).get(k), int | float)
        ),
        None,
    )
    if probe is None and server is None and not (view and (view.probe_history or view.server_history)):
        return ""
    figs = []
    if probe is not None:
        ci = probe.get("accept_length_ci")
        interval = f"[{_num(ci[0])}, {_num(ci[1])}]" if ci else "no interval"
        figs.append(
            f'<div id="probe-accept"><small>probe accept length</small><b>{_num(probe.get("accept_length"))}'
            f"</b><small>{_e(interval)}</small></div>"
        )
        figs.append(
            f"<div><small>requests / tokens</small><b>{_e(probe.get('requests'))}</b>"
            f"<small>{_e(probe.get('completion_tokens'))} tokens, {_e(probe.get('verify_ct'))} verify rounds"
            "</small></div>"
        )
        figs.append(
            f"<div><small>TPOT / TTFT</small><b>{_num(probe.get('tpot_ms'), 1)} ms</b>"
            f"<small>TTFT {_num(probe.get('ttft_ms'), 0)} ms</small></div>"
        )
    if server is not None:
        figs.append(
            f"<div><small>server's own reading</small><b>{_num(server)}</b><small>&nbsp;</small></div>"
        )
    if threshold is not None:
        figs.append(f"<div><small>threshold</small><b>{_num(threshold)}</b><small>the pack's</small></div>")
    if view is not None and view.probe_interval_s:
        every = view.probe_interval_s
        shown = f"{every / 60:g} min" if every >= 60 else f"{every:g} s"
        figs.append(f"<div><small>probe interval</small><b>{_e(shown)}</b><small>&nbsp;</small></div>")
    out = ['<section class="card" id="acceptance"><h2>Speculative acceptance</h2>']
    out.append('<div class="fig">' + "".join(figs) + "</div>")
    if probe is not None and probe.get("decided_by"):
        out.append(f'<p class="meta">{_e(probe["decided_by"])}</p>')
    if view is not None:
        out.append(_chart(view, threshold))
    out.append("</section>")
    return "".join(out)


def _verdict(data: dict[str, Any], view: SidecarView | None) -> str:
    verdict = str(data["verdict"])
    cov = data.get("coverage") or {}
    critical, proven = int(cov.get("critical") or 0), int(cov.get("proven") or 0)
    unproven = len(cov.get("not_proven") or ())
    note = ""
    if unproven:
        note = f"partial: {unproven} unproven" if verdict == "pass" else f"{unproven} unproven"
    pct = 100.0 * proven / critical if critical else 0.0
    parts = [
        f'<section class="card verdict v-{_e(verdict)}" id="verdict" data-verdict="{_e(verdict)}">',
        f'<div class="word" id="verdict-word">{_e(verdict.upper())}</div>',
    ]
    if note:
        parts.append(f'<div class="note" id="partial">{_e(note)}</div>')
    parts.append(
        f'<div class="cov" id="coverage">proved {proven} of {critical} critical invariants'
        f'<div class="bar"><span style="width:{pct:.0f}%"></span></div></div>'
    )
    if view is not None:
        cls = "yes" if view.ready else "no"
        state = "ready" if view.ready else "not ready" + (f": {view.reason}" if view.reason else "")
        parts.append(
            f'<div><div class="ready {cls}" id="ready">{_e(state)}</div>'
            f'<div class="meta">{_e(view.phase)} · last check {_e(_utc(view.last_run_end))}</div></div>'
        )
    parts.append("</section>")
    missing = cov.get("missing") or []
    if missing:
        items = "".join(
            f'<li><span class="id">{_e(m["id"])}</span>: {_e(m["reason"])}'
            + (f" <b>Needs:</b> {_e(m['input'])}" if m.get("input") else "")
            + "</li>"
            for m in missing
        )
        parts.append(
            '<section class="card" id="not-proven"><h2>Not proven</h2>'
            f'<ul class="missing">{items}</ul></section>'
        )
    skipped = cov.get("skipped_on_request") or []
    if skipped:
        parts.append(f'<p class="meta">Skipped on request (--check / --skip): {_e(", ".join(skipped))}</p>')
    return "".join(parts)


def page(report: Report, *, secrets: tuple[str, ...] = (), view: SidecarView | None = None) -> str:
    """The whole page. ``view``: the sidecar's readiness and history (None: a file, no refresh)."""
    data = neutralize_deep(safe_dict(report, secrets))
    verdict = str(data["verdict"])
    target = data.get("target")
    title = f"spark-validate: {verdict.upper()}" + (f" · {target}" if target else "")
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
    ]
    if view is not None:
        head.append(f'<meta http-equiv="refresh" content="{_REFRESH_S}">')
    head.append(f"<style>{_CSS}</style></head><body><main>")
    meta = [
        f"spark-validate {data['version']}",
        str(data["mode"]),
        f"rule pack {data['rule_pack']}",
        *([str(target)] if target else []),
        f"started {data['started_at']}",
        f"{_num(data.get('duration_s'))} s",
    ]
    body = [
        "<header><h1>spark-validate status</h1>",
        '<p class="meta">' + "".join(f"<span>{_e(m)}</span>" for m in meta) + "</p></header>",
        _verdict(data, view),
        _acceptance(data, view),
    ]
    checks = sorted(data["checks"], key=lambda c: (1 if c.get("waived") else 0, _ORDER.get(c["status"], 9)))
    counts = Counter(c["status"] for c in data["checks"])
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    body.append(
        f'<section class="card" id="checks"><h2>Checks <span class="sev">({_e(summary)})</span></h2>'
        "<table>" + "".join(_check_row(c) for c in checks) + "</table></section>"
    )
    links = "JSON: /report · Prometheus: /metrics · readiness: /readyz?verbose" if view is not None else ""
    body.append(f"<footer>{_e(links)}</footer></main></body></html>")
    return "\n".join(head) + "\n" + "\n".join(body) + "\n"


def waiting_page(view: SidecarView, *, word: str = "WAITING", note: str = "no check has finished yet") -> str:
    """The sidecar's page with no report to show: before its first check has finished (the server may
    still be loading), or after a restart until the new process is judged (``word`` RESTARTED, ``note``
    "restarted at T, not yet judged"): the previous process's verdict is never shown as current."""
    state = "ready" if view.ready else "not ready"
    extra = view.reason[len(note) :].strip() if view.reason.startswith(note) else view.reason
    if extra.startswith("(") and extra.endswith(")"):
        extra = extra[1:-1]
    if extra and not view.ready:
        state += f": {extra}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>spark-validate: {_e(note)}</title>"
        f'<meta http-equiv="refresh" content="{_REFRESH_S}"><style>{_CSS}</style></head>'
        "<body><main><header><h1>spark-validate status</h1></header>"
        '<section class="card verdict v-inconclusive" id="verdict" data-verdict="none">'
        f'<div class="word" id="verdict-word">{_e(word)}</div>'
        f'<div><div class="ready no" id="ready">{_e(state)}</div>'
        f'<div class="meta">{_e(view.phase)}: {_e(note)}</div></div></section>'
        "</main></body></html>\n"
    )


@output("html", "a self-contained HTML page (the sidecar serves it at /)", rank=4)
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    return page(report, secrets=secrets)
