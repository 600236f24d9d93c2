"""How long the supervisor lets the server start: systemd's ``TimeoutStartSec`` and unit ``Type``, or a
Kubernetes container's ``startupProbe``.

A budget shorter than a cold start kills a healthy server forever. Per systemd.service(5): ``simple``/``exec``
time only ``ExecStartPre``; ``notify``, ``forking``, ``oneshot``, ``dbus`` or an ``ExecStartPost`` time the
load too; ``TimeoutSec=`` counts, ``infinity``/``0`` disable, unset is ``DefaultTimeoutStartSec`` (90 s).
"""

from __future__ import annotations

import re
from pathlib import Path

from validator.errors import InputError
from validator.facts import StartBudgetFacts
from validator.sources.gathering import Gathering, Unreadable, preflight_source
from validator.sources.launch.env_file import read_env_file
from validator.sources.launch.kube_manifest import Rbg, select_container
from validator.sources.launch.systemd_unit import ServiceUnit, load_unit
from validator.trusted_files import read_as

SYSTEMD_DEFAULT_START_S = 90.0
_LOAD_TIMED_TYPES = frozenset({"notify", "notify-reload", "forking", "oneshot", "dbus"})

# systemd.time(7) time span units
_UNITS = {
    "usec": 1e-6, "us": 1e-6, "µs": 1e-6, "μs": 1e-6,
    "msec": 1e-3, "ms": 1e-3,
    "seconds": 1.0, "second": 1.0, "sec": 1.0, "s": 1.0, "": 1.0,
    "minutes": 60.0, "minute": 60.0, "min": 60.0, "m": 60.0,
    "hours": 3600.0, "hour": 3600.0, "hr": 3600.0, "h": 3600.0,
    "days": 86400.0, "day": 86400.0, "d": 86400.0,
    "weeks": 604800.0, "week": 604800.0, "w": 604800.0,
    "months": 2629800.0, "month": 2629800.0, "M": 2629800.0,
    "years": 31557600.0, "year": 31557600.0, "y": 31557600.0,
}  # fmt: skip
_SPAN_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-zµμ]*)")


def parse_timespan(text: str, where: str) -> float | None:
    """A systemd time span in seconds; None for ``infinity`` (and for 0, which disables the timeout)."""
    value = text.strip()
    if value == "infinity":
        return None
    pos, total, parts = 0, 0.0, 0
    while pos < len(value):
        m = _SPAN_PART.match(value, pos)
        if m is None or m.end() == pos or m.group(2) not in _UNITS:
            raise InputError(where, f"invalid time span {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos, parts = m.end(), parts + 1
        while pos < len(value) and value[pos].isspace():
            pos += 1
    if parts == 0:
        raise InputError(where, f"invalid time span {text!r}")
    return total or None


def from_unit(unit: ServiceUnit) -> StartBudgetFacts:
    timing = unit.timing
    where = f"unit:{unit.path}"
    kind = timing.get("Type") or "simple"
    raw = timing.get("TimeoutStartSec") or timing.get("TimeoutSec")
    if raw:
        key = "TimeoutStartSec" if timing.get("TimeoutStartSec") else "TimeoutSec"
        budget = parse_timespan(raw, str(unit.path))
        shown = f"{key}={raw}"
    else:
        budget, shown = SYSTEMD_DEFAULT_START_S, "TimeoutStartSec unset (systemd's default 90 s)"
    post = bool(timing.get("ExecStartPost"))
    counts = kind in _LOAD_TIMED_TYPES or post
    why = f"Type={kind}" + (", ExecStartPost waits" if post else "")
    return StartBudgetFacts(origin=where, budget_s=budget, counts_load=counts, detail=f"{shown} ({why})")


# Kubernetes (the kubelet's probe defaults: initialDelaySeconds 0, periodSeconds 10, failureThreshold 3).
_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _probe_budget(probe: object, where: str) -> float:
    """Seconds before the kubelet gives up: initialDelaySeconds + periodSeconds x failureThreshold."""
    if not isinstance(probe, dict):
        raise InputError(where, "a probe must be a mapping")
    values: dict[str, int] = {}
    for key, default in _PROBE_DEFAULTS.items():
        value = probe.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(where, f"{key} must be a non-negative integer, not {value!r}"[:200])
        values[key] = value
    return float(values["initialDelaySeconds"] + values["periodSeconds"] * max(1, values["failureThreshold"]))


def from_kubernetes(path: Path, container: str | None = None) -> StartBudgetFacts:
    """The start budget of the SGLang container in a manifest (multi-document YAML): its startupProbe, or,
    without one, its livenessProbe, which then runs from the start; neither means no limit."""

    where = str(path)
    c, _, owner = select_container(path, container)
    name = c.get("name")
    if isinstance(owner, Rbg) and owner.patched:  # the pod's probes may be the patch's
        raise Unreadable(
            f"container {owner.role}/{name}: the RoleBasedGroup controller applies {owner.patched} to its "
            "template, so its probes are not read here"
        )
    for key in ("startupProbe", "livenessProbe"):
        if key in c:
            budget = _probe_budget(c[key], where)
            detail = f"container {name} {key}: {budget:g} s before the kubelet restarts it"
            if key == "livenessProbe":
                detail += " (no startupProbe, so the liveness probe times the load)"
            return StartBudgetFacts(
                origin=f"kubernetes:{path}", budget_s=budget, counts_load=True, detail=detail
            )
    return StartBudgetFacts(
        origin=f"kubernetes:{path}", budget_s=None, counts_load=True, detail=f"container {name}: no probes"
    )


def _supervised(g: Gathering) -> bool:
    return g.inputs.kube_manifest is not None or g.inputs.unit is not None


@preflight_source("start_budget", 70, applies=_supervised)  # cites the launch
def gather(g: Gathering) -> None:
    """The budget of the supervisor the inputs name: the Kubernetes startupProbe, else the unit's
    TimeoutStartSec= (the unit read with the launch's environment and --env-file as the launch was). The
    manifest's probes bound the start whatever its command holds: read also where the launch could not
    be (a value known only at run time); a unit only with its launch, whose environment it is read with."""
    inputs = g.inputs
    with read_as({}):  # the operator's own inputs again: their owners name what they name (read_launcher)
        if inputs.kube_manifest is not None:
            g.facts.start_budget = from_kubernetes(inputs.kube_manifest, inputs.kube_container)
        elif inputs.unit is not None and g.facts.launch is not None:
            files = [(p, read_env_file(p)) for p in inputs.env_files] or None
            unit = load_unit(inputs.unit, base_env=dict(g.launch.env), env_files=files)
            g.facts.start_budget = from_unit(unit)
