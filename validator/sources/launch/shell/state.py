"""The reader's data: a shell variable, the state of one path through a script, how a path ends, the
control flow that ends it (``exit``, ``return``, ``break``, the server's start), and ``Names``, the
variables as expansion sees them. Below every part that reads or changes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tree_sitter import Node, Tree

from validator.sources.launch.shell.values import Fields, Unknown, Value

MAX_DEPTH = 16  # nested source/function calls
MAX_STEPS = 20_000  # statements per path; a launcher script needs a few hundred
MAX_PATHS = 256  # paths explored; beyond, the reading is unresolved
MAX_LOOP = 1_000  # iterations of one loop

RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in"}
RESERVED |= {"{", "}", "!", "[[", "]]", "function", "select", "time", ";;", ";&", ";;&"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FNV_OFFSET, _FNV_PRIME = 2166136261, 16777619
_ASSOC_BUCKETS = 1024


def bash_hash(key: str) -> int:
    """The bucket of an associative-array key: bash 5's FNV-1 over its bytes."""
    h = _FNV_OFFSET
    for b in key.encode("utf-8", "surrogateescape"):
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
        h ^= b
    return h & (_ASSOC_BUCKETS - 1)


@dataclass
class Var:
    """A shell variable: a scalar (``value``, None when declared but unset) or an array (``items``)."""

    value: Value | None = None
    items: dict[str, Value] | Unknown | None = None
    assoc: bool = False
    exported: bool | None = False  # None: known only at run time
    origin: str = "environment"
    readonly: bool = False
    # an unread sourced file may have made it an array: elements other than 0 unknown until a list is given
    maybe_array: bool = False

    def copy(self) -> Var:
        # built directly: a subshell copies every variable, and dataclasses.replace is several times slower
        items = dict(self.items) if isinstance(self.items, dict) else self.items
        return Var(self.value, items, self.assoc, self.exported, self.origin, self.readonly, self.maybe_array)


@dataclass
class Launch:
    """The command that starts the server on a path, as bash hands it over."""

    words: Fields  # the program and its arguments (wrappers such as ``exec`` removed)
    env: dict[str, Value]  # what is exported to it (values Unknown where known only at run time)
    origin: dict[str, str]
    unexported: set[str]  # variables the script set without exporting them (for messages)
    cwd: Value
    path: Value  # the shell's PATH, for finding the program
    line: int
    where: str
    execs: bool
    assumed: list[str]  # the run-time conditions this path took (guards assumed passed)
    others: str | None = None  # why variables not in ``env`` may be exported too (an unread sourced file)
    written: dict[str, str] = field(default_factory=dict)  # files the script wrote, with their text
    cwd_given: bool = True  # a cd set ``cwd`` (else it is where the reading assumed the script starts)
    cwd_read: bool = False  # a relative path was read against the assumed directory on the way here


@dataclass
class Ending:
    """How one path ended."""

    kind: str  # "launch", "exit", "unresolved"
    line: int
    where: str
    reason: str = ""
    launch: Launch | None = None
    assumed: list[str] = field(default_factory=list)
    survived: list[str] = field(default_factory=list)


@dataclass
class Reading:
    """Every path of the script: how each ended."""

    script: Path
    endings: list[Ending]
    notes: list[str]
    scripts: list[str] = field(default_factory=list)  # other scripts it runs, not followed: "X (line N)"


class Names(Protocol):
    """One path's variables as expansion and arithmetic read and set them (``variables.Variables``)."""

    @property
    def posix(self) -> bool:
        """A #!/bin/sh script: only what dash and bash do alike is modelled."""

    def scalar(self, name: str) -> Value | None:
        """A variable's value (element 0 of an array); None when unset."""

    def elements(self, name: str) -> list[tuple[str, Value]] | Unknown | None:
        """An array's (key, value) pairs in bash's order; a scalar as element 0; None when unset."""

    def lookup(self, name: str, index: str | None, node: Node) -> Value | None:
        """``$name``/``${name[index]}``: a variable, a positional or special parameter; None when unset."""

    def positional(self) -> list[Value] | Unknown: ...

    def set_scalar(self, name: str, value: Value, node: Node) -> None: ...

    def home(self, user: str) -> Value:
        """``~user``'s directory (``~``: ``$HOME``)."""

    def nounset(self) -> bool: ...

    def noglob(self) -> bool: ...


# a pure function's call: its distinct (status, output) outcomes (None: not summarised), what they assumed
Outcomes = tuple[list[tuple[int | None, Value]] | None, list[str]]


@dataclass
class Memo:
    """What one reading learns once for all its paths: which functions are pure (``effects.is_pure``), and
    a pure call's outcomes in a given state (``Commands.summarized``), the tree of a text sourced or eval'd
    (by its bytes and name: every path that sources the same file parses it, and ``bash -n`` checks it, once).
    """

    pure: dict[tuple[object, ...], bool] = field(default_factory=dict)
    calls: dict[tuple[object, ...], Outcomes] = field(default_factory=dict)
    trees: dict[tuple[bytes, str], Tree] = field(default_factory=dict)
    tree_bytes: int = 0  # the text of the trees kept (``builtins_flow.MAX_KEPT_TREES_BYTES`` at most)
    parsed_bytes: int = 0  # the text parsed (``builtins_flow.MAX_PARSED_BYTES`` at most)


class ShellExit(Exception):
    def __init__(self, status: int | None, line: int, why: str = "") -> None:
        self.status, self.line, self.why = status, line, why


class ShellReturn(Exception):
    def __init__(self, status: int | None) -> None:
        self.status = status


class LoopJump(Exception):
    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.n = kind, n


class Launched(Exception):
    def __init__(self, launch: Launch) -> None:
        self.launch = launch


@dataclass
class State:
    vars: dict[str, Var]
    funcs: dict[str, Node]
    positional: list[Value] | Unknown
    opts: set[str]
    cwd: Value
    status: int | None = 0
    dirty: set[str] | None = field(default_factory=set)  # paths the script may have changed; None: any
    frames: list[dict[str, Var | None]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # BASH_SOURCE
    traps: dict[str, str] = field(default_factory=dict)
    # why every variable not assigned since is unknown: a sourced file that could not be read
    opaque: str | None = None
    # files the script wrote whole with text known here (``cat > F <<'EOF'``), until it may change them
    written: dict[str, str] = field(default_factory=dict)
    cwd_given: bool = False  # a cd set ``cwd``: not the directory the reading assumed it starts in
    # descriptors the script opened (True) or closed (False), or whose state it made unknown (None); one
    # not here is as the shell started: 0, 1 and 2 open, any other inherited or not (``Commands.fd``)
    fds: dict[int, bool | None] = field(default_factory=dict)

    def fingerprint(self) -> tuple[object, ...]:
        """All of the state, as a value (for the reader's memo of calls that depend on nothing else)."""
        return (
            tuple(sorted((k, repr(v)) for k, v in self.vars.items())),
            tuple(sorted(self.funcs)),
            repr(self.positional),
            tuple(sorted(self.opts)),
            repr(self.cwd),
            self.status,
            None if self.dirty is None else tuple(sorted(self.dirty)),
            repr(self.frames),
            tuple(self.sources),
            tuple(sorted(self.traps.items())),
            self.opaque,
            tuple(sorted(self.written.items())),
            self.cwd_given,
            tuple(sorted(self.fds.items())),
        )

    def copy(self) -> State:
        return State(
            {k: v.copy() for k, v in self.vars.items()},
            dict(self.funcs),
            list(self.positional) if isinstance(self.positional, list) else self.positional,
            set(self.opts),
            self.cwd,
            self.status,
            None if self.dirty is None else set(self.dirty),
            [dict(f) for f in self.frames],
            list(self.sources),
            dict(self.traps),
            self.opaque,
            dict(self.written),
            self.cwd_given,
            dict(self.fds),
        )


# bash's own variables: their values are the running shell's, known only at run time
BASH_VARS = {
    "BASH", "BASHOPTS", "BASHPID", "BASH_ARGC", "BASH_ARGV", "BASH_COMMAND", "BASH_LINENO",
    "BASH_SUBSHELL", "BASH_VERSINFO", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "GROUPS", "HISTCMD",
    "HOSTNAME", "HOSTTYPE", "LINENO", "MACHTYPE", "OSTYPE", "PIPESTATUS", "PPID", "RANDOM", "SECONDS",
    "SHELLOPTS", "SRANDOM", "UID", "OLDPWD", "DIRSTACK", "COMP_WORDBREAKS", "SHLVL",
    "BASH_ALIASES", "BASH_CMDS", "BASH_EXECUTION_STRING", "BASH_LOADABLES_PATH",
}  # fmt: skip
# bash's own variables that may well be unset (no cd yet, no getopts, not run with -c)
MAYBE_UNSET = {"OLDPWD", "BASH_EXECUTION_STRING", "BASH_LOADABLES_PATH", "COMP_WORDBREAKS"}
# what bash sets when the environment does not: an inherited value is kept, else bash's own
BASH_DEFAULTS: dict[str, str | None] = {"PATH": None, "SHELL": None, "TERM": None, "OPTIND": "1"}
BASH_DEFAULTS |= {"OPTERR": "1", "PS4": "+ "}
# bash's variables whose setting changes how bash itself runs from then on (bash(1) "Shell Variables"; the
# special-variable hooks of bash's variables.c): POSIX mode (any value; unset leaves it), the compatibility
# level, the function nesting limit (a call past it drops the rest of its line), ``$0``, the programs a
# PATH search skips. Set, declared or unset in a script: not modelled
SHELL_TUNING = frozenset({"POSIXLY_CORRECT", "BASH_COMPAT", "FUNCNEST", "BASH_ARGV0", "EXECIGNORE"})
# of those, what bash takes from its environment at start (EXECIGNORE only when set later; POSIXLY_CORRECT
# changes nothing for bash started as sh, in POSIX mode already; BASH_ARGV0 is only a -c string's $0 where
# it is given no NAME: ``script.shell_zero``)
TUNING_FROM_ENV = frozenset({"BASH_COMPAT", "FUNCNEST"})
TUNING_FROM_ENV_BASH = TUNING_FROM_ENV | {"POSIXLY_CORRECT"}
