"""``env.undeclared``: ``SGLANG_*`` variables that the installed build does not declare. SGLang ignores those
silently, so a typo or a missing patch looks exactly like a working setting."""

from __future__ import annotations

from validator.checks import base as check
from validator.facts import LAUNCH, SGLANG, Facts


@check.builtin("env.undeclared", "preflight")
def env_undeclared(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.launch is None:
        return check.no_launch(facts)
    sg = facts.sglang
    if sg is None or sg.root is None or not sg.declared_env:
        return check.errored("no SGLang installation to compare the environment with", [SGLANG])
    # a variable the command line was built from (the shipped unit's $SGLANG_ARGS) did its job
    consumed = facts.launch.consumed_env
    set_vars = sorted(k for k in facts.launch.env if k.startswith("SGLANG_") and k not in consumed)
    referenced = sg.referenced_env or set()
    unknown = [k for k in set_vars if k not in sg.declared_env and k not in referenced]
    if unknown and sg.referenced_env is None:  # the sources were not read whole: no verdict from a part
        return check.errored(
            f"SGLang's sources under {sg.root} were not read whole: whether it reads {', '.join(unknown)} "
            "is unknown",
            [LAUNCH, SGLANG],
            undeclared=unknown,
        )
    if unknown:
        return check.warned(
            f"SGLang {sg.version} does not declare {', '.join(unknown)}: silently ignored",
            [LAUNCH, SGLANG],
            undeclared=unknown,
        )
    return check.passed(
        f"all {len(set_vars)} SGLANG_* variables are declared by the installed build",
        [LAUNCH, SGLANG],
        checked=set_vars,
        command_line=sorted(consumed),
    )
