"""Which command lines run an SGLang server: ``python [opts] -m sglang.launch_server ...``, ``sglang serve
...`` (also behind the interpreter of a console script's ``#!`` line), ``spark-validate launch [opts] --
CMD...`` (it ``exec``s CMD, keeping the PID), and the simulator standing in for one.

Apart from process discovery (``validator.sources.host.server_processes``) because the launch-command reader
asks the same question of a command that is not running yet: preflight then loads neither the ``/proc``
readers nor the socket tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

Kind = Literal["sglang", "launch", "sim"]
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?\Z")
_PY_OPTS_WITH_ARG = set("WXQc")  # python options whose argument is the next word (besides -m)


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
        i += 2 if (len(word) == 2 and word[1] in _PY_OPTS_WITH_ARG) else 1
    if i < len(argv) and Path(argv[i]).name in ("sglang", "spark-validate"):
        return argv[i:]
    return argv


def _python_module(argv: list[str]) -> tuple[str, list[str]] | None:
    """``python [opts] -m MODULE ARGS`` -> (MODULE, ARGS), reading option clusters as CPython does
    (``-Im mod``, ``-Immod``, ``-W ignore -m mod``); None for anything else (a script, ``-c``)."""
    if not argv or not _PYTHON.match(Path(argv[0]).name):
        return None
    i = 1
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-") or word == "-":
            return None
        if word.startswith("--"):
            i += 1
            continue
        for j, letter in enumerate(word[1:], start=1):
            if letter == "m":
                value = word[j + 1 :]
                if value:
                    return value, argv[i + 1 :]
                return (argv[i + 1], argv[i + 2 :]) if i + 1 < len(argv) else None
            if letter == "c":
                return None
            if letter in _PY_OPTS_WITH_ARG:  # its argument is the rest of the word or the next one
                i += 0 if word[j + 1 :] else 1
                break
        i += 1
    return None


# How a simulator's argv maps to the SGLang command it stands in for. The simulator's front doors
# register it (``validator.sim.process_view``): readers never import the simulator, and without a
# registration a simulator process is simply not a server.
_SIMULATED: Callable[[list[str]], list[str]] | None = None


def recognise_simulator(mapping: Callable[[list[str]], list[str]] | None) -> None:
    """Let discovery and the launch-command reader recognise simulator processes (None: forget it)."""
    global _SIMULATED
    _SIMULATED = mapping


def simulated_command(sim_args: list[str]) -> list[str] | None:
    """The SGLang command a simulator with these arguments stands in for (None: none registered)."""
    return _SIMULATED(sim_args) if _SIMULATED is not None else None


def classify(argv: list[str]) -> tuple[Kind, list[str]] | None:
    """(kind, the SGLang launch command) when ``argv`` runs an SGLang server, else None."""
    words = _strip_interpreter(argv)
    if not words:
        return None
    module = _python_module(words)
    if module is not None:
        name, rest = module
        if name == "sglang.launch_server":
            return "sglang", words
        if name == "validator" and rest[:1] == ["launch"]:  # `python -m validator launch -- CMD...`
            return classify(["spark-validate", *rest])
        sim = (
            simulated_command(rest[1:])
            if name == "validator" and rest[:1] == ["sim"]
            else simulated_command(rest)
            if name == "validator.sim"
            else None
        )
        return ("sim", sim) if sim is not None else None
    base = Path(words[0]).name
    if base == "sglang" and words[1:2] == ["serve"]:
        return "sglang", words
    if base == "spark-validate" and words[1:2] == ["sim"]:
        sim = simulated_command(words[2:])
        return ("sim", sim) if sim is not None else None
    if base == "spark-validate" and words[1:2] == ["launch"] and "--" in words:
        cmd = words[words.index("--") + 1 :]
        inner = classify(cmd)
        return ("launch", inner[1]) if inner is not None and inner[0] != "launch" else None
    return None
