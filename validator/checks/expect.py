"""Declarative ``expect`` checks from a rule pack: ``fact <op> value`` over any fact path.

They let a user add a site rule (a port, a memory fraction, a version) without writing Python. The
messages are the pack's templates, filled with ``{actual}``, ``{expected}``, ``{fact}`` and the pack's
expectations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from validator.checks import base as check
from validator.facts import SERVER, Facts
from validator.pack_schema import CheckSpec
from validator.pack_templates import render_template
from validator.report import Status


def _number(value: object) -> float:
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not a number")


def _compare(actual: object, op: str, value: object) -> bool:
    if op == "exists":
        return actual is not None
    if op == "absent":
        return actual is None
    if op == "==":
        return bool(actual == value)
    if op == "!=":
        return bool(actual != value)
    if op in ("in", "not in"):
        if not isinstance(value, list | tuple | str | dict):
            raise TypeError(f"{op!r} needs a list, got {type(value).__name__}")
        return (actual in value) is (op == "in")
    if op in ("matches", "not matches"):  # a regular expression searched anywhere in the value's text
        return (re.search(str(value), str(actual)) is not None) is (op == "matches")
    a, b = _number(actual), _number(value)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate_expect(
    facts: Facts, spec: CheckSpec, value: object, fields: Mapping[str, object]
) -> check.Outcome:
    """``value``: what the fact is compared with (the pack resolved ``value_from``); ``fields``: the pack's
    template fields."""
    assert spec.expect is not None
    exp = spec.expect
    source = exp.fact.split(".", 1)[0]
    try:
        actual = facts.lookup(exp.fact)
    except KeyError:
        actual = None
    values = {**fields, "actual": actual, "expected": value, "fact": exp.fact}
    if actual is None and exp.op not in ("absent", "exists"):
        if source == SERVER and facts.server is None:
            return check.no_server(facts)  # server.ready says why, once
        if source in facts.errors:
            return check.Outcome(Status.ERROR, f"{exp.fact}: {facts.errors[source]}", sources=[source])
        status = {"skip": Status.SKIP, "error": Status.ERROR, "fail": Status.FAIL, "pass": Status.PASS}
        msg = (
            render_template(spec.pass_message, values)
            if exp.when_missing == "pass" and spec.pass_message
            else f"{exp.fact} is not known here"
        )
        return check.Outcome(status[exp.when_missing], msg, sources=[source])
    evidence = {exp.fact: actual, "expected": f"{exp.op} {value!r}" if value is not None else exp.op}
    try:
        ok = _compare(actual, exp.op, value)
    except (TypeError, ValueError, re.error) as exc:
        return check.Outcome(
            Status.ERROR,
            f"cannot compare {exp.fact}={actual!r} {exp.op} {value!r}: {exc}",
            evidence,
            [source],
        )
    if ok:
        if spec.pass_message:
            return check.Outcome(Status.PASS, render_template(spec.pass_message, values), evidence, [source])
        return check.Outcome(Status.PASS, f"{exp.fact} = {actual!r} ({exp.op} {value!r})", evidence, [source])
    if spec.fail_message:
        return check.Outcome(Status.FAIL, render_template(spec.fail_message, values), evidence, [source])
    return check.Outcome(
        Status.FAIL, f"{exp.fact} = {actual!r}, expected {exp.op} {value!r}", evidence, [source]
    )
