"""Declarative ``expect`` checks from a rule pack: ``fact <op> value`` over any fact path.

They let a user add a site rule (a port, a memory fraction, a version) without writing Python. The
messages are the pack's ``pass_message`` and ``fail_message``: the outcome names which, with
``{actual}``, ``{expected}`` and ``{fact}`` as its fields, and the engine fills it, as it fills every text
of the pack.
"""

from __future__ import annotations

import re

from validator.checks import base as check
from validator.facts import SERVER, Facts
from validator.pack_schema import CheckSpec
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


def evaluate_expect(facts: Facts, spec: CheckSpec, value: object) -> check.Outcome:
    """``value``: what the fact is compared with (the pack resolved ``value_from``)."""
    assert spec.expect is not None
    exp = spec.expect
    source = exp.fact.split(".", 1)[0]
    try:
        actual = facts.lookup(exp.fact)
    except KeyError:
        actual = None
    params: dict[str, object] = {"actual": actual, "expected": value, "fact": exp.fact}
    if actual is None and exp.op not in ("absent", "exists"):
        if source == SERVER and facts.server is None:
            return check.no_server(facts)  # server.ready says why, once
        if source in facts.errors:
            return check.Outcome(Status.ERROR, f"{exp.fact}: {facts.errors[source]}", sources=[source])
        if exp.when_missing == "pass" and spec.pass_message:
            return check.Outcome(
                Status.PASS, spec.pass_message, sources=[source], params=params, message_from="pass_message"
            )
        return check.Outcome(Status(exp.when_missing), f"{exp.fact} is not known here", sources=[source])
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
            return check.Outcome(
                Status.PASS, spec.pass_message, evidence, [source], params=params, message_from="pass_message"
            )
        return check.Outcome(Status.PASS, f"{exp.fact} = {actual!r} ({exp.op} {value!r})", evidence, [source])
    if spec.fail_message:
        return check.Outcome(
            Status.FAIL, spec.fail_message, evidence, [source], params=params, message_from="fail_message"
        )
    return check.Outcome(
        Status.FAIL, f"{exp.fact} = {actual!r}, expected {exp.op} {value!r}", evidence, [source]
    )
