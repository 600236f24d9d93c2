"""The engine: run a rule pack's checks over gathered facts and produce the one report.

Severity decides what a failure means: a failed ``critical`` check fails the verdict, a failed
``warning`` check is reported as ``warn``, an ``info`` finding as ``info`` (never a warning, never a
failure, not even with ``--strict``). An active waiver keeps the result visible but stops it from blocking;
an expired one no longer applies. A check written for another platform's figures does not apply (skip).
The report counts what was proven (its ``coverage``): a critical ``error`` is not a pass.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import fields, replace

from validator.checks.base import CheckContext, Outcome
from validator.checks.expect import evaluate_expect
from validator.checks.registry import builtins
from validator.coverage import coverage_of
from validator.facts import (
    ATTESTATION,
    ENVIRONMENT_UNKNOWN,
    HOST,
    HUMMING,
    LAUNCH,
    METRICS,
    PROBE,
    SERVER,
    SGLANG,
    WEIGHTS,
    Facts,
    Mode,
    ProbeResult,
)
from validator.pack_schema import CheckSpec, WaiverSpec
from validator.pack_templates import expect_fields, expect_value, render_template
from validator.report import (
    CheckResult,
    Report,
    Severity,
    Status,
    Waiver,
    decide_verdict,
)
from validator.rulepack import LoadedPack
from validator.selection import ON_REQUEST, Selection
from validator.server_settings import ServerArgs
from validator.unresolved import Unresolved, UnresolvedRead, WatchedMapping, judging, watched


def run_checks(
    facts: Facts,
    loaded: LoadedPack,
    *,
    mode: Mode,
    strict: bool = False,
    today: _dt.date | None = None,
    only: set[str] | None = None,
    selection: Selection | None = None,
) -> list[CheckResult]:
    """``only``: run just these (tests); ``selection``: ``--check``/``--skip``, whose left-out checks are
    still listed, as ``skip`` saying so."""
    pack = loaded.pack
    checks = builtins()
    values = expect_fields(pack.expect)  # the pack's values, for every template and value_from
    judged = judged_view(facts)
    results: list[CheckResult] = []
    for spec in pack.checks:
        if mode not in spec.modes or (only is not None and spec.id not in only):
            continue
        ctx = CheckContext(spec=spec, expect=pack.expect, mode=mode, strict=strict)
        form = checks[spec.id].forms.get(mode) if spec.id in checks else None
        elsewhere = _other_platform(facts, spec.platform)
        left_out = selection.excluded(spec.id) if selection is not None else None
        if left_out is not None:
            outcome = Outcome(Status.SKIP, left_out, {ON_REQUEST: True}, [])
        elif elsewhere is not None:
            outcome = Outcome(Status.SKIP, elsewhere, {"platform": spec.platform}, [HOST])
        elif spec.expect is not None or form is not None:
            try:
                with judging():
                    if spec.expect is not None:
                        outcome = evaluate_expect(judged, spec, expect_value(spec.expect, values))
                    else:
                        assert form is not None
                        outcome = form(judged, ctx)
            except UnresolvedRead as read:  # it read a value known only at run time: not proven
                outcome = _unproven(read)
            except Exception as exc:  # a bug in a check must not hide the others
                outcome = Outcome(Status.ERROR, f"internal error in check: {type(exc).__name__}: {exc}")
        else:  # loading the pack rules this out; a pack built in Python may still get here
            outcome = Outcome(
                Status.ERROR, f"no builtin {mode} check {spec.id!r} and no 'expect' in the pack"
            )
        outcome = _hidden_install(judged, outcome)
        result = _result(spec, outcome, values, waiver_for(pack.waivers, spec.id, today))
        if outcome.evidence.get(_UNRESOLVED) is not None:
            result = replace(result, remedy=_unresolved_remedy(outcome.sources))
        results.append(result)
    return _with_root_cause(facts, results)


SERVER_READY = "server.ready"
# The sources only a reached server can feed: with the server not reached, an error of a check that reads
# nothing else follows from server.ready's (the attestation is bound to the server's /server_info).
_SERVER_SIDE = frozenset({SERVER, ATTESTATION, PROBE, METRICS, WEIGHTS})


def _with_root_cause(facts: Facts, results: list[CheckResult]) -> list[CheckResult]:
    """One fault, said once: when the server was not reached (a dead port, a 401 without a key, a reply
    that is not JSON), every other check in error that reads only what the server would have given is
    marked as following from ``server.ready``. Decided from the facts and each check's declared sources,
    never from its message."""
    ready = next((r for r in results if r.id == SERVER_READY), None)
    if facts.mode != "check" or facts.server is not None or ready is None or ready.status is not Status.ERROR:
        return results
    for r in results:
        if r is not ready and r.status is Status.ERROR and r.sources and set(r.sources) <= _SERVER_SIDE:
            r.caused_by = SERVER_READY
    return results


_UNRESOLVED = "unresolved"
_UNRESOLVED_REMEDY = (
    "Validate what really runs: put `exec spark-validate launch -- ...` in place of the script's `exec`, "
    "or give the value literally."
)
_INSTALLS = (SGLANG, HUMMING)  # what a container image hides: the install the server imports
_SETTINGS = frozenset(f.name for f in fields(ServerArgs))
# what the program's and the environment's being unknown hide besides the variables themselves
_PROGRAM = ("program", "interpreter", "command", "interpreter_options")


def judged_view(facts: Facts) -> Facts:
    """The facts as checks see them: every value the launch leaves unresolved (``LaunchFacts.unresolved``)
    raises ``UnresolvedRead`` when a check reads it, through the settings view, the parsed arguments, the
    environment, or a record derived from it (the program and plugin a sourced file could change, the
    install a container image hides). ``facts`` itself when nothing is unresolved."""
    launch = facts.launch
    if launch is None or not launch.unresolved:
        return facts

    def unknown(name: str) -> Unresolved:
        return Unresolved(name, launch.unresolved[name], launch.unresolved_at.get(name, launch.origin))

    every = next((unknown(n) for n in ("*", ENVIRONMENT_UNKNOWN) if n in launch.unresolved), None)
    on_facts: dict[str, Unresolved] = {}
    on_launch: dict[str, Unresolved] = {}
    args: dict[str, Unresolved] = {}
    env: dict[str, Unresolved] = {}
    for name in launch.unresolved:
        value = unknown(name)
        if name in _INSTALLS:  # _hidden_install: judged by what the check says it drew on
            continue
        if name == "*":  # a sourced file nobody read: PATH, and so the program, the plugin's switch
            on_launch.update(dict.fromkeys(_PROGRAM, value))
            on_facts.update(program=value, plugin=value)
        elif name == ENVIRONMENT_UNKNOWN:
            on_facts.setdefault("plugin", value)
        elif name == "working_directory":
            on_launch[name] = value
        elif name in _SETTINGS or name in launch.args:
            args[name] = value
        else:
            env[name] = value
    settings = watched(launch.settings, {n: v for n, v in args.items() if n in _SETTINGS})
    seen = watched(
        launch,
        on_launch,
        env=WatchedMapping(launch.env, env, every, known=launch.env_set_over),
        args=WatchedMapping(launch.args, args),
        settings=settings,
    )
    return watched(facts, on_facts, launch=seen)


def _hidden_install(facts: Facts, outcome: Outcome) -> Outcome:
    """A check that drew on the install a container image hides (the SGLang or humming source in its
    ``sources``) proves nothing by it: ``error``, unless it failed (a failure of what the launch itself
    says stands). Any other outcome stands as it is."""
    launch = facts.launch
    if launch is None or outcome.status is Status.FAIL:
        return outcome
    hidden = [n for n in _INSTALLS if n in launch.unresolved and n in outcome.sources]
    if not hidden:
        return outcome
    first = Unresolved(hidden[0], launch.unresolved[hidden[0]], launch.origin)
    unproven = _unproven(UnresolvedRead(first, hidden[0]))
    return replace(unproven, evidence={**outcome.evidence, **unproven.evidence}, sources=outcome.sources)


def _unproven(read: UnresolvedRead) -> Outcome:
    """A check that read an unresolved value: ``error``, with the reason and where it was decided."""
    value = read.value
    if value.name in _INSTALLS:
        message, sources = f"not proven: {value.why}", [value.name]
    else:
        what = "" if read.read == value.name else f"; the check read {read.read}"
        message = f"not provable statically: {value.name}: {value.why} ({value.where}{what})"
        sources = [LAUNCH]
    evidence = {_UNRESOLVED: {value.name: value.why}, "where": value.where, "read": read.read}
    return Outcome(Status.ERROR, message, evidence, sources)


def _unresolved_remedy(sources: list[str]) -> str:
    if sources[:1] and sources[0] in _INSTALLS:
        from validator.sources.launch.docker_run import IMAGE_REMEDY  # only when an image hides the install

        return IMAGE_REMEDY
    return _UNRESOLVED_REMEDY


def _other_platform(facts: Facts, platform: str | None) -> str | None:
    """Why a check holding ``platform``'s figures does not apply on this host (None: it applies, or the
    host is not known, as in ``check`` mode, where the server's host is not the one running the check)."""
    host = facts.host
    if platform != "dgx_spark" or host is None or host.is_dgx_spark is not False:
        return None
    what = host.gpu_name or f"a {host.machine} host without an NVIDIA GB10"
    return f"does not apply: not a DGX Spark ({what}); the check holds GB10's figures"


def waiver_for(
    waivers: tuple[WaiverSpec, ...], check_id: str, today: _dt.date | None = None
) -> WaiverSpec | None:
    """The waiver of ``check_id`` that applies ``today`` (its ``expires`` day included), if any."""
    day = today or _dt.date.today()
    return next((w for w in waivers if w.check == check_id and day <= w.expires), None)


def _result(
    spec: CheckSpec, outcome: Outcome, fields: dict[str, object], waiver: WaiverSpec | None
) -> CheckResult:
    severity = spec.severity
    status = outcome.status
    if severity is Severity.INFO and status in (Status.FAIL, Status.WARN):
        status = Status.INFO
    elif status is Status.FAIL and severity is not Severity.CRITICAL:
        status = Status.WARN
    # The pack's text, always: the variant the check named, else (for a failure) the check's remedy. An
    # error names a variant only when there is something to fix: the default remedy fixes a
    # misconfiguration, not missing evidence.
    text = spec.remedies.get(outcome.remedy) if outcome.remedy is not None else None
    if text is None and status in (Status.FAIL, Status.WARN, Status.INFO):
        text = spec.remedy
    values = {**fields, **outcome.params}
    remedy = render_template(text, values) if text is not None else None
    message = outcome.message
    if outcome.message_from is not None:  # a text of the pack, not the check's own words
        message = render_template(message, values)
    waived = None
    if waiver is not None and status in (Status.FAIL, Status.WARN, Status.ERROR):
        waived = Waiver(check=waiver.check, justification=waiver.justification, expires=str(waiver.expires))
    return CheckResult(
        id=spec.id,
        status=status,
        severity=severity,
        message=message,
        evidence=outcome.evidence,
        sources=outcome.sources,
        remedy=remedy,
        why=render_template(spec.why, fields) if status in (Status.FAIL, Status.WARN, Status.INFO) else None,
        waived=waived,
    )


def build_report(
    results: list[CheckResult],
    loaded: LoadedPack,
    *,
    mode: Mode,
    started_at: str,
    started_monotonic: float,
    strict: bool = False,
    allow_partial: bool = False,
    probe: ProbeResult | None = None,
    target: str | None = None,
    rule_pack: str | None = None,
) -> Report:
    """``rule_pack`` overrides ``loaded``'s name in the report (``--rules auto`` that matched no pack
    reports ``none``)."""
    coverage = coverage_of(results)
    coverage.skipped_on_request = [  # critical invariants the operator chose not to judge this run
        r.id
        for r in results
        if r.status is Status.SKIP and r.severity is Severity.CRITICAL and r.evidence.get(ON_REQUEST) is True
    ]
    # --allow-partial accepts every critical check that could not run (server.log included: it is listed
    # under not_proven like the others), never a server that was not reached (decide_verdict)
    return Report(
        mode=mode,
        verdict=decide_verdict(results, strict=strict, allow_partial=allow_partial),
        coverage=coverage,
        partial=bool(coverage.not_proven),
        rule_pack=rule_pack or loaded.pack.metadata.name,
        started_at=started_at,
        duration_s=round(time.monotonic() - started_monotonic, 4),
        checks=results,
        probe=probe,
        target=target,
        strict=strict,
    )


__all__ = ["build_report", "run_checks", "waiver_for"]
