"""Declarative ``expect`` checks from a rule pack: ``fact <op> value`` over any fact path.

They let a user add a site rule (a port, a memory fraction, a version) without writing Python.
"""

from __future__ import annotations

import re
from typing import Any

from validator.checks.base import Outcome
from validator.facts import Facts
from validator.report import Status
from validator.rulepack import CheckSpec


def _compare(actual: Any, op: str, value: Any) -> bool:
    if op == "exists":
        return actual is not None
    if op == "absent":
        return actual is None
    if op == "==":
        return bool(actual == value)
    if op == "!=":
        return bool(actual != value)
    if op == "in":
        return actual in value
    if op == "not in":
        return actual not in value
    if op == "matches":
        return re.search(str(value), str(actual)) is not None
    a, b = float(actual), float(value)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate_expect(facts: Facts, spec: CheckSpec) -> Outcome:
    assert spec.expect is not None
    exp = spec.expect
    source = exp.fact.split(".", 1)[0]
    try:
        actual = facts.lookup(exp.fact)
    except KeyError:
        actual = None
    if actual is None and exp.op not in ("absent", "exists"):
        if source in facts.errors:
            return Outcome(Status.ERROR, f"{exp.fact}: {facts.errors[source]}", sources=[source])
        status = {"skip": Status.SKIP, "error": Status.ERROR, "fail": Status.FAIL, "pass": Status.PASS}
        msg = (
            spec.pass_message
            if exp.when_missing == "pass" and spec.pass_message
            else f"{exp.fact} is not known here"
        )
        return Outcome(status[exp.when_missing], msg, sources=[source])
    evidence = {exp.fact: actual, "expected": f"{exp.op} {exp.value!r}" if exp.value is not None else exp.op}
    try:
        ok = _compare(actual, exp.op, exp.value)
    except (TypeError, ValueError) as exc:
        return Outcome(
            Status.ERROR,
            f"cannot compare {exp.fact}={actual!r} {exp.op} {exp.value!r}: {exc}",
            evidence,
            [source],
        )
    if ok:
        msg = spec.pass_message or f"{exp.fact} = {actual!r} ({exp.op} {exp.value!r})"
        return Outcome(Status.PASS, msg, evidence, [source])
    msg = spec.fail_message or f"{exp.fact} = {actual!r}, expected {exp.op} {exp.value!r}"
    return Outcome(Status.FAIL, msg.format(actual=actual, expected=exp.value), evidence, [source])
