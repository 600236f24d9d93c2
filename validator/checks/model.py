"""``model.tool_call_parser``: the ``--tool-call-parser`` a launch names, judged by what the installed
SGLang's detectors really do with the model's tool calls.

A parser whose detector the model's own one extends (``glm`` under SGLang 0.5.23's ``ling3``) reads the
calls both read and loses only the forms the subclass adds: the warning names the detector classes and
what the subclass redefines, read from the build's ``srt/function_call/`` (``sources/sglang/install``),
never from a list kept here. Any other parser never matches the model's calls.
"""

from __future__ import annotations

from validator.checks import base as check
from validator.facts import LAUNCH, SGLANG, Facts


@check.builtin("model.tool_call_parser", "preflight", needs=("tool_call_parsers",), remedies=("near",))
def tool_call_parser(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    if facts.launch is None:
        return check.no_launch(facts)
    accepted = check.need(ctx.expect.tool_call_parsers, "tool_call_parsers")
    own = accepted[0]
    given = facts.launch.args.get("tool_call_parser")
    if given is None:
        return check.passed("--tool-call-parser is not set", [LAUNCH])
    if given in accepted:
        return check.passed(
            f"--tool-call-parser {given} is the model's own", [LAUNCH], tool_call_parser=given
        )
    sg = facts.sglang
    chains = sg.tool_call_detectors if sg is not None else None
    if sg is None or chains is None:
        return check.warned(
            f"--tool-call-parser {given} is not the model's own ({' or '.join(accepted)}); how its detector "
            f"differs could not be read ({check.sglang_note(facts)})",
            [LAUNCH, SGLANG],
            tool_call_parser=given,
        )
    build = f"SGLang {sg.version}" if sg.version else "the installed SGLang"
    mine, theirs = chains.get(str(given)), chains.get(own)
    if mine is None:
        return check.warned(
            f"--tool-call-parser {given} is no parser {build} knows: tool calls come back as text",
            [LAUNCH, SGLANG],
            tool_call_parser=given,
        )
    if theirs is not None and mine[0] in theirs[1:]:
        added = theirs[: theirs.index(mine[0])]
        redefines = sorted({m for c in added for m in sg.detector_members.get(c, ())})
        doc = sg.detector_docs.get(theirs[0])
        return check.warned(
            f"--tool-call-parser {given} parses with {mine[0]}, which {build}'s {own} detector {theirs[0]} "
            f"extends, redefining only {', '.join(redefines) or 'nothing'}: the calls both read parse alike, "
            f"the forms {theirs[0]} adds come back as text" + (f' ({theirs[0]}: "{doc}")' if doc else ""),
            [LAUNCH, SGLANG],
            "near",
            tool_call_parser=given,
            detector=mine[0],
            own_detector=theirs[0],
            redefines=redefines,
        )
    return check.warned(
        f"--tool-call-parser {given} parses with {mine[0]}, which is not {build}'s {own} detector "
        f"{theirs[0] if theirs else ''} nor one it extends: the model's tool calls come back as text".replace(
            "  ", " "
        ),
        [LAUNCH, SGLANG],
        tool_call_parser=given,
        detector=mine[0],
    )
