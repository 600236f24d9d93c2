"""``probe.output``: the acceptance probe's replies are text, not garbage. A server with broken kernels (seen
on SM121) answers 200 with runs of ``!!!!``, which no other check sees."""

from __future__ import annotations

from validator.checks import base as check
from validator.facts import PROBE, Facts


@check.builtin("probe.output", "check", needs=("probe",))
def probe_output(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    probe = facts.probe
    if probe is None:
        return check.no_probe(facts)
    if probe.problems:
        return check.failed(
            "the server returns degenerate output: " + "; ".join(probe.problems),
            [PROBE],
            problems=probe.problems,
            requests=probe.requests,
        )
    replies = "1 probe reply looks" if probe.requests == 1 else f"{probe.requests} probe replies look"
    return check.passed(f"{replies} like text", [PROBE], requests=probe.requests)
