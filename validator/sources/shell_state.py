"""The evaluator's data: a shell variable, the state of one path through a script, how a path ends, and
the control flow that ends it (``exit``, ``return``, ``break``, the server's start).

Kept apart from the evaluator so that the builtins and the conditions, which read and change this state,
need not import the evaluator (and the evaluator's module stays the statements alone).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from validator.sources.docker_run import is_container_run
from validator.sources.shell_words import Fields, Unknown, Value

MAX_DEPTH = 16  # nested source/function calls
MAX_STEPS = 20_000  # statements per path; a launcher script needs a few hundred
MAX_PATHS = 256  # paths explored; beyond, the reading is unresolved
MAX_LOOP = 1_000  # iterations of one loop

RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in"}
RESERVED |= {"{", "}", "!", "[[", "]]", "function", "select", "time", ";;", ";&", ";;&"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FNV_OFFSET, _FNV_PRIME = 2166136261, 16777619
_ASSOC_BUCKETS = 1024

# programs whose only effect on the disk is through their redirections (so a later file test still holds)
READ_ONLY = {
    "echo", "printf", "true", "false", "sleep", "test", "[", "which", "grep", "egrep", "head", "tail",
    "cat", "ls", "date", "uname", "id", "whoami", "hostname", "free", "df", "nproc", "ps", "pgrep",
    "dirname", "basename", "realpath", "readlink", "printenv", "wc", "cut", "tr", "seq", "stat", "du",
    "lscpu", "pwd",
}  # fmt: skip


def reads_only(name: str, args: list[Value]) -> bool:
    """The program changes nothing on the disk (beyond its redirections): one of READ_ONLY, ``awk`` whose
    program has no output redirection, pipe or ``system()``, ``nvidia-smi`` without ``-f``, ``sort``
    without ``-o``, ``uniq`` with one file at most. Anything else (python3, pip, a download) may write
    anything, so what the script reads from the disk afterwards is unknown."""
    if name in READ_ONLY:
        return True
    if any(isinstance(a, Unknown) for a in args):
        return False
    words = [str(a) for a in args]
    if name in ("awk", "gawk", "mawk"):
        program = next((w for w in words if not w.startswith("-")), "")
        return not any(c in program for c in (">", "|", "system", "fflush")) and "-f" not in words
    if name == "nvidia-smi":
        return not any(w.startswith(("-f", "--filename")) for w in words)
    if name == "sort":
        return not any(w.startswith(("-o", "--output")) for w in words)
    if name == "uniq":
        return len([w for w in words if not w.startswith("-")]) <= 1
    return False


# programs that make exactly the directories or files named in their arguments
MAKERS = {"mkdir", "touch", "rm", "rmdir", "ln", "cp", "mv", "install", "chmod", "chown", "tee"}


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

    def copy(self) -> Var:
        return replace(self, items=dict(self.items) if isinstance(self.items, dict) else self.items)


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
    funcs: dict[str, Any]
    positional: list[Value] | Unknown
    opts: set[str]
    cwd: Value
    status: int | None = 0
    dirty: set[str] | None = field(default_factory=set)  # paths the script may have changed; None: any
    frames: list[dict[str, Var | None]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # BASH_SOURCE
    traps: dict[str, str] = field(default_factory=dict)

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
        )


def is_server_command(words: list[Value]) -> bool:
    """The words start the server: SGLang's entry points, spark-validate launch, or a container run."""
    known = [w for w in words if isinstance(w, str)]
    if is_container_run(known):
        return True
    for i, w in enumerate(known):
        name = Path(w).name
        if w in ("sglang.launch_server", "-msglang.launch_server"):
            return True
        if name == "sglang" and i + 1 < len(known) and known[i + 1] == "serve":
            return True
        if name == "spark-validate" and i + 1 < len(known) and known[i + 1] == "launch":
            return True
    return False


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


def inner(node: Any, open_: str, close: str) -> list[Any]:
    return [c for c in node.children if c.type not in (open_, close)]


def which(program: str, path: Value, cwd: Value) -> Value:
    """The file bash (or ``env``) runs for ``program`` with this ``PATH``: the first executable regular
    file; a name with a slash is itself."""
    if "/" in program:
        if program.startswith("/"):
            return program
        if isinstance(cwd, Unknown):
            return cwd
        return os.path.normpath(os.path.join(cwd, program))
    if isinstance(path, Unknown):
        return path
    for d in path.split(":"):
        if not d.startswith("/"):
            if isinstance(cwd, Unknown):
                return cwd
            d = os.path.join(cwd, d or ".")
        cand = os.path.join(d, program)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return Unknown(f"{program} is not on PATH here")
