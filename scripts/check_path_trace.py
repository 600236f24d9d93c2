"""Follow ``check``'s data through the code: which of the project's modules it passes through, and how
often it goes back.

    python -m scripts.check_path_trace            # counts, and the edges that go back
    python -m scripts.check_path_trace --walk     # also the walk itself, one module a line

``spark-validate check`` runs in this process against the simulator (a real process on loopback, with its
log and attestation), under ``sys.setprofile``. Every Python call and return moves control from one frame
to another; the walk is the sequence of project modules (``validator.*``) control is in, consecutive
repeats collapsed. Code that runs while a module is imported (a ``<module>`` frame and what it calls) is
left out: the walk is the run's data flow, not its imports. Frames of other packages (httpx, yaml) are
transparent: control stays with the project module that called them.

Three counts, over the walk's distinct edges (a move from module A to module B, counted once however
often it repeats: the engine visits a check module 81 times for one edge):

- modules visited: the distinct project modules in the walk;
- climbs back up: edges whose target is an earlier stage of the flow than their source (``STAGES``:
  front door, job, sources, facts, pack, engine, checks, report, outputs); a module of no stage
  (``validator.errors``, ``validator.schema``) is neither;
- returns to a module already left: edges into a module the walk had already left before it first took
  that edge (a call returning to its caller is one; so is the engine calling back into the pack schema).
"""

from __future__ import annotations

import argparse
import io
import itertools
import sys
import tempfile
import threading
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import FrameType
from typing import Any

from tests.support.sim_process import sim_process, wait_healthy

# The stages of the flow, in the order its data should move (cli -> commands/check -> live/sources ->
# facts -> engine -> checks -> report -> outputs); the pack is read before the engine judges with it.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("front door", ("validator.cli", "validator.__main__", "validator.commands")),
    ("job", ("validator.live", "validator.probe", "validator.recipe_match", "validator.running")),
    ("sources", ("validator.sources", "validator.attestation")),
    ("facts", ("validator.facts",)),
    ("pack", ("validator.rulepack", "validator.pack_schema", "validator.pack_figures")),
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


class Walk:
    """The modules control passes through, from profile events."""

    def __init__(self) -> None:
        self.modules: list[str] = []
        self.kinds: list[str] = []  # how control reached modules[i]: "call" or "return" (modules[0]: "start")
        self._importing = 0

    def _note(self, frame: FrameType | None, kind: str) -> None:
        while frame is not None:  # a frame of another package: control stays with its project caller
            name = frame.f_globals.get("__name__", "")
            if isinstance(name, str) and (name == "validator" or name.startswith("validator.")):
                if not self.modules or self.modules[-1] != name:
                    self.modules.append(name)
                    self.kinds.append(kind if len(self.modules) > 1 else "start")
                return
            frame = frame.f_back

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_name == "<module>":
                self._importing += 1
            elif not self._importing:
                self._note(frame, "call")
        elif event == "return":
            if frame.f_code.co_name == "<module>":
                self._importing -= 1
            elif not self._importing:
                self._note(frame.f_back, "return")


PACKAGES = ("validator.sources", "validator.checks", "validator.outputs", "validator.attestation")
PACKAGES += ("validator.commands",)


def component(module: str) -> str:
    """A module's component: its package for the five packages of many modules, else itself."""
    return next((p for p in PACKAGES if module.startswith(p + ".")), module)


def counts(modules: list[str], kinds: list[str], name: Callable[[str], str] = str) -> dict[str, Any]:
    """The three counts over the walk's distinct call edges (``name`` maps a module to what is counted:
    itself, or its ``component``)."""
    walk: list[tuple[str, str]] = []
    for module, kind in zip(modules, kinds, strict=True):
        n = name(module)
        if not walk or walk[-1][0] != n:
            walk.append((n, kind))
    calls: list[tuple[str, str]] = []
    returns: list[tuple[str, str]] = []
    left: set[str] = set()
    for (a, _), (b, kind) in itertools.pairwise(walk):
        left.add(a)
        if kind != "call" or (a, b) in calls:
            continue
        calls.append((a, b))
        if b in left:
            returns.append((a, b))
    climbs = [
        (a, b) for a, b in calls if (sa := stage(a)) is not None and (sb := stage(b)) is not None and sb < sa
    ]
    return {"modules": sorted({n for n, _ in walk}), "calls": calls, "climbs": climbs, "returns": returns}


def _show(title: str, found: dict[str, Any]) -> None:
    print(f"{title}: {len(found['modules'])} visited, {len(found['calls'])} distinct calls between them")
    print(f"  climbs back up: {len(found['climbs'])}")
    for a, b in found["climbs"]:
        print(f"    {a} -> {b}")
    print(f"  returns to a module already left: {len(found['returns'])}")
    for a, b in found["returns"]:
        print(f"    {a} -> {b}")


def trace_check(argv: list[str]) -> tuple[list[str], list[str]]:
    from validator.cli import main

    walk = Walk()
    hook: Callable[[FrameType, str, Any], None] = walk.profile
    out, err = io.StringIO(), io.StringIO()
    threading.setprofile(hook)  # type: ignore[arg-type]
    sys.setprofile(hook)  # type: ignore[arg-type]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    if rc not in (0, 1):
        raise SystemExit(f"check exited {rc}: {err.getvalue()[-2000:]}")
    return walk.modules, walk.kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--walk", action="store_true", help="print the walk, one module a line")
    args = ap.parse_args()
    scratch = Path(__file__).resolve().parents[1] / ".pytest-tmp"
    scratch.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp, sim_process(Path(tmp)) as sim:
        wait_healthy(sim.url)
        argv = [
            "check", "--url", sim.url, "--log", str(sim.log), "--attestation", str(sim.attestation),
            "--format", "json",
        ]  # fmt: skip
        modules, kinds = trace_check(argv)
    if args.walk:
        print("\n".join(f"{k:<6} {m}" for m, k in zip(modules, kinds, strict=True)))
    print(f"walk: {len(modules)} moves")
    _show("modules", counts(modules, kinds))
    _show("components", counts(modules, kinds, component))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
