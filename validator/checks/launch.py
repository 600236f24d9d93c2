"""Launch checks: ``launch.program`` (the command can run, and the SGLang install preflight read is the one
the server will import) and ``launch.warnings`` (what SGLang accepts but does not do as written).

Every check of the installed build is only as good as "which ``sglang`` will this server import?". On the
server's own host (``launch``, ``--unit``) a program that cannot run is ``fail``; elsewhere (a
``--launch-cmd`` on a laptop) it is evidence that could not be gathered (``error``).
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import DECLARED, HOST, LAUNCH, PROCESS, SGLANG, Facts


def _not_runnable(facts: Facts, message: str, remedy: str, **evidence: Any) -> check.Outcome:
    """``remedy``: the pack's variant, shown when this is a failure."""
    program = facts.program
    if program is not None and program.not_provable:  # this reader's limit, not the program's fault
        return check.errored(message, [LAUNCH], **evidence)
    if program is not None and program.on_server_host:
        return check.failed(message, [LAUNCH], remedy, **evidence)
    # the command was given (asking for it again sends the operator in a circle): what proves the program
    # is the server's host, the first source named (coverage's input)
    return check.errored(
        f"{message}; run preflight where the server runs (or give --unit) to prove the program",
        [HOST, LAUNCH],
        **evidence,
    )


@check.builtin(
    "launch.program",
    "preflight",
    remedies=("interpreter", "environment", "install_sglang", "inspected"),
)
def launch_program(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    program = facts.program
    if facts.launch is None or program is None:
        return check.no_launch(facts)
    ev: dict[str, Any] = {
        "program": program.written,
        "path": str(program.path) if program.path else None,
        "interpreter": program.interpreter,
        "interpreter_options": program.interpreter_options,
        "working_directory": str(program.working_directory) if program.working_directory else None,
        "sglang_root": str(program.sglang_root) if program.sglang_root else None,
    }
    if program.written is None:
        return check.errored(
            f"{program.problem}: give the full command (python -m sglang.launch_server ...) or --unit",
            [LAUNCH],
            **ev,
        )
    if program.problem is not None:
        return _not_runnable(
            facts,
            f"the program {program.written} {program.problem}",
            "interpreter",
            **ev,
        )
    flags = " ".join(program.interpreter_options)
    runs = f"{program.interpreter}{' ' + flags if flags else ''}"
    if program.probe_error is not None:
        return _not_runnable(
            facts,
            program.probe_error
            if program.probe_error.startswith("cannot run")
            else f"{runs} cannot run: {program.probe_error}",
            "environment",
            **ev,
        )
    where = (
        f" started in {program.working_directory}"
        if program.working_directory_known
        else " (started in an empty directory: the server's working directory is not known here)"
    )
    if program.sglang_root is None:
        return _not_runnable(
            facts,
            f"{runs}{where} cannot import sglang",
            "install_sglang",
            **ev,
        )
    sg = facts.sglang
    # whether the two agree was decided where the tree was located (``source._locate``: resolved as the
    # launch's owners could resolve it): the reported path is another user's word, never resolved here by
    # name as this process, whose answer through a root-only link would tell them what it points to
    inspected = sg.disputed_root if sg is not None else None
    if inspected is not None:
        # not a program that cannot run: two sources that disagree on which SGLang will, wherever this
        # runs; the checks that would have read the other tree are not proven (sglang facts withheld)
        return check.failed(
            f"{runs}{where} imports sglang from {program.sglang_root}, not from the inspected {inspected}",
            [LAUNCH, SGLANG],
            "inspected",
            **ev,
        )
    version = f" {sg.version}" if sg is not None and sg.version else ""
    return check.passed(
        f"{runs}{where} imports sglang{version} from {program.sglang_root}", [LAUNCH, SGLANG], **ev
    )


@check.builtin("launch.warnings", "preflight")
def launch_warnings(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """What SGLang would accept but not do as written: deprecated flags, a ``--config=FILE`` it ignores.
    Judged by the flag table the launch was parsed with: where an image hides the SGLang that parses it,
    that table is not known to be its version's, so the install is a source (unproven, not a pass)."""
    launch = facts.launch
    if launch is None:
        return check.no_launch(facts)
    hidden = launch.unresolved.get(SGLANG)
    if hidden is not None:
        readers = [w for w in launch.warnings if w not in launch.table_warnings]
        if readers:  # the readers' own warnings hold whatever the version; the table's part is unproven
            unproven = f"what SGLang makes of the line as written is not proven: {hidden}"
            return check.warned(
                "; ".join([*readers, unproven]),
                [LAUNCH],
                warnings=readers,
                unproven={SGLANG: hidden, "table_warnings": launch.table_warnings},
            )
    sources = [LAUNCH] if hidden is None else [LAUNCH, SGLANG]  # the install as a source: unproven
    if launch.warnings:
        return check.warned("; ".join(launch.warnings), sources, warnings=launch.warnings)
    config = str(launch.config_file) if launch.config_file else None
    return check.passed("SGLang accepts the command line as written", sources, config_file=config)


@check.builtin("launch.drift", "preflight")
def launch_drift(facts: Facts, ctx: check.CheckContext) -> check.Outcome:
    """The running server against what was given beside it (a unit, script, Compose file, command):
    a difference is a finding; one that changes another check's outcome (the recipe a restart would
    run) is a failure."""
    proc, running, declared = facts.process, facts.launch, facts.declared
    if proc is None or running is None:
        return check.skipped("no running server was read (check with no --url, or --pid, compares one)")
    items: list[str] = []
    if proc.exe_deleted:
        items.append(f"program: {proc.exe} was replaced or removed since the process started")
    if declared is None:
        if items:
            return check.warned("; ".join(items), [PROCESS], exe=proc.exe)
        return check.skipped("nothing declared to compare the running server with (give --unit, --script, "
                             "--compose, --docker-cmd or --launch-cmd)", [PROCESS])  # fmt: skip
    items += facts.drift or []
    ev: dict[str, Any] = {"declared": declared.origin, "pid": proc.pid, "differences": items}
    if proc.env is None:
        ev["environment"] = proc.env_error
    if not items:
        note = "" if proc.env is not None else f" (environment not compared: {proc.env_error})"
        return check.passed(f"process {proc.pid} runs what {declared.origin} declares{note}",
                            [PROCESS, DECLARED], **ev)  # fmt: skip
    changed = facts.declared_outcomes or {}
    ev["changes_checks"] = changed
    what = "; ".join(items)
    if changed:
        moved = ", ".join(f"{cid} ({how})" for cid, how in sorted(changed.items()))
        return check.failed(
            f"process {proc.pid} differs from {declared.origin}: {what}; a restart from the declaration "
            f"changes {moved}",
            [PROCESS, DECLARED],
            **ev,
        )
    return check.warned(
        f"process {proc.pid} differs from {declared.origin}: {what}", [PROCESS, DECLARED], **ev
    )
