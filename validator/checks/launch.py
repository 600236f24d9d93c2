"""``launch.program``: the launch command can run, and the SGLang install preflight read is the one the
server will import.

Every preflight check of the installed build (``lm_head.fp8``'s support, ``spec.lm_head_shared``) is only
as good as the answer to "which ``sglang`` will this server import?". A missing interpreter used to leave
those checks ``skip`` and the verdict ``pass``, and ``launch`` then failed to exec (restarted forever by
systemd). Where preflight runs on the server's own host (``launch``, ``--unit``), a program that cannot
run is a misconfiguration (``fail``); elsewhere (``--launch-cmd`` checked on a laptop) it is evidence that
could not be gathered (``error``), per contract v2.
"""

from __future__ import annotations

from typing import Any

from validator.checks import base as check
from validator.facts import DECLARED, LAUNCH, PROCESS, SGLANG, Facts, LaunchFacts


def _not_runnable(facts: Facts, message: str, remedy: str, **evidence: Any) -> check.Outcome:
    """``remedy``: the pack's variant, shown when this is a failure."""
    program = facts.program
    if program is not None and program.on_server_host:
        return check.failed(message, [LAUNCH], remedy, **evidence)
    return check.errored(
        f"{message}; run preflight where the server runs (or give --unit) to prove the program",
        [LAUNCH],
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
            f"{runs} cannot run: {program.probe_error}",
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
    inspected = sg.root if sg is not None else None
    if inspected is not None and inspected.resolve() != program.sglang_root.resolve():
        return _not_runnable(
            facts,
            f"{runs}{where} imports sglang from {program.sglang_root}, not from the inspected {inspected}",
            "inspected",
            **ev,
        )
    version = f" {sg.version}" if sg is not None and sg.version else ""
    return check.passed(
        f"{runs}{where} imports sglang{version} from {program.sglang_root}", [LAUNCH, SGLANG], **ev
    )


# Variables that configure the recipe, NCCL or the caches: a running server that has one its declaration
# does not set was started some other way (by hand, or from an edited file).
RECIPE_ENV_PREFIXES = ("SGLANG_", "SPARK_VALIDATE_", "NCCL_", "GLOO_", "CUDA_", "FLASHINFER_", "HUMMING_")


def _shown(value: object) -> str:
    return "(unset)" if value is None else repr(value)


def _same_program(declared: str, running: str) -> bool:
    """Two paths are compared as written; a bare name (found on PATH) only by its name, since the
    running argv[0] may be either spelling of the same program."""
    if "/" in declared and "/" in running:
        return declared == running
    return declared.rsplit("/", 1)[-1] == running.rsplit("/", 1)[-1]


def drift_items(declared: LaunchFacts, running: LaunchFacts, env_known: bool) -> list[str]:
    """What differs between a declaration and the running server: arguments (as SGLang parsed them, so
    order and ``--flag=value`` spellings do not count), the program, and the recipe's environment."""
    from validator.redact import is_secret_key
    from validator.sources.sglang_cli import load_table

    items: list[str] = []
    table = load_table()
    for dest in sorted(declared.explicit | running.explicit):
        want, have = declared.args.get(dest), running.args.get(dest)
        if want != have:
            action = table.action_for_dest(dest)
            flag = action.option_strings[0] if action is not None and action.option_strings else dest
            if is_secret_key(dest, want or have or ""):
                items.append(f"{flag}: differs (a credential: values not shown)")
            else:
                items.append(f"{flag}: declared {_shown(want)}, running {_shown(have)}")
    if declared.program and running.program and not _same_program(declared.program, running.program):
        items.append(f"program: declared {declared.program}, running {running.program}")
    if env_known:
        names = set(declared.env) | {k for k in running.env if k.startswith(RECIPE_ENV_PREFIXES)}
        for name in sorted(names):
            want, have = declared.env.get(name), running.env.get(name)
            if want != have and not (want is None and name in running.consumed_env):
                if is_secret_key(name, want or have or ""):  # a credential's values never reach a report
                    items.append(f"${name}: differs (a credential: values not shown)")
                else:
                    items.append(f"${name}: declared {_shown(want)}, running {_shown(have)}")
    return items


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
    items += drift_items(declared, running, proc.env is not None)
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
