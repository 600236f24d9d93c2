"""``sglang.version``: the SGLang build is the one the pack was written for (before start from the installed
files, after start from ``/server_info``); another build is a warning, since the pack's facts about
SGLang's code may not hold there."""

from __future__ import annotations

from validator.checks import base as check
from validator.facts import SERVER, SGLANG, Facts


def _version(version: str | None, src: str, ctx: check.CheckContext) -> check.Outcome:
    want = check.need(ctx.expect.sglang_version, "sglang_version")
    if version is None:
        return check.errored("the SGLang version could not be read", [src])
    if version != want:
        return check.warned(
            f"SGLang {version}; this rule pack was written for {want}",
            [src],
            params={"version": version},
            version=version,
        )
    return check.passed(f"SGLang {version}", [src], version=version)


@check.builtin("sglang.version", "preflight", needs=("sglang_version",), params=("version",))
def sglang_version_preflight(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    sg = facts.sglang
    if sg is None or sg.root is None:
        note = check.sglang_note(facts)
        return check.errored(f"the installed SGLang could not be read: {note}", [SGLANG])
    return _version(sg.version, SGLANG, ctx)


@check.builtin("sglang.version", "check", needs=("sglang_version",), params=("version",))
def sglang_version_live(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.server is None:
        return check.no_server(facts)
    return _version(facts.server.settings.version, SERVER, ctx)
