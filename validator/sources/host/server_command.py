"""Which command lines run an SGLang server: ``python [opts] -m sglang.launch_server ...``, ``sglang serve
...`` (also behind the interpreter of a console script's ``#!`` line), ``spark-validate launch [opts] --
CMD...`` (it ``exec``s CMD, keeping the PID), and a registered stand-in for one (:class:`StandIn`).

Apart from process discovery (``validator.sources.host.server_processes``) because the launch-command reader
asks the same question of a command that is not running yet: preflight then loads neither the ``/proc``
readers nor the socket tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Literal

from validator.errors import UnavailableError

Kind = Literal["sglang", "launch", "stand-in"]
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?\Z")
_PY_FLAGS_WITH_ARG = "mcXWQ"  # python's letters whose argument is the rest of the word or the next one
_PY_LONG_WITH_ARG = {"--check-hash-based-pycs"}


def _strip_interpreter(argv: list[str]) -> list[str]:
    """``python [opts] /venv/bin/sglang serve ...`` -> ``/venv/bin/sglang serve ...``: a console script
    run through its ``#!`` interpreter shows the interpreter first. ``python -m`` stays as it is."""
    if not argv or not _PYTHON.match(Path(argv[0]).name):
        return argv
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        word = argv[i]
        if word.startswith("-m") or word == "-c":
            return argv
        i += 2 if (len(word) == 2 and word[1] in _PY_FLAGS_WITH_ARG) else 1
    if i < len(argv) and Path(argv[i]).name in ("sglang", "spark-validate"):
        return argv[i:]
    return argv


def python_module(argv: list[str]) -> tuple[str, list[str], list[str]] | str:
    """``python [opts] -m MODULE ARGS`` -> (MODULE, ARGS, opts), reading option clusters as CPython's getopt
    does (``-Im mod``, ``-Ximporttime``, ``-W ignore -m mod``); the interpreter's own flags decide which
    ``sglang`` it imports, so they are kept. Anything else (a script, ``-c``, stdin): why it is not one."""
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "-":
            return "python -c/stdin is not an SGLang launch command"
        if not word.startswith("-"):
            return (
                f"python runs {word!r}, not '-m sglang.launch_server' (spark-validate cannot check a script)"
            )
        if word.startswith("--"):
            i += 2 if word in _PY_LONG_WITH_ARG else 1
            continue
        for j, flag in enumerate(word[1:], start=1):
            if flag not in _PY_FLAGS_WITH_ARG:
                continue
            value = word[j + 1 :]
            taken = 1
            if not value:
                if i + 1 >= len(argv):
                    return f"python -{flag} needs an argument"
                value, taken = argv[i + 1], 2
            if flag == "c":
                return "python -c/stdin is not an SGLang launch command"
            if flag == "m":
                flags = [f"-{word[1:j]}"] if j > 1 else []
                return value, argv[i + taken :], [*argv[1:i], *flags]
            i += taken - 1
            break
        i += 1
    return "python without '-m sglang.launch_server'"


STAND_IN_GROUP = "spark_validate.stand_ins"
SGLANG_COMMAND = ("python", "-m", "sglang.launch_server")  # what a stand-in stands in for


@dataclass(frozen=True)
class StandIn:
    """A program that serves what ``python -m sglang.launch_server`` would, without SGLang,
    as its own distribution declares it under the entry-point group ``spark_validate.stand_ins``: how its
    command lines start, the SGLang command one stands in for, and what runs instead of an SGLang install.
    Real SGLang command lines are recognised first: a stand-in never claims one."""

    name: str  # its command, as discovery lists what it looked for
    what: str  # what it is, in a sentence
    programs: tuple[tuple[str, ...], ...]  # console-script heads: the program's name, then its words
    modules: tuple[tuple[str, ...], ...]  # ``python -m`` heads: the module, then its words
    # its words after the head -> the arguments of the ``python -m sglang.launch_server`` it stands in for
    # (``UnavailableError``: words it would refuse to run with)
    server_args: Callable[[list[str]], list[str]]
    located_by: str  # SGLangInstallFacts.located_by: no SGLang install runs it
    note: str  # why no install is read
    build_id: str  # what the fleet's build hash names for it


# the stand-ins recognised now: () none (the start), None those declared, loaded at the first command line
# that is not SGLang's own (``launch`` of a real server never reads the entry points)
_STAND_INS: tuple[StandIn, ...] | None = ()
_NOT_LOADED: list[str] = []  # entry points that could not be loaded, and why


def use_stand_ins(found: tuple[StandIn, ...] | None = None) -> None:
    """Recognise the stand-ins the installed distributions declare (``found``: exactly these; ``()``:
    none). Called by the front doors that read processes (discovery, ``launch``, the sidecar); elsewhere
    (preflight, ``check --url``) a stand-in's command line is not a server's and no stand-in is loaded."""
    global _STAND_INS
    _NOT_LOADED.clear()
    _STAND_INS = found


def _recognised() -> tuple[StandIn, ...]:
    global _STAND_INS
    if _STAND_INS is None:
        _STAND_INS = _declared()
    return _STAND_INS


def _declared() -> tuple[StandIn, ...]:
    loaded: list[StandIn] = []
    for ep in sorted(entry_points(group=STAND_IN_GROUP), key=lambda e: e.name):
        try:
            item = ep.load()
        except Exception as exc:  # a broken stand-in never stops the search for real servers
            _NOT_LOADED.append(f"stand-in {ep.name} ({ep.value}) could not be loaded: {exc}")
            continue
        if isinstance(item, StandIn):
            loaded.append(item)
        else:
            _NOT_LOADED.append(f"stand-in {ep.name} ({ep.value}) is not a StandIn")
    return tuple(loaded)


def stand_in_names() -> list[str]:
    """The commands recognised as standing in for SGLang now."""
    return [item.name for item in _recognised()]


def stand_ins_not_loaded() -> list[str]:
    """The declared stand-ins that could not be loaded, each with why."""
    _recognised()
    return list(_NOT_LOADED)


def _stand_in_of(head: list[str], *, module: bool) -> tuple[Kind, list[str], StandIn] | None:
    """("stand-in", its SGLang command, it) for the first stand-in whose form starts ``head``. Any user
    writes such an argv: whatever the stand-in's reader raises on it is ``UnavailableError`` (this process
    is not a server), never an end to the search."""
    for item in _recognised():
        for form in item.modules if module else item.programs:
            if tuple(head[: len(form)]) == form:
                try:
                    args = item.server_args(head[len(form) :])
                except UnavailableError:
                    raise
                except Exception as exc:
                    raise UnavailableError(f"{item.name} could not read this command line: {exc!r}") from None
                return "stand-in", [*SGLANG_COMMAND, *args], item
    return None


def _identify(argv: list[str]) -> tuple[Kind, list[str], StandIn | None] | None:
    words = _strip_interpreter(argv)
    if not words:
        return None
    module = python_module(words) if _PYTHON.match(Path(words[0]).name) else None
    if isinstance(module, tuple):
        name, rest, _ = module
        if name == "sglang.launch_server":
            return "sglang", words, None
        if name == "validator" and rest[:1] == ["launch"]:  # `python -m validator launch -- CMD...`
            return _identify(["spark-validate", *rest])
        return _stand_in_of([name, *rest], module=True)
    base = Path(words[0]).name
    if base == "sglang" and words[1:2] == ["serve"]:
        return "sglang", words, None
    if base == "spark-validate" and words[1:2] == ["launch"] and "--" in words:
        inner = _identify(words[words.index("--") + 1 :])
        return ("launch", inner[1], inner[2]) if inner is not None and inner[0] != "launch" else None
    return _stand_in_of([base, *words[1:]], module=False)


def classify(argv: list[str]) -> tuple[Kind, list[str]] | None:
    """(kind, the SGLang launch command) when ``argv`` runs an SGLang server, else None. Raises
    ``UnavailableError`` for a stand-in's command line it would refuse to run."""
    found = _identify(argv)
    return (found[0], found[1]) if found is not None else None


def stand_in_of(argv: list[str]) -> StandIn | None:
    """The stand-in ``argv`` runs, itself or behind ``spark-validate launch --`` (None: SGLang, or no
    server)."""
    found = _identify(argv)
    return found[2] if found is not None else None
