"""Programs that run their command as the server, read as they parse their own words: ``nohup``, ``setsid``,
``timeout``, ``nice``, ``stdbuf``, ``taskset``, ``numactl``, ``ionice``, ``chrt``.

Each parses its options with ``getopt_long`` in ``+`` mode (the first word that is no option, or the word
after ``--``, ends them), takes its operands (timeout's DURATION, taskset's MASK, chrt's PRIORITY), and
execs the rest with ``execvp``: the same argv, the same environment (stdbuf adds its buffering variables
and its preload library). The launch readers (``script``, ``command``) share this table; ``env``, which
changes the environment, is theirs. An option not in the table (``-p PID``, ``--help``, an abbreviation)
leaves the launch unresolved, naming the wrapper, never a guess of what it does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from validator.errors import UnresolvedLaunch


@dataclass(frozen=True)
class Wrapper:
    """One wrapper's grammar, from its man page: short options alone and with a value, long options
    alone and with a value (``--name=V`` or ``--name V``), and the operands before the command."""

    flags: str = ""
    valued: str = ""
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    operands: tuple[str, ...] = ()  # what each word before the command is, for messages
    numeric_operand: bool = False  # chrt: the priority must be a number (util-linux versions differ)
    obsolete_adjustment: bool = False  # nice's ``-N`` (coreutils nice(1): "-N" is "-n N")
    sets_env: dict[str, str] = field(default_factory=dict)  # option letter -> the variable it sets


def _long(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, Wrapper] = {
    # coreutils nohup(1): no options but --help/--version
    "nohup": Wrapper(),
    # util-linux setsid(1): setsid [-c|-f|-w] program
    "setsid": Wrapper(flags="cfw", long_flags=_long("ctty", "fork", "wait")),
    # coreutils timeout(1): timeout [-k D] [-s SIG] [--foreground] [--preserve-status] [-v] DURATION CMD
    "timeout": Wrapper(
        flags="v",
        valued="ks",
        long_flags=_long("foreground", "preserve-status", "verbose"),
        long_valued=_long("kill-after", "signal"),
        operands=("DURATION",),
    ),
    # coreutils nice(1): nice [-n N | --adjustment=N | -N] CMD
    "nice": Wrapper(valued="n", long_valued=_long("adjustment"), obsolete_adjustment=True),
    # coreutils stdbuf(1): stdbuf -i/-o/-e MODE CMD; it exports _STDBUF_I/O/E and preloads libstdbuf.so
    "stdbuf": Wrapper(
        valued="ioe",
        long_valued=_long("input", "output", "error"),
        sets_env={"i": "_STDBUF_I", "o": "_STDBUF_O", "e": "_STDBUF_E"},
    ),
    # util-linux taskset(1): taskset [-a] [-c] MASK CMD (-p acts on a running process)
    "taskset": Wrapper(flags="ac", long_flags=_long("all-tasks", "cpu-list"), operands=("MASK",)),
    # numactl(8): the policy options, then CMD (--show, --hardware and the shm options run no command)
    "numactl": Wrapper(
        flags="alb",
        valued="ipmNC",
        long_flags=_long("all", "localalloc", "balancing"),
        long_valued=_long("interleave", "preferred", "membind", "cpunodebind", "physcpubind", "cpubind"),
    ),
    # util-linux ionice(1): ionice [-c C] [-n N] [-t] CMD (-p/-P/-u act on running processes)
    "ionice": Wrapper(
        flags="t", valued="cn", long_flags=_long("ignore"), long_valued=_long("class", "classdata")
    ),
    # util-linux chrt(1): chrt [policy] [-R] [-v] [-T/-P/-D ns] PRIORITY CMD (-p acts on a running process)
    "chrt": Wrapper(
        flags="bdfioRrv",
        valued="TPD",
        long_flags=_long("batch", "deadline", "fifo", "idle", "other", "rr", "reset-on-fork", "verbose"),
        long_valued=_long("sched-runtime", "sched-period", "sched-deadline"),
        operands=("PRIORITY",),
        numeric_operand=True,
    ),
}

_LONG_TO_SHORT = {"input": "i", "output": "o", "error": "e"}
_ADJUSTMENT = re.compile(r"-[+-]?[0-9]+")


@dataclass
class Unwrapped:
    """What a wrapper's own words were: how many precede its command, and the variables it sets for it
    (``unknown``: set, to a value not known here, with why)."""

    skip: int
    env: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)


def unwrap(name: str, args: Sequence[str | None], at: str) -> Unwrapped:
    """The wrapper ``name``'s options and operands at the start of ``args`` (the words after it; None for
    one word whose text is known only at run time). Raises UnresolvedLaunch for what is not modelled."""
    spec = WRAPPERS[name]
    out = Unwrapped(0)

    def unknown(why: str) -> UnresolvedLaunch:
        return UnresolvedLaunch(f"{at}: {name}: {why}, so what it runs is not known")

    def value(letter: str, text: str | None) -> None:
        var = spec.sets_env.get(letter)
        if var is None:
            return
        if text is None:
            out.unknown[var] = f"{name} sets it from a word known only at run time"
        else:
            out.env[var] = text

    i = 0
    while i < len(args):
        word = args[i]
        if word is None:
            raise unknown("a word in its options is computed at run time")
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if spec.obsolete_adjustment and _ADJUSTMENT.match(word):
            if not _ADJUSTMENT.fullmatch(word):  # nice: "invalid adjustment '5x'", and it runs nothing
                raise unknown(f"its adjustment {word!r} is not a number")
            i += 1
            continue
        if word.startswith("--"):
            opt, eq, given = word[2:].partition("=")
            if opt in spec.long_flags and not eq:
                i += 1
            elif opt in spec.long_valued:
                if eq:
                    value(_LONG_TO_SHORT.get(opt, ""), given)
                    i += 1
                elif i + 1 < len(args):
                    value(_LONG_TO_SHORT.get(opt, ""), args[i + 1])
                    i += 2
                else:
                    raise unknown(f"option {word!r} has no value")
            else:
                raise unknown(f"option {word!r} is not modelled")
            continue
        k = 1
        i += 1
        while k < len(word):
            letter = word[k]
            if letter in spec.flags:
                k += 1
            elif letter in spec.valued:
                if k + 1 < len(word):
                    value(letter, word[k + 1 :])
                elif i < len(args):
                    value(letter, args[i])
                    i += 1
                else:
                    raise unknown(f"option -{letter} has no value")
                break
            else:
                raise unknown(f"option -{letter} (in {word!r}) is not modelled")
    for operand in spec.operands:
        if i >= len(args):
            break
        word = args[i]
        if spec.numeric_operand and (word is None or not (word.isascii() and word.isdigit())):
            raise unknown(f"its {operand} {word or '(known only at run time)'!r} is not a number")
        i += 1
    if spec.sets_env:
        if not out.env and not out.unknown:
            raise unknown("no buffering mode is given (stdbuf then runs nothing)")
        out.unknown["LD_PRELOAD"] = f"{name} preloads its libstdbuf.so, whose path is its install's"
    out.skip = i
    return out


__all__ = ["WRAPPERS", "Unwrapped", "unwrap"]
