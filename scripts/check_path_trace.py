"""Follow ``check``'s data through the code: which of the project's modules it passes through, and how
often it goes back.

    python -m scripts.check_path_trace            # counts, and the edges that go back
    python -m scripts.check_path_trace --walk     # also every move, one a line

``spark-validate check`` runs in this process against the simulator (a real process on loopback, with its
log and attestation), under ``sys.setprofile``. Every Python call and return moves control from one frame
to another; the walk is the sequence of project modules (``validator.*``) control is in, consecutive
repeats collapsed. Code that runs while a module is imported (a ``<module>`` frame and what it calls) is
left out: the walk is the run's data flow, not its imports. Frames of other packages (httpx, yaml,
asyncio's event loop) are transparent: control stays with the project module that called them. A move is
a call, a return, or a resume (the event loop re-entering a suspended coroutine, which goes back to where
it was, as a return does).

Three counts, over the walk's distinct calls (a call from module A into module B, counted once however
often it repeats: the engine calls into a check module once per check for one edge):

- modules visited: the distinct project modules in the walk;
- climbs back up: calls into an earlier stage of the flow than the caller's (``STAGES``: front door, job,
  sources, facts, pack, engine, checks, report, outputs): a callback, or a method of a record defined up
  there; a module of no stage (``validator.errors``, ``validator.validation``) is neither;
- returns to a module already left: calls into a module the walk had left before (the engine calling
  into the pack schema, which it left once the pack was loaded).

Each is counted twice: by module, and by component (the modules of ``validator.sources``,
``validator.checks``, ``validator.outputs``, ``validator.attestation`` and ``validator.commands`` as one
each), where a call between two modules of one package does not count.
"""

from __future__ import annotations

import argparse
import dis
import inspect
import io
import sys
import tempfile
import threading
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from tests.support.sim_process import sim_process, wait_healthy

# The stages of the flow, in the order its data should move (cli -> commands/check -> live/sources ->
# facts -> engine -> checks -> report -> outputs); the pack is read before the engine judges with it.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("front door", ("validator.cli", "validator.__main__", "validator.commands")),
    ("job", ("validator.live", "validator.probe", "validator.recipe_match", "validator.running")),
    ("sources", ("validator.sources", "validator.attestation")),
    ("facts", ("validator.facts",)),
    (
        "pack",
        ("validator.rulepack", "validator.pack_lint", "validator.pack_schema", "validator.pack_figures"),
    ),
    ("engine", ("validator.engine", "validator.pack_templates", "validator.coverage", "validator.selection")),
    ("checks", ("validator.checks",)),
    ("report", ("validator.report",)),
    ("outputs", ("validator.outputs", "validator.redact")),
)


def stage(module: str) -> int | None:
    for i, (_, prefixes) in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


_SUSPENDING = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_FIRST_RESUME: dict[CodeType, int] = {}


def _resumed(frame: FrameType) -> bool:
    """Whether a call event re-enters a suspended generator or coroutine (the event loop resuming an
    ``await``) rather than starting it: control goes back to where it was, as on a return."""
    code = frame.f_code
    if not code.co_flags & _SUSPENDING:
        return False
    first = _FIRST_RESUME.get(code)
    if first is None:
        first = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
        _FIRST_RESUME[code] = first
    return frame.f_lasti != first


def _project_module(frame: FrameType | None) -> str | None:
    """The project module of ``frame`` or of its nearest caller that is one (another package's frame is
    transparent); None: no project frame below (a worker thread's own start)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and (name == "validator" or name.startswith("validator.")):
            return name
        frame = frame.f_back
    return None


class Walk:
    """The moves of control between project modules, from profile events: ``(caller, module)`` for a
    call (the caller found down the callee's own stack, so that a task the event loop starts or a worker
    thread's function is called from where it was started, not from whatever ran last), ``(None,
    module)`` for a return or a resume."""

    def __init__(self) -> None:
        self.moves: list[tuple[str | None, str]] = []
        self._importing = 0

    def _move(self, caller: str | None, module: str | None) -> None:
        if module is None or caller == module:
            return
        if caller is None and self.moves and self.moves[-1][1] == module:
            return
        self.moves.append((caller, module))

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_name == "<module>":
                self._importing += 1
            elif not self._importing:
                module = _project_module(frame)
                if module is not None and module == frame.f_globals.get("__name__") and not _resumed(frame):
                    self._move(_project_module(frame.f_back), module)
                else:
                    self._move(None, module)
        elif event == "return":
            if frame.f_code.co_name == "<module>":
                self._importing -= 1
            elif not self._importing:
                self._move(None, _project_module(frame.f_back))


PACKAGES: tuple[str, ...] = ("validator.sources", "validator.checks", "validator.outputs")
PACKAGES += ("validator.attestation", "validator.commands")


def component(module: str) -> str:
    """A module's component: its package for the five packages of many modules, else itself."""
    return next((p for p in PACKAGES if module.startswith(p + ".")), module)


def counts(moves: list[tuple[str | None, str]], name: Callable[[str], str] = str) -> dict[str, Any]:
    """The three counts over the distinct calls (``name`` maps a module to what is counted: itself, or
    its ``component``; a call within one is no call)."""
    calls: list[tuple[str, str]] = []
    returns: list[tuple[str, str]] = []
    visited: set[str] = set()
    for caller, module in moves:
        b = name(module)
        if caller is not None and (a := name(caller)) != b and (a, b) not in calls:
            calls.append((a, b))
            if b in visited:
                returns.append((a, b))
        visited.add(b)
    climbs = [
        (a, b) for a, b in calls if (sa := stage(a)) is not None and (sb := stage(b)) is not None and sb < sa
    ]
    return {"modules": sorted(visited), "calls": calls, "climbs": climbs, "returns": returns}


def _show(title: str, found: dict[str, Any]) -> None:
    print(f"{title}: {len(found['modules'])} visited, {len(found['calls'])} distinct calls between them")
    print(f"  climbs back up: {len(found['climbs'])}")
    for a, b in found["climbs"]:
        print(f"    {a} -> {b}")
    print(f"  returns to a module already left: {len(found['returns'])}")
    for a, b in found["returns"]:
        print(f"    {a} -> {b}")


def trace_check(argv: list[str]) -> list[tuple[str | None, str]]:
    from validator.cli import main

    walk = Walk()
    hook: Callable[[FrameType, str, Any], None] = walk.profile
    out, err = io.StringIO(), io.StringIO()
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if rc not in (0, 1):
        raise SystemExit(f"check exited {rc}: {err.getvalue()[-2000:]}")
    return walk.moves


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--walk", action="store_true", help="print the moves, one a line (no caller: a return or a resume)"
    )
    args = ap.parse_args()
    scratch = Path(__file__).resolve().parents[1] / ".pytest-tmp"
    scratch.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp, sim_process(Path(tmp)) as sim:
        wait_healthy(sim.url)
        argv = [
            "check", "--url", sim.url, "--log", str(sim.log), "--attestation", str(sim.attestation),
            "--format", "json",
        ]  # fmt: skip
        moves = trace_check(argv)
    if args.walk:
        print("\n".join(f"{caller or '':<40} -> {module}" for caller, module in moves))
    print(f"walk: {len(moves)} moves")
    _show("modules", counts(moves))
    _show("components", counts(moves, component))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
