"""A bash script evaluated statically, path by path, as bash 5 would run it on this host.

What it computes: for every path through the script (a path forks where a condition is known only at
run time), how the path ends: exit, a construct the reader does not model (``Unresolvable``), or the first
command that starts the SGLang server (``Launch``: its words, the variables exported to it, the directory).
``launch_script`` turns that into ``LaunchFacts``; ``tests/test_shell_differential.py`` holds every
modelled construct to what real bash does.

The rules it keeps (each one exactly, or the path is unresolved):

- variables (scalars, indexed and associative arrays, with bash's order of associative keys), their
  export attribute (``export``, ``declare -x``/``+x``, ``export -n``, ``set -a``), ``VAR=x cmd``,
  ``local`` and positional parameters per function call, ``set --`` and ``shift``;
- the command lookup order (a function shadows a builtin and a program; ``exec`` and ``command`` skip
  functions), ``source`` (``$PATH`` first for a name with no slash), ``cd`` (against the disk);
- ``set -e`` (which failures exit, and which are ignored: conditions, ``&&``/``||`` left sides, ``!``),
  ``set -u``, ``set -f``, ``IFS``;
- conditions: ``[ ]``/``test`` (string comparison) and ``[[ ]]`` (pattern matching), file tests against
  the disk (unless the script may have changed that path), arithmetic on known integers, ``case`` with
  ``;;``, ``;&`` and ``;;&``.

What is never guessed: a program's output or exit status (a condition on one forks; a failure that
``set -e`` would turn into an exit is a path with no launch), ``read``, ``mapfile``, ``eval`` or
``printf -v`` of unknown text, ``trap`` on ``DEBUG``/``RETURN``/``ERR``, ``declare -n``, ``shopt``,
``enable``, ``hash -p``, ``BASH_ENV``, a file the script wrote before sourcing it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from validator.sources.files import read_bounded
from validator.sources.shell_parse import MAX_SCRIPT_BYTES, field_of, line_of, parse, snippet, text
from validator.sources.shell_words import (
    Field,
    Fields,
    Unbound,
    Unknown,
    Unmodelled,
    Unsplit,
    Value,
    Words,
    join,
)

MAX_DEPTH = 16  # nested source/function calls
MAX_STEPS = 20_000  # statements per path; a launcher script needs a few hundred
MAX_PATHS = 256  # paths explored; beyond, the reading is unresolved
MAX_LOOP = 1_000  # iterations of one loop

_RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in"}
_RESERVED |= {"{", "}", "!", "[[", "]]", "function", "select", "time", ";;", ";&", ";;&"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FNV_OFFSET, _FNV_PRIME = 2166136261, 16777619
_ASSOC_BUCKETS = 1024

# programs whose only effect on the disk is through their redirections (so a later file test still holds)
_READ_ONLY = {
    "echo", "printf", "true", "false", "sleep", "test", "[", "which", "nvidia-smi", "grep", "egrep",
    "awk", "head", "tail", "cat", "ls", "date", "uname", "id", "whoami", "hostname", "free", "df", "nproc",
    "ps", "pgrep", "dirname", "basename", "realpath", "readlink", "env", "printenv", "wc", "cut", "tr",
    "sort", "uniq", "seq", "stat", "du", "lscpu", "numactl", "pwd", "python3", "python", "nvcc", "sysctl",
}  # fmt: skip
# programs that make exactly the directories or files named in their arguments
_MAKERS = {"mkdir", "touch", "rm", "rmdir", "ln", "cp", "mv", "install", "chmod", "chown", "tee"}


def _bash_hash(key: str) -> int:
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


class _Exit(Exception):
    def __init__(self, status: int | None, line: int, why: str = "") -> None:
        self.status, self.line, self.why = status, line, why


class _Return(Exception):
    def __init__(self, status: int | None) -> None:
        self.status = status


class _Loop(Exception):
    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.n = kind, n


class _Launched(Exception):
    def __init__(self, launch: Launch) -> None:
        self.launch = launch


class _Fork(Exception):
    """Too many paths: the reading is unresolved."""


@dataclass
class _State:
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

    def copy(self) -> _State:
        return _State(
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
    from validator.sources.docker_run import is_container_run

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
_BASH_VARS = {
    "BASH", "BASHOPTS", "BASHPID", "BASH_ARGC", "BASH_ARGV", "BASH_COMMAND", "BASH_LINENO",
    "BASH_SUBSHELL", "BASH_VERSINFO", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "GROUPS", "HISTCMD",
    "HOSTNAME", "HOSTTYPE", "LINENO", "MACHTYPE", "OSTYPE", "PIPESTATUS", "PPID", "RANDOM", "SECONDS",
    "SHELLOPTS", "SRANDOM", "UID", "OLDPWD", "DIRSTACK", "COMP_WORDBREAKS", "OPTARG",
}  # fmt: skip


class Evaluator(Words):
    """One path through the script, the decisions at its forks given by ``prefix``."""

    def __init__(self, script: Path, prefix: list[int]) -> None:
        self.script = script
        self.prefix = prefix
        self.choices: list[int] = []  # alternatives at each fork met, in order
        self.taken: list[str] = []  # what each fork assumed
        self.steps = 0
        self.depth = 0
        self.ignore_errexit = 0
        self.in_function = 0
        self.st: _State
        self.file = str(script)  # the file whose statements run now
        self.notes: list[str] = []
        self.missing_source: list[str] = []
        self.survived: list[str] = []  # commands taken to succeed because set -e would exit otherwise
        self._capturing: list[Value] | None = None  # inside $(...): what the commands print

    # -- forks ------------------------------------------------------------------------------------------

    def decide(self, n: int, labels: list[str], node: Any) -> int:
        k = len(self.choices)
        self.choices.append(n)
        choice = self.prefix[k] if k < len(self.prefix) else 0
        self.taken.append(f"{self.file}:{line_of(node)}: {labels[choice]}")
        return choice

    def known_status(self, status: int | None, what: str, node: Any) -> bool:
        """Whether a status counts as success; an unknown one is a fork."""
        if status is not None:
            return status == 0
        return self.decide(2, [f"{what} succeeded", f"{what} failed"], node) == 0

    # -- Words' interface -------------------------------------------------------------------------------

    def scalar(self, name: str) -> Value | None:
        if name == "PWD" and "PWD" not in self.st.vars:
            return self.st.cwd
        if name == "BASH_VERSION" and name not in self.st.vars:
            return Unknown("$BASH_VERSION: the running bash's", nonempty=True)
        if name == "FUNCNAME" and name not in self.st.vars:
            return None
        if name == "BASH_SOURCE" and name not in self.st.vars:
            return self.st.sources[-1] if self.st.sources else None
        if name == "0":
            return str(self.script)
        if name == "?":
            return Unknown("$?: an exit status") if self.st.status is None else str(self.st.status)
        if name in _BASH_VARS and name not in self.st.vars:
            return Unknown(f"${name}: set by bash at run time")
        var = self.st.vars.get(name)
        if var is None:
            return None
        if var.items is not None:
            if isinstance(var.items, Unknown):
                return var.items
            return var.items.get("0")
        return var.value

    def elements(self, name: str) -> list[tuple[str, Value]] | Unknown | None:
        if name == "BASH_SOURCE" and name not in self.st.vars:
            return [(str(k), v) for k, v in enumerate(reversed(self.st.sources))]
        if name in _BASH_VARS and name not in self.st.vars:
            return Unknown(f"${{{name}[@]}}: set by bash at run time")
        var = self.st.vars.get(name)
        if var is None:
            return None
        if var.items is None:
            return None if var.value is None else [("0", var.value)]
        if isinstance(var.items, Unknown):
            return var.items
        if var.assoc:
            order = sorted(
                enumerate(var.items), key=lambda kv: (_bash_hash(kv[1]), -kv[0])
            )  # bucket ascending, newest first within a bucket
            return [(k, var.items[k]) for _, k in order]
        return [(k, var.items[k]) for k in sorted(var.items, key=int)]

    def element(self, name: str, key: str, node: Any) -> Value | None:
        if name == "BASH_SOURCE" and name not in self.st.vars:
            if not key.isdigit():
                raise Unmodelled(f"BASH_SOURCE[{key}]", line_of(node))
            k = int(key)
            return self.st.sources[-1 - k] if k < len(self.st.sources) else None
        if name in _BASH_VARS and name not in self.st.vars:
            return Unknown(f"${{{name}[{key}]}}: set by bash at run time")
        var = self.st.vars.get(name)
        if var is None:
            return None
        if var.items is None:
            if not var.assoc and self._index(key, node) == "0":
                return var.value
            return None
        if isinstance(var.items, Unknown):
            return var.items
        return var.items.get(key if var.assoc else self._index(key, node))

    def _index(self, key: str, node: Any) -> str:
        v = self.arith(key, node)
        if isinstance(v, Unknown):
            raise Unmodelled(f"array index {key!r}: {v.reason}", line_of(node))
        if int(v) < 0:
            raise Unmodelled(f"negative array index {key!r}", line_of(node))
        return v

    def positional(self) -> list[Value] | Unknown:
        return self.st.positional

    def set_scalar(self, name: str, value: Value, node: Any) -> None:
        self.assign(name, value, node)

    def home(self, user: str) -> Value | None:
        if not user:
            h = self.scalar("HOME")
            return h if h is not None else Unknown("~: HOME is not set")
        return Unknown(f"~{user}: that user's home directory on the host")

    def nounset(self) -> bool:
        return "nounset" in self.st.opts

    def noglob(self) -> bool:
        return "noglob" in self.st.opts

    # -- variables --------------------------------------------------------------------------------------

    def origin(self, node: Any) -> str:
        return f"script:{self.file}:{line_of(node)}"

    def assign(
        self, name: str, value: Value, node: Any, *, key: str | None = None, append: bool = False
    ) -> None:
        if name in _BASH_VARS or name in ("PWD", "BASH_SOURCE", "FUNCNAME", "BASH_VERSION", "BASH_ENV"):
            raise Unmodelled(f"assignment to bash's own variable {name}", line_of(node))
        var = self.st.vars.get(name)
        if var is not None and var.readonly:
            raise Unmodelled(f"assignment to the readonly variable {name}", line_of(node))
        if var is None:
            var = Var()
            self.st.vars[name] = var
        if "allexport" in self.st.opts:
            var.exported = True
        var.origin = self.origin(node)
        if key is not None or var.items is not None:
            if var.items is None:
                var.items = {} if var.value is None or var.assoc else {"0": var.value}
                var.value = None
            if isinstance(var.items, Unknown):
                raise Unmodelled(
                    f"assignment into the array {name}, whose elements are unknown", line_of(node)
                )
            k = (key if var.assoc else self._index(key, node)) if key is not None else "0"
            if append:
                value = join([var.items.get(k, ""), value])
            var.items[k] = value
            return
        if append:
            value = join([var.value or "", value])
        var.value = value

    # -- running ----------------------------------------------------------------------------------------

    def run(self, tree: Any, env: Mapping[str, str], args: list[str]) -> Ending:
        self.st = _State(
            vars={k: Var(value=v, exported=True) for k, v in env.items()},
            funcs={},
            positional=list(args),
            opts=set(),
            cwd=str(self.script.parent),
            sources=[str(self.script)],
        )
        self.st.vars.pop("PWD", None)
        if "IFS" in self.st.vars:  # bash ignores an inherited IFS
            del self.st.vars["IFS"]
        for name in [k for k in self.st.vars if k in _BASH_VARS or k.startswith("BASH_FUNC_")]:
            if name.startswith("BASH_FUNC_"):
                return Ending("unresolved", 1, self.file, f"{name} in the environment: an exported function")
            if name not in ("OLDPWD",):
                del self.st.vars[name]
        if env.get("BASH_ENV"):
            return Ending("unresolved", 1, self.file, "BASH_ENV is set: bash sources that file first")
        if env.get("SHELLOPTS") or env.get("BASHOPTS"):
            return Ending("unresolved", 1, self.file, "SHELLOPTS/BASHOPTS in the environment")
        try:
            self.block(list(tree.root_node.children))
        except _Launched as hit:
            return Ending("launch", hit.launch.line, hit.launch.where, launch=hit.launch, assumed=self.taken)
        except _Exit as ex:
            return Ending("exit", ex.line, self.file, ex.why or f"exit {ex.status}", assumed=self.taken)
        except Unmodelled as um:
            return Ending("unresolved", um.line, um.where or self.file, um.reason, assumed=self.taken)
        except _Return:
            return Ending("exit", 0, self.file, "return outside a function", assumed=self.taken)
        except _Loop:
            return Ending("exit", 0, self.file, "break outside a loop", assumed=self.taken)
        except Unbound as ub:
            return Ending("exit", 0, self.file, f"unbound variable {ub}", assumed=self.taken)
        return Ending("exit", 0, self.file, "the script ends", assumed=self.taken)

    def block(self, nodes: list[Any]) -> int | None:
        status: int | None = 0
        k = 0
        while k < len(nodes):
            node = nodes[k]
            background = k + 1 < len(nodes) and nodes[k + 1].type == "&"
            if background:
                status = self.background(node)
                k += 2
                continue
            status = self.stmt(node)
            k += 1
        return status

    def background(self, node: Any) -> int | None:
        saved = self.st
        self.st = saved.copy()
        self.ignore_errexit += 1
        try:
            self.stmt(node)
        except (_Exit, _Return, _Loop, Unbound):
            pass
        finally:
            self.ignore_errexit -= 1
            self.st = saved
        self.st.status = 0
        self.st.dirty = None  # a job running alongside may change anything on the disk
        return 0

    def errexit(self, status: int | None, node: Any, what: str) -> int | None:
        """``set -e``: a failed simple command, pipeline or subshell outside a condition ends the script.
        An unknown status there is taken as success (the path where it failed launches nothing)."""
        self.st.status = status
        if "errexit" not in self.st.opts or self.ignore_errexit:
            return status
        if status is None:
            self.survived.append(f"{self.file}:{line_of(node)}: {what} succeeded")
            self.st.status = 0
            return 0
        if status != 0:
            raise _Exit(status, line_of(node), f"set -e: {what} failed (status {status})")
        return status

    @contextmanager
    def ignoring(self) -> Iterator[None]:
        self.ignore_errexit += 1
        try:
            yield
        finally:
            self.ignore_errexit -= 1

    def stmt(self, node: Any) -> int | None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unmodelled(f"more than {MAX_STEPS} statements on one path", line_of(node))
        if self.st.traps:
            pass
        t = node.type
        if t in ("comment", ";", "\n", "heredoc_body"):
            return self.st.status
        if t == "variable_assignment":
            self.st.status = 0
            self.assignment(node)
            return self.errexit(self.st.status, node, snippet(node))
        if t == "variable_assignments":
            self.st.status = 0
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assignment(child)
            return self.errexit(self.st.status, node, snippet(node))
        if t in ("declaration_command", "unset_command", "test_command"):
            keyword = text(node.children[0])
            if keyword in self.st.funcs:
                raise Unmodelled(f"a function named {keyword} shadows the builtin", line_of(node))
        if t == "declaration_command":
            return self.errexit(self.declaration(node), node, snippet(node))
        if t == "unset_command":
            return self.errexit(self.unset(node), node, snippet(node))
        if t == "command":
            return self.command(node)
        if t == "redirected_statement":
            return self.redirected(node)
        if t == "list":
            return self.and_or(node)
        if t == "pipeline":
            return self.pipeline(node)
        if t == "negated_command":
            with self.ignoring():
                status = self.stmt(node.children[-1])
            self.st.status = None if status is None else int(status == 0)
            return self.st.status
        if t == "subshell":
            return self.errexit(self.subshell(_inner(node, "(", ")")), node, "( ... )")
        if t == "compound_statement":
            kids = _inner(node, "{", "}")
            if node.children and node.children[0].type == "((":
                return self.errexit(self.arith_command(node), node, snippet(node))
            return self.block(kids)
        if t == "function_definition":
            name = text(node.child_by_field_name("name"))
            self.st.funcs[name] = node.child_by_field_name("body")
            self.st.status = 0
            return 0
        if t == "test_command":
            return self.errexit(self.test_command(node), node, snippet(node))
        if t == "if_statement":
            return self.if_statement(node)
        if t == "case_statement":
            return self.case_statement(node)
        if t == "for_statement":
            return self.for_statement(node)
        if t in ("while_statement",):
            return self.while_statement(node)
        raise Unmodelled(f"{t.replace('_', ' ')}: {snippet(node)}", line_of(node))

    # -- assignments and declarations -------------------------------------------------------------------

    def assignment(self, node: Any, *, local: bool = False) -> str:
        """``NAME=value``, ``NAME+=value``, ``NAME=(...)``, ``NAME[k]=v``: applies it, returns NAME."""
        target = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        append = any(c.type == "+=" for c in node.children)
        key: str | None = None
        if target.type == "subscript":
            name = text(target.child_by_field_name("name"))
            index_node = target.child_by_field_name("index")
            kv = self.value(index_node)
            if isinstance(kv, Unknown):
                raise Unmodelled(f"array subscript known only at run time: {kv.reason}", line_of(node))
            key = kv
        else:
            name = text(target)
        if value_node is not None and value_node.type == "array":
            self.array_assignment(name, value_node, append, node)
            return name
        value: Value = "" if value_node is None else self.value(value_node, assignment=True)
        self.assign(name, value, node, key=key, append=append)
        return name

    def array_assignment(self, name: str, node: Any, append: bool, at: Any) -> None:
        var = self.st.vars.get(name)
        assoc = var is not None and var.assoc
        items: dict[str, Value] = {}
        if append and var is not None:
            if isinstance(var.items, Unknown):
                raise Unmodelled(f"{name}+=(...) onto unknown elements", line_of(at))
            items = (
                dict(var.items) if var.items is not None else ({} if var.value is None else {"0": var.value})
            )
        words = [c for c in node.children if c.type not in ("(", ")")]
        for w in words:
            raw = text(w)
            m = (
                re.match(r"\[([^\]]*)\](\+?)=", raw)
                if w.type == "concatenation" or w.type == "word"
                else None
            )
            if m is not None:
                raise (
                    Unmodelled(f"keyed array element {raw[:30]!r}", line_of(w))
                    if not assoc
                    else Unmodelled(f"associative array literal {raw[:30]!r}", line_of(w))
                )
            if assoc:
                raise Unmodelled(f"associative array {name} given a list", line_of(w))
            fs = self.fields(w)
            if isinstance(fs, Unknown):
                items = {}
                new = Var(items=fs, exported=var.exported if var else False, origin=self.origin(at))
                self.st.vars[name] = new
                return
            for f in fs:
                nxt = str(max((int(k) for k in items), default=-1) + 1)
                items[nxt] = join(f)
        new = var if var is not None else Var()
        if var is None:
            self.st.vars[name] = new
        new.items, new.value, new.origin = items, None, self.origin(at)
        if "allexport" in self.st.opts:
            new.exported = True

    def declaration(self, node: Any) -> int | None:
        keyword = text(node.children[0])
        if keyword == "local" and not self.in_function:
            return 1  # bash: "local: can only be used in a function"
        flags: dict[str, bool] = {}
        status: int | None = 0
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                name = text(child.child_by_field_name("name")).split("[")[0]
                self.declare(name, keyword, flags, child, assignment=child)
                continue
            fs = self.fields(child)
            if isinstance(fs, Unknown):
                raise Unmodelled(f"{keyword} argument known only at run time: {fs.reason}", line_of(child))
            for f in fs:
                word = join(f)
                if isinstance(word, Unknown):
                    raise Unmodelled(
                        f"{keyword} argument known only at run time: {word.reason}", line_of(child)
                    )
                if (
                    word[:1] in "-+"
                    and len(word) > 1
                    and _NAME.fullmatch(word[1:].replace("-", "x")) is not None
                ):
                    for letter in word[1:]:
                        flags[letter] = word[0] == "-"
                    continue
                name, eq, rest = word.partition("=")
                if not _NAME.fullmatch(name.removesuffix("+")):
                    status = 1  # bash: not a valid identifier
                    continue
                if eq:
                    self.declare(
                        name.removesuffix("+"), keyword, flags, child, value=rest, append=name.endswith("+")
                    )
                else:
                    self.declare(name, keyword, flags, child)
        return status

    def declare(
        self,
        name: str,
        keyword: str,
        flags: dict[str, bool],
        node: Any,
        *,
        assignment: Any = None,
        value: str | None = None,
        append: bool = False,
    ) -> None:
        line = line_of(node)
        for letter in flags:
            if letter not in "xaAgrnpf" or (keyword == "export" and letter not in "nfp"):
                raise Unmodelled(f"{keyword} -{letter}", line)
        if flags.get("n") and keyword != "export":
            raise Unmodelled(f"{keyword} -n (a name reference)", line)
        if "f" in flags:
            raise Unmodelled(f"{keyword} -f (functions)", line)
        if flags.get("p"):
            return
        local = keyword == "local" or (
            keyword in ("declare", "typeset") and self.in_function and not flags.get("g")
        )
        if local:
            frame = self.st.frames[-1]
            if name in self.st.vars and self.st.vars[name].readonly:
                raise Unmodelled(f"local {name}: {name} is readonly", line)
            if name not in frame:
                frame[name] = self.st.vars.get(name)
                prior = self.st.vars.pop(name, None)
                # a local starts unset, keeping nothing of the outer variable but (for an exported one
                # under set -a) nothing else either
                self.st.vars[name] = Var(
                    value=None,
                    exported=prior.exported if prior is not None else False,
                    origin=self.origin(node),
                )  # a local keeps the export attribute of the variable it hides (bash does)
        var = self.st.vars.get(name)
        if var is None:
            var = Var(value=None, exported=False, origin=self.origin(node))
            self.st.vars[name] = var
        if flags.get("A") or flags.get("a"):
            if var.items is None and var.value is None:
                var.assoc = bool(flags.get("A"))
                var.items = {}
            elif bool(flags.get("A")) != var.assoc:
                raise Unmodelled(f"{name} changes between indexed and associative", line)
        if assignment is not None:
            self.assignment(assignment)
            var = self.st.vars[name]
        elif value is not None:
            self.assign(name, value, node, append=append)
            var = self.st.vars[name]
        if keyword == "export":
            var.exported = not flags.get("n", False)
        elif "x" in flags:
            var.exported = flags["x"]
        elif keyword == "readonly" or flags.get("r"):
            var.readonly = True
        if "allexport" in self.st.opts and (assignment is not None or value is not None):
            var.exported = True
        if keyword == "export" and flags.get("n") is False:
            var.exported = True

    def unset(self, node: Any) -> int | None:
        mode = "v"
        status: int | None = 0
        for child in node.children[1:]:
            fs = self.fields(child)
            if isinstance(fs, Unknown):
                raise Unmodelled(f"unset of a name known only at run time: {fs.reason}", line_of(child))
            for f in fs:
                word = join(f)
                if isinstance(word, Unknown):
                    raise Unmodelled(f"unset of a name known only at run time: {word.reason}", line_of(child))
                if word in ("-v", "-f", "-n"):
                    mode = word[1]
                    if mode == "n":
                        raise Unmodelled("unset -n", line_of(child))
                    continue
                if mode == "f":
                    self.st.funcs.pop(word, None)
                    continue
                m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\[(.+)\]", word)
                if m is not None:
                    raise Unmodelled(f"unset of an array element {word!r}", line_of(child))
                if not _NAME.fullmatch(word):
                    status = 1
                    continue
                if any(word in fr for fr in self.st.frames):
                    raise Unmodelled(f"unset of the function-local {word}", line_of(child))
                var = self.st.vars.get(word)
                if var is not None and var.readonly:
                    raise Unmodelled(f"unset of the readonly {word}", line_of(child))
                if word in _BASH_VARS or word == "PWD":
                    raise Unmodelled(f"unset of bash's {word}", line_of(child))
                if mode == "v" and var is None and word in self.st.funcs:
                    self.st.funcs.pop(word)  # bash: unset NAME falls back to the function
                self.st.vars.pop(word, None)
        return status

    # -- simple commands --------------------------------------------------------------------------------

    def redirected(self, node: Any) -> int | None:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.children if field_of(node, c) == "redirect"]
        for r in redirects:
            self.redirect(r)
        if body is None:
            return self.st.status
        if any(_redirects_stdout(r) for r in redirects):
            with self.stdout_elsewhere():
                return self.stmt(body)
        return self.stmt(body)

    def redirect(self, node: Any) -> None:
        """A redirection: a file it writes is a path the script changed; input is not modelled."""
        if node.type == "heredoc_redirect":
            for sub in node.children:
                if sub.type in ("file_redirect", "heredoc_redirect"):
                    self.redirect(sub)
            return
        if node.type == "herestring_redirect":
            return
        op = next(
            (
                text(c)
                for c in node.children
                if c.type in (">", ">>", ">|", "&>", "&>>", ">&", "<", "<>", "<&", "&>", ">&-", "<&-")
            ),
            "",
        )
        dest = node.child_by_field_name("destination")
        if op in ("<", "<&") or dest is None:
            return
        if op in (">&", "<&") and dest.type == "number":
            return
        target = self.value(dest)
        if op == ">&" and isinstance(target, str) and (target.isdigit() or target == "-"):
            return
        self.touch(target)

    def touch(self, path: Value) -> None:
        if self.st.dirty is None:
            return
        if isinstance(path, Unknown) or isinstance(self.st.cwd, Unknown):
            self.st.dirty = None
            return
        if path in ("/dev/null", "/dev/stdout", "/dev/stderr"):
            return
        self.st.dirty.add(os.path.normpath(os.path.join(self.st.cwd, path)))

    def changed(self, path: str) -> bool:
        """The script may have changed ``path`` (or a directory above or below it)."""
        if self.st.dirty is None:
            return True
        if isinstance(self.st.cwd, Unknown) and not path.startswith("/"):
            return True
        full = os.path.normpath(os.path.join(str(self.st.cwd), path))
        return any(full == d or full.startswith(d + "/") or d.startswith(full + "/") for d in self.st.dirty)

    def command(self, node: Any) -> int | None:
        kids = list(node.children)
        name_node = node.child_by_field_name("name")
        assigns = [c for c in kids if c.type == "variable_assignment"]
        if name_node is not None and assigns:
            # tree-sitter reads `A=1 B=2<newline>C=3 cmd` as one command: bash runs the first line alone
            cut = 0
            for k, a in enumerate(assigns):
                after = assigns[k + 1] if k + 1 < len(assigns) else name_node
                gap = node.text[a.end_byte - node.start_byte : after.start_byte - node.start_byte]
                if b"\n" in gap.replace(b"\\\n", b""):
                    cut = k + 1
            if cut:
                self.st.status = 0
                for a in assigns[:cut]:
                    self.assignment(a)
                self.errexit(self.st.status, node, "assignment")
                assigns = assigns[cut:]
        for c in kids:
            if c.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(c)
        words: list[Field] = []
        self.st.status = 0
        for c in kids:
            if c.type == "command_name" or field_of(node, c) == "argument":
                fs = self.fields(c.children[0] if c.type == "command_name" else c)
                if isinstance(fs, Unknown):
                    if not words:
                        raise Unmodelled(
                            f"the command name is known only at run time: {fs.reason}", line_of(node)
                        )
                    words.append([fs])
                    continue
                words += fs
        if not words:
            for a in assigns:
                self.assignment(a)
            return self.errexit(self.st.status, node, snippet(node))
        prefix: list[tuple[str, Value]] = []
        for a in assigns:
            scratch = self.st.copy()
            saved, self.st = self.st, scratch
            try:
                name = self.assignment(a)
                value = (
                    self.st.vars[name].value
                    if self.st.vars[name].items is None
                    else Unknown("an array prefix")
                )
            finally:
                self.st = saved
            prefix.append((name, value if value is not None else ""))
        return self.invoke(words, prefix, node)

    def invoke(
        self,
        words: list[Field],
        prefix: list[tuple[str, Value]],
        node: Any,
        *,
        execs: bool = False,
        skip_functions: bool = False,
        only_builtins: bool = False,
    ) -> int | None:
        head = join(words[0])
        if isinstance(head, Unknown):
            raise Unmodelled(f"the command name is known only at run time: {head.reason}", line_of(node))
        args = words[1:]
        if not skip_functions and head in self.st.funcs:
            return self.errexit(self.call_function(head, args, prefix, node), node, head)
        if head in _BUILTINS and not (execs and head not in ("exec",)):
            if head in ("exec", "command", "builtin") or not prefix:
                return _BUILTINS[head](self, args, prefix, node)
            with self.temporary(prefix, node):
                status = _BUILTINS[head](self, args, prefix, node)
            return status
        if only_builtins:
            return self.errexit(1, node, f"builtin {head}")
        # an external program
        values = [join(f) for f in words]
        if is_server_command(values):
            self.launch(words, prefix, node, execs)
        if head == "time" and len(words) > 1:
            return self.invoke(words[1:], prefix, node, execs=execs)
        if execs:
            raise _Exit(None, line_of(node), f"exec {head}: the script becomes that program")
        if head in _PROGRAMS:
            return _PROGRAMS[head](self, args, prefix, node)
        self.output_unknown(head)
        name = os.path.basename(head)
        if name in _MAKERS:
            for a in values[1:]:
                if isinstance(a, Unknown):
                    self.st.dirty = None
                elif not a.startswith("-"):
                    self.touch(a)
        elif name not in _READ_ONLY:
            self.st.dirty = None  # an unknown program may change anything on the disk
        if self.ignore_errexit or "errexit" not in self.st.opts:
            self.st.status = None
            return None
        return self.errexit(None, node, head)

    @contextmanager
    def temporary(self, prefix: list[tuple[str, Value]], node: Any) -> Iterator[None]:
        saved = {n: (self.st.vars[n].copy() if n in self.st.vars else None) for n, _ in prefix}
        for n, v in prefix:
            self.assign(n, v, node)
            self.st.vars[n].exported = True
        try:
            yield
        finally:
            for n, old in saved.items():
                if old is None:
                    self.st.vars.pop(n, None)
                else:
                    self.st.vars[n] = old

    def launch(self, words: list[Field], prefix: list[tuple[str, Value]], node: Any, execs: bool) -> None:
        env: dict[str, Value] = {}
        origin: dict[str, str] = {}
        unexported: set[str] = set()
        for name, var in self.st.vars.items():
            if var.items is not None:
                continue  # bash exports no arrays
            if var.value is None:
                continue
            if var.exported is None:
                env[name] = Unknown(f"whether {name} is exported is decided at run time")
            elif var.exported:
                env[name] = var.value
            else:
                unexported.add(name)
                continue
            origin[name] = var.origin
        for name, value in prefix:
            env[name], origin[name] = value, self.origin(node)
            unexported.discard(name)
        if "PWD" not in env:
            env["PWD"], origin["PWD"] = self.st.cwd, "bash"
        path = self.scalar("PATH")
        for name, value in prefix:
            if name == "PATH":
                path = value
        raise _Launched(
            Launch(
                words=words,
                env=env,
                origin=origin,
                unexported=unexported,
                cwd=self.st.cwd,
                path=path if path is not None else Unknown("PATH is unset: bash's default search path"),
                line=line_of(node),
                where=self.file,
                execs=execs,
                assumed=list(self.taken),
            )
        )

    def call_function(
        self, name: str, args: list[Field], prefix: list[tuple[str, Value]], node: Any
    ) -> int | None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unmodelled(f"functions or sourced files nested deeper than {MAX_DEPTH}", line_of(node))
        if prefix:
            raise Unmodelled(f"assignments before the function call {name}", line_of(node))
        saved_pos = self.st.positional
        self.st.positional = self.positional_from(args, node)
        self.st.frames.append({})
        self.in_function += 1
        body = self.st.funcs[name]
        status: int | None
        try:
            if body.type == "subshell":
                status = self.subshell(_inner(body, "(", ")"))
            elif body.type == "compound_statement":
                status = self.block(_inner(body, "{", "}"))
            else:
                status = self.stmt(body)
        except _Return as r:
            status = r.status
        finally:
            self.in_function -= 1
            frame = self.st.frames.pop()
            for var_name, old in frame.items():
                if old is None:
                    self.st.vars.pop(var_name, None)
                else:
                    self.st.vars[var_name] = old
            self.st.positional = saved_pos
            self.depth -= 1
        self.st.status = status
        return status

    def positional_from(self, args: list[Field], node: Any) -> list[Value] | Unknown:
        out: list[Value] = []
        for f in args:
            if len(f) == 1 and isinstance(f[0], Unsplit):
                return Unknown(f"the arguments at line {line_of(node)} are split at run time")
            out.append(join(f))
        return out

    def subshell(self, nodes: list[Any]) -> int | None:
        saved = self.st
        self.st = saved.copy()
        try:
            status = self.block(nodes)
        except _Exit as ex:
            status = ex.status
        except _Return as r:
            status = r.status
        except Unbound:
            status = 1
        finally:
            dirty = self.st.dirty
            self.st = saved
            if dirty is None:
                self.st.dirty = None
            elif self.st.dirty is not None:
                self.st.dirty |= dirty
        self.st.status = status
        return status

    # -- lists, pipelines -------------------------------------------------------------------------------

    def and_or(self, node: Any) -> int | None:
        left, op, right = node.children[0], node.children[1].type, node.children[2]
        with self.ignoring():
            status = self.stmt(left)
        ok = self.known_status(status, snippet(left), left)
        if (op == "&&") == ok:
            return self.stmt(right)
        self.st.status = status if status is not None else (1 if op == "&&" else 0)
        return self.st.status

    def pipeline(self, node: Any) -> int | None:
        parts = [c for c in node.children if c.type not in ("|", "|&")]
        statuses: list[int | None] = []
        for part in parts:
            saved = self.st
            self.st = saved.copy()
            try:
                with self.ignoring(), self.stdout_elsewhere() if part is not parts[-1] else _nothing():
                    statuses.append(self.stmt(part))
            except (_Exit, _Return, _Loop, Unbound) as ex:
                statuses.append(getattr(ex, "status", 1))
            finally:
                dirty = self.st.dirty
                self.st = saved
                if dirty is None:
                    self.st.dirty = None
                elif self.st.dirty is not None:
                    self.st.dirty |= dirty
        status = statuses[-1]
        if "pipefail" in self.st.opts:
            status = next((s for s in reversed(statuses) if s != 0), 0)
        return self.errexit(status, node, snippet(node))

    # -- compound commands ------------------------------------------------------------------------------

    def if_statement(self, node: Any) -> int | None:
        clauses: list[tuple[list[Any], list[Any]]] = []
        cond: list[Any] = []
        body: list[Any] = []
        state = "cond"
        for child in node.children:
            t = child.type
            if t in ("if", "fi"):
                continue
            if t == "then":
                state = "body"
            elif t in ("elif_clause", "else_clause"):
                if state != "done":
                    clauses.append((cond, body))
                state = "done"
                sub_cond: list[Any] = []
                sub_body: list[Any] = []
                sub_state = "cond" if t == "elif_clause" else "body"
                for c in child.children:
                    if c.type in ("elif", "else"):
                        continue
                    if c.type == "then":
                        sub_state = "body"
                    elif sub_state == "cond":
                        sub_cond.append(c)
                    else:
                        sub_body.append(c)
                clauses.append((sub_cond, sub_body))
            elif state == "cond":
                cond.append(child)
            else:
                body.append(child)
        if state != "done":
            clauses.append((cond, body))
        for cond, body in clauses:
            if not cond:
                return self.block(body)
            with self.ignoring():
                status = self.block(cond)
            if self.known_status(
                status, " ".join(snippet(c) for c in cond if c.type not in (";", "\n")), node
            ):
                return self.block(body)
        self.st.status = 0
        return 0

    def case_statement(self, node: Any) -> int | None:
        subject_node = node.child_by_field_name("value")
        subject = self.value(subject_node)
        items = [c for c in node.children if c.type == "case_item"]
        self.st.status = 0
        k = 0
        falling = False
        status: int | None = 0
        while k < len(items):
            item = items[k]
            patterns = [c for c in item.children if field_of(item, c) == "value"]
            ends = (";;", ";&", ";;&")
            body = [
                c
                for c in item.children
                if field_of(item, c) != "value" and c.type not in (")", "|", "(", *ends)
            ]
            term = next((c.type for c in item.children if c.type in ends), ";;")
            hit = falling
            if not hit:
                for p in patterns:
                    rx = self.pattern(p)
                    if isinstance(subject, Unknown) or isinstance(rx, Unknown):
                        why = subject.reason if isinstance(subject, Unknown) else rx.reason  # type: ignore[union-attr]
                        hit = (
                            self.decide(
                                2,
                                [
                                    f"case matches {text(p)!r} ({why})",
                                    f"case does not match {text(p)!r} ({why})",
                                ],
                                node,
                            )
                            == 0
                        )
                    else:
                        hit = rx.fullmatch(subject) is not None
                    if hit:
                        break
            if hit:
                status = self.block(body) if body else 0
                if term == ";;":
                    return status
                falling = term == ";&"
            k += 1
        self.st.status = status
        return status

    def for_statement(self, node: Any) -> int | None:
        var = text(node.child_by_field_name("variable"))
        values = [c for c in node.children if field_of(node, c) == "value"]
        body = node.child_by_field_name("body")
        items: list[Value] = []
        if not any(c.type == "in" for c in node.children):
            pos = self.st.positional
            if isinstance(pos, Unknown):
                raise Unmodelled(f"for over the arguments: {pos.reason}", line_of(node))
            items = list(pos)
        for v in values:
            fs = self.fields(v)
            if isinstance(fs, Unknown):
                raise Unmodelled(f"for over words known only at run time: {fs.reason}", line_of(node))
            items += [join(f) for f in fs]
        status: int | None = 0
        for n, item in enumerate(items):
            if n >= MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            self.assign(var, item, node)
            try:
                status = self.block(_inner(body, "do", "done"))
            except _Loop as lp:
                if lp.n > 1:
                    raise _Loop(lp.kind, lp.n - 1) from None
                if lp.kind == "break":
                    break
        self.st.status = status
        return status

    def while_statement(self, node: Any) -> int | None:
        cond = [c for c in node.children if field_of(node, c) == "condition"]
        body = node.child_by_field_name("body")
        until = node.children[0].type == "until"
        status: int | None = 0
        for n in range(MAX_LOOP + 1):
            if n == MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            with self.ignoring():
                c = self.block(cond)
            ok = self.known_status(c, "loop condition", node)
            if ok == until:
                break
            try:
                status = self.block(_inner(body, "do", "done"))
            except _Loop as lp:
                if lp.n > 1:
                    raise _Loop(lp.kind, lp.n - 1) from None
                if lp.kind == "break":
                    break
        self.st.status = status
        return status

    # -- tests ------------------------------------------------------------------------------------------

    def test_command(self, node: Any) -> int | None:
        opener = node.children[0].type
        inner = [c for c in node.children if c.type not in ("[", "]", "[[", "]]")]
        if opener == "[":
            args: list[Value] = []
            for leaf in _leaves(inner):
                if leaf.type in (
                    "test_operator",
                    "==",
                    "=",
                    "!=",
                    "!",
                    "=~",
                    "<",
                    ">",
                    "&&",
                    "||",
                    "-a",
                    "-o",
                    "(",
                    ")",
                ):
                    args.append(text(leaf))
                    continue
                fs = self.fields(leaf)
                if isinstance(fs, Unknown):
                    return None
                args += [join(f) for f in fs]
            return _test_words(self, args, node)
        if len(inner) != 1:
            raise Unmodelled(f"[[ ]] form {snippet(node)}", line_of(node))
        r = self.cond_expr(inner[0])
        return None if r is None else int(not r)

    def cond_expr(self, node: Any) -> bool | None:
        t = node.type
        line = line_of(node)
        if t == "parenthesized_expression":
            kids = [c for c in node.children if c.type not in ("(", ")")]
            if len(kids) != 1:
                raise Unmodelled(f"[[ ]] group {snippet(node)}", line)
            return self.cond_expr(kids[0])
        if t == "unary_expression":
            op = text(node.children[0])
            operand = node.children[-1]
            if op == "!":
                r = self.cond_expr(operand)
                return None if r is None else not r
            return _unary(self, op, self.value(operand), node)
        if t == "binary_expression":
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            op = text(node.child_by_field_name("operator"))
            if op in ("&&", "||"):
                a = self.cond_expr(left)
                if a is None:
                    a = (
                        self.decide(2, [f"[[ {snippet(left)} ]] holds", f"[[ {snippet(left)} ]] fails"], node)
                        == 0
                    )
                if a == (op == "||"):
                    return a
                return self.cond_expr(right)
            lv = self.value(left)
            if op in ("==", "=", "!="):
                rx = self.pattern(right)
                if isinstance(lv, Unknown) or isinstance(rx, Unknown):
                    return None
                hit = rx.fullmatch(lv) is not None
                return hit if op != "!=" else not hit
            if op == "=~":
                raise Unmodelled("[[ =~ ]] (an extended regular expression)", line)
            if op in ("<", ">"):
                raise Unmodelled(f"[[ {op} ]] (the locale's collation order)", line)
            rv = self.value(right)
            if op in _INT_OPS:
                a_ = self.arith(lv, node) if isinstance(lv, str) else lv
                b_ = self.arith(rv, node) if isinstance(rv, str) else rv
                if isinstance(a_, Unknown) or isinstance(b_, Unknown):
                    return None
                return bool(_INT_OPS[op](int(a_), int(b_)))
            if op in ("-nt", "-ot", "-ef"):
                raise Unmodelled(f"file comparison {op}", line)
            raise Unmodelled(f"[[ ]] operator {op!r}", line)
        if t in (
            "word",
            "string",
            "raw_string",
            "concatenation",
            "simple_expansion",
            "expansion",
            "number",
            "command_substitution",
        ):
            v = self.value(node)
            return (
                None
                if isinstance(v, Unknown) and not v.nonempty
                else (True if isinstance(v, Unknown) else v != "")
            )
        raise Unmodelled(f"[[ ]] expression {snippet(node)}", line)

    # -- arithmetic -------------------------------------------------------------------------------------

    def arith_command(self, node: Any) -> int | None:
        inner = self.arith_text(node, 2, 2)
        if isinstance(inner, Unknown):
            return None
        v = self.arith(inner, node)
        if isinstance(v, Unknown):
            return None
        return 0 if int(v) != 0 else 1

    def arith(self, expr: str, node: Any) -> Value:
        return _Arith(self, expr, node).evaluate()

    # -- command substitution ---------------------------------------------------------------------------

    def command_output(self, node: Any) -> Value:
        """``$(...)``: the output of the few commands whose output is known statically (``dirname``,
        ``basename``, ``pwd``, ``cd``, ``echo``, ``printf '%s'``, ``uname``); anything else is Unknown. The
        substitution's exit status becomes ``$?`` (an assignment's status, for ``set -e``)."""
        body = [c for c in node.children if c.type not in ("$(", ")", "`")]
        saved = self.st
        self.st = saved.copy()
        outer_capture = self._capturing
        self._capturing = []
        try:
            with self.ignoring():
                status = self.block(body)
            out = join(self._capturing)
        except _Exit as ex:
            status, out = ex.status, join(self._capturing)
        except Unbound:  # bash reports it and the substitution's subshell exits
            status, out = 1, join(self._capturing)
        except _Launched:
            raise Unmodelled("the server starts inside a command substitution", line_of(node)) from None
        finally:
            self._capturing = outer_capture
            dirty = self.st.dirty
            self.st = saved
            if dirty is None:
                self.st.dirty = None
        self.st.status = status
        if status is None:
            return Unknown(f"$({snippet(node)[2:-1]}) runs at run time")
        return out.rstrip("\n") if isinstance(out, str) else out

    def emit(self, value: Value) -> None:
        if self._capturing is not None:
            self._capturing.append(value)

    def output_unknown(self, what: str) -> None:
        if self._capturing is not None:
            self._capturing.append(Unknown(f"the output of {what}"))

    @contextmanager
    def stdout_elsewhere(self) -> Iterator[None]:
        """Output that goes to a pipe or a file, not to an enclosing ``$(...)``."""
        saved, self._capturing = self._capturing, None
        try:
            yield
        finally:
            self._capturing = saved


_INT_OPS = {
    "-eq": lambda a, b: a == b,
    "-ne": lambda a, b: a != b,
    "-lt": lambda a, b: a < b,
    "-le": lambda a, b: a <= b,
    "-gt": lambda a, b: a > b,
    "-ge": lambda a, b: a >= b,
}


def _redirects_stdout(node: Any) -> bool:
    """``> f``, ``>> f``, ``&> f``, ``1> f``, ``>&2``: the command's output does not reach ``$(...)``."""
    if node.type == "heredoc_redirect":
        return any(_redirects_stdout(c) for c in node.children if c.type == "file_redirect")
    if node.type != "file_redirect":
        return False
    fd = node.child_by_field_name("descriptor")
    ops = [c.type for c in node.children]
    if fd is not None and text(fd) != "1":
        return False
    return any(o in (">", ">>", ">|", "&>", "&>>", ">&") for o in ops)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _leaves(nodes: list[Any]) -> Iterator[Any]:
    for n in nodes:
        if n.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            yield from _leaves(list(n.children))
        else:
            yield n


def _inner(node: Any, open_: str, close: str) -> list[Any]:
    return [c for c in node.children if c.type not in (open_, close)]


# -- test / [ -------------------------------------------------------------------------------------------


def _unary(ev: Evaluator, op: str, operand: Value, node: Any) -> bool | None:
    if op in ("-n", "-z"):
        if isinstance(operand, Unknown):
            return (op == "-n") if operand.nonempty else None
        return (operand != "") == (op == "-n")
    if op == "-v":
        if isinstance(operand, Unknown):
            return None
        return ev.scalar(operand) is not None or ev.elements(operand) is not None
    if op in ("-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h", "-w", "-a"):
        if isinstance(operand, Unknown):
            return None
        if operand == "" or ev.changed(operand):
            return None
        base = ev.st.cwd
        if isinstance(base, Unknown) and not operand.startswith("/"):
            return None
        path = Path(str(base)) / operand
        checks = {
            "-f": path.is_file,
            "-d": path.is_dir,
            "-e": path.exists,
            "-a": path.exists,
            "-x": lambda: os.access(path, os.X_OK),
            "-r": lambda: os.access(path, os.R_OK),
            "-w": lambda: os.access(path, os.W_OK),
            "-s": lambda: path.is_file() and path.stat().st_size > 0,
            "-L": path.is_symlink,
            "-h": path.is_symlink,
        }
        try:
            return bool(checks[op]())
        except OSError:
            return False
    raise Unmodelled(f"test operator {op}", line_of(node))


def _binary(ev: Evaluator, left: Value, op: str, right: Value, node: Any) -> bool | None:
    if op in ("=", "==", "!="):  # test and [ compare strings: no patterns
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        return (left == right) == (op != "!=")
    if op in _INT_OPS:
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        try:
            a, b = int(left.strip()), int(right.strip())
        except ValueError:
            raise Unmodelled(
                f"[ {left!r} {op} {right!r} ]: not integers (bash reports an error)", line_of(node)
            ) from None
        return bool(_INT_OPS[op](a, b))
    raise Unmodelled(f"test operator {op}", line_of(node))


_UNARY_OPS = {"-n", "-z", "-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h", "-w", "-v"}
_BINARY_OPS = {"=", "==", "!=", *_INT_OPS}


def _test_words(ev: Evaluator, args: list[Value], node: Any) -> int | None:
    """The ``test``/``[`` builtin on its words, by POSIX's rules for up to four arguments."""
    r = _test_posix(ev, args, node)
    return None if r is None else int(not r)


def _test_posix(ev: Evaluator, args: list[Value], node: Any) -> bool | None:
    n = len(args)
    if n == 0:
        return False
    if n == 1:
        a = args[0]
        return (a != "") if isinstance(a, str) else (True if a.nonempty else None)
    if n == 2:
        if args[0] == "!":
            r = _test_posix(ev, args[1:], node)
            return None if r is None else not r
        if isinstance(args[0], str) and args[0] in _UNARY_OPS:
            return _unary(ev, args[0], args[1], node)
        raise Unmodelled(f"test with {args!r}", line_of(node))
    if n == 3:
        if isinstance(args[1], str) and args[1] in _BINARY_OPS:
            return _binary(ev, args[0], args[1], args[2], node)
        if args[0] == "!":
            r = _test_posix(ev, args[1:], node)
            return None if r is None else not r
        raise Unmodelled(f"test with {args!r}", line_of(node))
    if n == 4 and args[0] == "!":
        r = _test_posix(ev, args[1:], node)
        return None if r is None else not r
    if n == 4:
        raise Unmodelled(f"test with {args!r}", line_of(node))
    return _TestParser(ev, args, node).parse()


class _TestParser:
    """``test`` with more than four arguments: bash's grammar (``-o`` below ``-a`` below ``!``, then
    parentheses, unary and binary primaries). Any operand unknown where it decides makes it None."""

    def __init__(self, ev: Evaluator, args: list[Value], node: Any) -> None:
        self.ev, self.args, self.node, self.k = ev, args, node, 0

    def parse(self) -> bool | None:
        r = self.orr()
        if self.k != len(self.args):
            raise Unmodelled(f"test with {self.args!r}", line_of(self.node))
        return r

    def orr(self) -> bool | None:
        a = self.andd()
        while self.k < len(self.args) and self.args[self.k] == "-o":
            self.k += 1
            b = self.andd()
            a = True if (a is True or b is True) else (None if a is None or b is None else False)
        return a

    def andd(self) -> bool | None:
        a = self.term()
        while self.k < len(self.args) and self.args[self.k] == "-a":
            self.k += 1
            b = self.term()
            a = False if (a is False or b is False) else (None if a is None or b is None else True)
        return a

    def term(self) -> bool | None:
        args, k = self.args, self.k
        if k >= len(args):
            raise Unmodelled("test: argument expected", line_of(self.node))
        if args[k] == "!":
            self.k += 1
            r = self.term()
            return None if r is None else not r
        if args[k] == "(":
            self.k += 1
            r = self.orr()
            if self.k >= len(args) or args[self.k] != ")":
                raise Unmodelled("test: ( without )", line_of(self.node))
            self.k += 1
            return r
        if k + 2 < len(args) + 0 and isinstance(args[k + 1], str) and args[k + 1] in _BINARY_OPS:
            self.k += 3
            return _binary(self.ev, args[k], str(args[k + 1]), args[k + 2], self.node)
        if isinstance(args[k], str) and args[k] in _UNARY_OPS and k + 1 < len(args):
            self.k += 2
            return _unary(self.ev, str(args[k]), args[k + 1], self.node)
        if isinstance(args[k], Unknown):
            raise Unmodelled(
                "test: an operand known only at run time where an operator may be", line_of(self.node)
            )
        self.k += 1
        return args[k] != ""


# -- arithmetic -----------------------------------------------------------------------------------------


class _Arith:
    """Integer arithmetic as ``$(( ))`` and ``(( ))`` do it, on known operands: + - * / % comparisons
    ``&&`` ``||`` ``!`` and parentheses; names are read as arithmetic recursively. Assignments and
    anything else are not modelled."""

    _TOKEN = re.compile(
        r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(\$\{?[A-Za-z_0-9@#?]+\}?)|(<=|>=|==|!=|&&|\|\||[-+*/%()<>!]))"
    )

    def __init__(self, ev: Evaluator, expr: str, node: Any, depth: int = 0) -> None:
        self.ev, self.node, self.depth = ev, node, depth
        self.toks: list[tuple[str, str]] = []
        pos = 0
        expr = expr.strip()
        if (
            "=" in re.sub(r"<=|>=|==|!=", "", expr)
            or "++" in expr
            or "--" in expr
            or "$(" in expr
            or "`" in expr
        ):
            raise Unmodelled(f"arithmetic {expr!r}", line_of(node))
        while pos < len(expr):
            m = self._TOKEN.match(expr, pos)
            if m is None or m.end() == pos:
                if expr[pos:].strip() == "":
                    break
                raise Unmodelled(f"arithmetic {expr!r}", line_of(node))
            num, name, dollar, op = m.groups()
            if num is not None:
                if len(num) > 1 and num.startswith("0") and not num.lower().startswith("0x"):
                    raise Unmodelled(f"octal arithmetic {num!r}", line_of(node))
                self.toks.append(("n", str(int(num, 0))))
            elif name is not None:
                self.toks.append(("v", name))
            elif dollar is not None:
                self.toks.append(("v", dollar.strip("${}")))
            else:
                self.toks.append(("o", op))
            pos = m.end()
        self.k = 0
        self.unknown: Unknown | None = None

    def evaluate(self) -> Value:
        if not self.toks:
            return "0"
        v = self.orr()
        if self.k != len(self.toks):
            raise Unmodelled("arithmetic syntax", line_of(self.node))
        return self.unknown if self.unknown is not None else str(v)

    def peek(self) -> str | None:
        return self.toks[self.k][1] if self.k < len(self.toks) and self.toks[self.k][0] == "o" else None

    def orr(self) -> int:
        v = self.andd()
        while self.peek() == "||":
            self.k += 1
            r = self.andd()
            v = int(bool(v) or bool(r))
        return v

    def andd(self) -> int:
        v = self.cmp()
        while self.peek() == "&&":
            self.k += 1
            r = self.cmp()
            v = int(bool(v) and bool(r))
        return v

    def cmp(self) -> int:
        v = self.add()
        while self.peek() in ("<", ">", "<=", ">=", "==", "!="):
            op = self.peek()
            self.k += 1
            r = self.add()
            v = int(
                {"<": v < r, ">": v > r, "<=": v <= r, ">=": v >= r, "==": v == r, "!=": v != r}[op or ""]
            )
        return v

    def add(self) -> int:
        v = self.mul()
        while self.peek() in ("+", "-"):
            op = self.peek()
            self.k += 1
            r = self.mul()
            v = _wrap(v + r if op == "+" else v - r)
        return v

    def mul(self) -> int:
        v = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.peek()
            self.k += 1
            r = self.unary()
            if op == "*":
                v = _wrap(v * r)
            elif r == 0:
                if self.unknown is None:
                    raise Unmodelled("division by zero", line_of(self.node))
                v = 0
            else:
                q = abs(v) // abs(r) * (1 if (v >= 0) == (r >= 0) else -1)
                v = q if op == "/" else v - q * r
        return v

    def unary(self) -> int:
        op = self.peek()
        if op in ("-", "+", "!"):
            self.k += 1
            v = self.unary()
            return -v if op == "-" else (v if op == "+" else int(not v))
        if op == "(":
            self.k += 1
            v = self.orr()
            if self.peek() != ")":
                raise Unmodelled("arithmetic parentheses", line_of(self.node))
            self.k += 1
            return v
        if self.k >= len(self.toks):
            raise Unmodelled("arithmetic syntax", line_of(self.node))
        kind, tok = self.toks[self.k]
        self.k += 1
        if kind == "n":
            return int(tok)
        if kind == "o":
            raise Unmodelled(f"arithmetic operator {tok!r}", line_of(self.node))
        value = self.ev.scalar(tok) if not tok.isdigit() else self.ev._lookup(tok, None, self.node)
        if value is None:
            if self.ev.nounset():
                raise Unbound(tok)
            return 0
        if isinstance(value, Unknown):
            self.unknown = self.unknown or value
            return 1
        if self.depth > 8:
            raise Unmodelled("arithmetic recursion", line_of(self.node))
        inner = _Arith(self.ev, value, self.node, self.depth + 1).evaluate()
        if isinstance(inner, Unknown):
            self.unknown = self.unknown or inner
            return 1
        return int(inner)


def _wrap(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


# -- builtins -------------------------------------------------------------------------------------------


def _words(ev: Evaluator, args: list[Field], node: Any, what: str) -> list[str]:
    out: list[str] = []
    for f in args:
        v = join(f)
        if isinstance(v, Unknown):
            raise Unmodelled(f"{what} with an argument known only at run time: {v.reason}", line_of(node))
        out.append(v)
    return out


def _b_true(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(0, node, ":")


def _b_false(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(1, node, "false")


def _b_echo(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    values = [join(f) for f in args]
    newline = True
    while values and isinstance(values[0], str) and re.fullmatch(r"-[neE]+", values[0]):
        if "e" in values[0]:
            ev.output_unknown("echo -e")
            return ev.errexit(0, node, "echo")
        newline = newline and "n" not in values[0]
        values = values[1:]
    parts: list[Value] = []
    for k, v in enumerate(values):
        if k:
            parts.append(" ")
        parts.append(v)
    ev.emit(join([*parts, "\n" if newline else ""]))
    return ev.errexit(0, node, "echo")


def _printf_format(fmt: str, values: list[Value], node: Any) -> Value:
    """``printf FORMAT ARGS``: ``%s``, ``%d`` on integers, ``%%``, ``\\n``/``\\t`` escapes; the format
    is reused while arguments remain, as bash does."""
    out: list[Value] = []
    k = 0
    first = True
    while first or k < len(values):
        first = False
        used = 0
        i = 0
        while i < len(fmt):
            c = fmt[i]
            if c == "\\" and i + 1 < len(fmt):
                esc = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r"}.get(fmt[i + 1])
                if esc is None:
                    raise Unmodelled(f"printf escape \\{fmt[i + 1]}", line_of(node))
                out.append(esc)
                i += 2
                continue
            if c == "%":
                spec = fmt[i + 1 : i + 2]
                if spec == "%":
                    out.append("%")
                elif spec in ("s", "d"):
                    v = values[k] if k < len(values) else ""
                    k += 1
                    used += 1
                    if spec == "d" and isinstance(v, str):
                        if not re.fullmatch(r"[-+]?[0-9]+", v.strip() or "0"):
                            raise Unmodelled(f"printf %d of {v!r}", line_of(node))
                        v = str(int(v.strip() or "0"))
                    out.append(v)
                else:
                    raise Unmodelled(f"printf conversion %{spec}", line_of(node))
                i += 2
                continue
            out.append(c)
            i += 1
        if used == 0:
            break
    return join(out)


def _b_printf(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    values = [join(f) for f in args]
    target: str | None = None
    if len(values) >= 2 and values[0] == "-v":
        name = values[1]
        if isinstance(name, Unknown):
            raise Unmodelled(f"printf -v into a name known only at run time: {name.reason}", line_of(node))
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\[.+\])?", name):
            return ev.errexit(2, node, "printf -v")
        target = name
        values = values[2:]
    if values and values[0] == "--":
        values = values[1:]
    if not values:
        return ev.errexit(2, node, "printf")
    fmt = values[0]
    if isinstance(fmt, Unknown):
        result: Value = Unknown(f"printf with a format known only at run time: {fmt.reason}")
    else:
        result = _printf_format(fmt, values[1:], node)
    if target is None:
        ev.emit(result)
        return ev.errexit(0, node, "printf")
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.+)\])?", target)
    assert m is not None
    if m.group(2) is not None:
        raise Unmodelled(f"printf -v into an array element {target!r}", line_of(node))
    ev.assign(m.group(1), result, node)
    return ev.errexit(0, node, "printf")


def _b_export(kind: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        raise Unmodelled(
            f"{kind} given as a command word (quoted, or reached through a variable)", line_of(node)
        )

    return run


def _b_set(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    k = 0
    letters = {
        "e": "errexit",
        "u": "nounset",
        "a": "allexport",
        "f": "noglob",
        "x": "xtrace",
        "v": "verbose",
        "h": "hashall",
        "B": "braceexpand",
    }
    names = {
        "errexit",
        "nounset",
        "allexport",
        "noglob",
        "xtrace",
        "verbose",
        "pipefail",
        "hashall",
        "braceexpand",
        "errtrace",
        "functrace",
        "noclobber",
    }
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            raise Unmodelled(f"set with an argument known only at run time: {w.reason}", line_of(node))
        if w in ("--", "-"):
            rest = words[k + 1 :]
            if w == "-" and not rest:
                break
            ev.st.positional = list(rest)
            return ev.errexit(0, node, "set")
        if w[:1] in "-+" and len(w) > 1:
            on = w[0] == "-"
            k += 1
            for letter in w[1:]:
                if letter == "o":
                    if k >= len(words):
                        raise Unmodelled("set -o with no option name (it lists them)", line_of(node))
                    opt = words[k]
                    k += 1
                    if not isinstance(opt, str) or opt not in names or opt in ("errtrace", "functrace"):
                        raise Unmodelled(f"set -o {opt!r}", line_of(node))
                    (ev.st.opts.add if on else ev.st.opts.discard)(opt)
                    continue
                if letter not in letters:
                    raise Unmodelled(f"set {w[0]}{letter}", line_of(node))
                (ev.st.opts.add if on else ev.st.opts.discard)(letters[letter])
            continue
        ev.st.positional = [x for x in words[k:]]
        return ev.errexit(0, node, "set")
    return ev.errexit(0, node, "set")


def _b_shift(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = _words(ev, args, node, "shift")
    n = int(words[0]) if words and words[0].isdigit() else (1 if not words else -1)
    if n < 0:
        raise Unmodelled(f"shift {words!r}", line_of(node))
    pos = ev.st.positional
    if isinstance(pos, Unknown):
        raise Unmodelled(f"shift: {pos.reason}", line_of(node))
    if n > len(pos):
        return ev.errexit(1, node, "shift")
    ev.st.positional = pos[n:]
    return ev.errexit(0, node, "shift")


def _b_cd(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    while words and isinstance(words[0], str) and words[0] in ("-L", "--"):
        words = words[1:]
    if words and isinstance(words[0], str) and words[0].startswith("-") and words[0] != "-":
        raise Unmodelled(f"cd {words[0]}", line_of(node))
    if len(words) > 1:
        return ev.errexit(1, node, "cd")  # bash: too many arguments
    if not words:
        target: Value | None = ev.scalar("HOME")
        if target is None:
            return ev.errexit(1, node, "cd")
    else:
        target = words[0]
    if isinstance(target, Unknown):
        ev.st.cwd = Unknown(f"the directory is computed at run time ({target.reason})")
        return ev.errexit(None, node, "cd")
    if target in ("", "-"):
        raise Unmodelled(f"cd {target!r}", line_of(node))
    cdpath = ev.scalar("CDPATH")
    if cdpath and not target.startswith(("/", "./", "../")) and target not in (".", ".."):
        raise Unmodelled("cd with CDPATH set", line_of(node))
    if isinstance(ev.st.cwd, Unknown) and not target.startswith("/"):
        return ev.errexit(None, node, "cd")
    new = os.path.normpath(os.path.join(str(ev.st.cwd), target))
    if new.startswith("//"):
        new = "/" + new.lstrip("/")
    if ev.changed(new):
        ev.st.cwd = Unknown(f"cd {target}: a directory the script may have created")
        return ev.errexit(None, node, "cd")
    if not os.path.isdir(new) or not os.access(new, os.X_OK):
        return ev.errexit(1, node, f"cd {target}")
    old = ev.st.cwd
    ev.st.cwd = new
    var = ev.st.vars.get("OLDPWD")  # bash sets and exports OLDPWD at each cd
    if var is None:
        ev.st.vars["OLDPWD"] = Var(value=old, exported=True, origin="bash")
    else:
        var.value = old
    return ev.errexit(0, node, "cd")


def _b_pwd(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = _words(ev, args, node, "pwd")
    if words and words != ["-L"]:
        raise Unmodelled(f"pwd {' '.join(words)}", line_of(node))
    ev.emit(join([ev.st.cwd, "\n"]))
    return ev.errexit(0, node, "pwd")


def _b_source(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        return ev.errexit(2, node, "source")
    target = words[0]
    if isinstance(target, Unknown):
        raise Unmodelled(f"the sourced file is computed at run time: {target.reason}", line_of(node))
    path = _find_source(ev, target, node)
    if path is None:
        ev.notes.append(
            f"{ev.file}:{line_of(node)}: source {target}: no such file here; bash goes on (the values it "
            "would set are unknown)"
        )
        ev.missing_source.append(f"{target} (line {line_of(node)})")
        return ev.errexit(1, node, f"source {target}")
    data = read_bounded(Path(path), MAX_SCRIPT_BYTES, "sourced file")
    tree = parse(data, path)
    ev.depth += 1
    if ev.depth > MAX_DEPTH:
        raise Unmodelled(f"sourced files nested deeper than {MAX_DEPTH}", line_of(node))
    saved_file, saved_pos = ev.file, ev.st.positional
    if len(words) > 1:
        ev.st.positional = words[1:]
    ev.file = path
    ev.st.sources.append(target)
    try:
        status = ev.block(list(tree.root_node.children))
    except _Return as r:
        status = r.status
    except Unmodelled as um:
        um.where = um.where or path
        raise
    finally:
        ev.file = saved_file
        ev.st.sources.pop()
        if len(words) > 1:
            ev.st.positional = saved_pos
        ev.depth -= 1
    ev.st.status = status
    return status


def _find_source(ev: Evaluator, target: str, node: Any) -> str | None:
    """The file ``source NAME`` reads: with a slash, relative to the directory; without, the first
    readable file on ``$PATH``, then the directory (bash outside POSIX mode)."""
    candidates: list[str] = []
    cwd = ev.st.cwd
    if "/" not in target:
        path = ev.scalar("PATH")
        if isinstance(path, Unknown):
            raise Unmodelled(f"source {target}: searched on a PATH known only at run time", line_of(node))
        for d in (path or "").split(":"):
            if not d.startswith("/"):
                if isinstance(cwd, Unknown):
                    raise Unmodelled(f"source {target}: a relative PATH entry", line_of(node))
                d = os.path.join(cwd, d or ".")
            candidates.append(os.path.join(d, target))
    if isinstance(cwd, Unknown) and not target.startswith("/"):
        raise Unmodelled(f"source {target}: {cwd.reason}", line_of(node))
    candidates.append(os.path.normpath(os.path.join(str(cwd), target)))
    for c in candidates:
        if ev.changed(c):
            raise Unmodelled(f"source {target}: {c} may have been written by the script", line_of(node))
        if os.path.isfile(c) and os.access(c, os.R_OK):
            return c
    return None


def _b_exit(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise _Exit(status, line_of(node), f"exit {status if status is not None else '?'}")


def _b_return(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    if not ev.in_function and ev.depth == 0:
        return ev.errexit(1, node, "return")
    words = [join(f) for f in args]
    status: int | None = ev.st.status
    if words:
        w = words[0]
        status = int(w) & 255 if isinstance(w, str) and w.isdigit() else None
    raise _Return(status)


def _b_eval(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    joined = join([p for k, w in enumerate(words) for p in ((" ", w) if k else (w,))])
    if isinstance(joined, Unknown):
        raise Unmodelled(f"eval of text known only at run time: {joined.reason}", line_of(node))
    if not joined.strip():
        return ev.errexit(0, node, "eval")
    tree = parse(joined.encode(), f"{ev.file}:{line_of(node)} (eval)")
    return ev.block(list(tree.root_node.children))


def _b_read(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    for f in args:
        w = join(f)
        if isinstance(w, str) and _NAME.fullmatch(w):
            ev.assign(w, Unknown(f"{w} is read from input at run time (line {line_of(node)})"), node)
        elif isinstance(w, str) and w.startswith("-"):
            if any(c in w for c in "apdnNtu"):
                raise Unmodelled(f"read {w}", line_of(node))
        else:
            raise Unmodelled("read", line_of(node))
    if not args:
        ev.assign("REPLY", Unknown("REPLY is read from input at run time"), node)
    ev.st.status = None
    return None if "errexit" not in ev.st.opts or ev.ignore_errexit else ev.errexit(None, node, "read")


def _b_unmodelled(what: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        raise Unmodelled(what, line_of(node))

    return run


def _b_trap(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    sigs = words[1:]
    if any(isinstance(s, Unknown) for s in sigs) or not sigs:
        if not words or words in (["-l"], ["-p"]):
            return ev.errexit(0, node, "trap")
        raise Unmodelled("trap on signals known only at run time", line_of(node))
    for s in sigs:
        assert isinstance(s, str)
        name = s.upper().removeprefix("SIG")
        if name in ("DEBUG", "RETURN", "ERR"):
            raise Unmodelled(f"trap on {name}: it runs code around every command", line_of(node))
        if name in ("EXIT", "0"):
            ev.st.traps["EXIT"] = "set"
    return ev.errexit(0, node, "trap")


def _b_shopt(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if (words and words[0] in ("-q", "-p")) or not words:
        return ev.errexit(None, node, "shopt")
    raise Unmodelled(f"shopt {' '.join(str(w) for w in words)}", line_of(node))


def _b_hash(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if words and words != ["-r"]:
        raise Unmodelled(f"hash {' '.join(str(w) for w in words)}", line_of(node))
    return ev.errexit(0, node, "hash")


def _b_alias(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    # a script's aliases are not expanded (bash expands them only with `shopt -s expand_aliases`)
    return ev.errexit(0, node, "alias")


def _b_exec(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = list(args)
    if words and join(words[0]) == "--":
        words = words[1:]
    first = join(words[0]) if words else ""
    if isinstance(first, Unknown) or first.startswith("-"):
        raise Unmodelled(
            f"exec {first if isinstance(first, str) else '...'}: an option of exec", line_of(node)
        )
    if not words:
        return ev.errexit(0, node, "exec")
    return ev.invoke(words, prefix, node, execs=True, skip_functions=True)


def _b_command(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = list(args)
    if words and join(words[0]) == "-v" and len(words) == 2:
        return _command_v(ev, join(words[1]), node)
    if words and isinstance(join(words[0]), str) and str(join(words[0])).startswith("-"):
        raise Unmodelled(f"command {join(words[0])}", line_of(node))
    if not words:
        return ev.errexit(0, node, "command")
    return ev.invoke(words, prefix, node, skip_functions=True)


def _command_v(ev: Evaluator, name: Value, node: Any) -> int | None:
    """``command -v NAME``: a function's or builtin's name, else the file found on PATH (status 1 when
    there is none)."""
    if isinstance(name, Unknown):
        ev.output_unknown("command -v")
        return ev.errexit(None, node, "command -v")
    if name in ev.st.funcs or name in _BUILTINS or name in _RESERVED:
        ev.emit(name + "\n")
        return ev.errexit(0, node, "command -v")
    found = which(name, ev.scalar("PATH") or Unknown("PATH is unset"), ev.st.cwd)
    if isinstance(found, str) and not ev.changed(found):
        ev.emit(found + "\n")
        return ev.errexit(0, node, "command -v")
    path = ev.scalar("PATH")
    if isinstance(found, Unknown) and isinstance(path, str) and not isinstance(ev.st.cwd, Unknown):
        dirs = [os.path.join(str(ev.st.cwd), d or ".") for d in path.split(":")]
        if ev.st.dirty is not None and not any(ev.changed(d) for d in dirs) and "/" not in name:
            return ev.errexit(1, node, "command -v")
    ev.output_unknown("command -v")
    return ev.errexit(None, node, "command -v")


def _b_builtin(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    if not args:
        return ev.errexit(0, node, "builtin")
    head = join(args[0])
    if isinstance(head, str) and head in ("exec", "command", "builtin"):
        return _BUILTINS[head](ev, args[1:], prefix, node)
    return ev.invoke(list(args), prefix, node, skip_functions=True, only_builtins=True)


def _b_test(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    return ev.errexit(_test_words(ev, words, node), node, "test")


def _b_bracket(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    words = [join(f) for f in args]
    if not words or words[-1] != "]":
        return ev.errexit(2, node, "[")
    return ev.errexit(_test_words(ev, words[:-1], node), node, "[")


def _b_let(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    raise Unmodelled("let", line_of(node))


def _b_loop(kind: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        words = _words(ev, args, node, kind)
        raise _Loop(kind, int(words[0]) if words and words[0].isdigit() else 1)

    return run


def _b_uname(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
    return ev.errexit(None, node, "uname")


def _b_noop(what: str) -> Builtin:
    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        return ev.errexit(0, node, what)

    return run


Builtin = Callable[["Evaluator", list[Field], Any, Any], "int | None"]
_BUILTINS: dict[str, Builtin] = {
    ":": _b_true,
    "true": _b_true,
    "false": _b_false,
    "echo": _b_echo,
    "printf": _b_printf,
    "export": _b_export("export"),
    "declare": _b_export("declare"),
    "typeset": _b_export("typeset"),
    "local": _b_export("local"),
    "readonly": _b_export("readonly"),
    "unset": _b_export("unset"),
    "set": _b_set,
    "shift": _b_shift,
    "cd": _b_cd,
    "pwd": _b_pwd,
    "source": _b_source,
    ".": _b_source,
    "exit": _b_exit,
    "return": _b_return,
    "eval": _b_eval,
    "read": _b_read,
    "mapfile": _b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "readarray": _b_unmodelled("mapfile/readarray: the array is read from input at run time"),
    "trap": _b_trap,
    "shopt": _b_shopt,
    "enable": _b_unmodelled("enable (switches builtins on or off)"),
    "hash": _b_hash,
    "alias": _b_alias,
    "unalias": _b_alias,
    "exec": _b_exec,
    "command": _b_command,
    "builtin": _b_builtin,
    "test": _b_test,
    "[": _b_bracket,
    "let": _b_let,
    "break": _b_loop("break"),
    "continue": _b_loop("continue"),
    "getopts": _b_unmodelled("getopts"),
    "pushd": _b_unmodelled("pushd"),
    "popd": _b_unmodelled("popd"),
    "wait": _b_noop("wait"),
    "umask": _b_noop("umask"),
    "ulimit": _b_unmodelled("ulimit"),
    "type": _b_unmodelled("type"),
    "caller": _b_unmodelled("caller"),
    "compgen": _b_unmodelled("compgen"),
    "complete": _b_noop("complete"),
    "times": _b_noop("times"),
    "disown": _b_noop("disown"),
    "jobs": _b_noop("jobs"),
    "kill": _b_unmodelled("kill"),
    "fc": _b_unmodelled("fc"),
    "history": _b_noop("history"),
    "suspend": _b_unmodelled("suspend"),
    "logout": _b_unmodelled("logout"),
    "bind": _b_noop("bind"),
    "help": _b_noop("help"),
    "dirs": _b_noop("dirs"),
    "fg": _b_unmodelled("fg"),
    "bg": _b_unmodelled("bg"),
}


def _pure(name: str) -> Builtin:
    """Programs whose output the reader computes (``dirname``, ``basename``, ``uname``); their
    arguments must be known."""

    def run(ev: Evaluator, args: list[Field], prefix: Any, node: Any) -> int | None:
        words = [join(f) for f in args]
        if any(isinstance(w, Unknown) for w in words):
            ev.output_unknown(name)
            return ev.errexit(None, node, name)
        sw = [str(w) for w in words]
        if name == "dirname" and len(sw) == 1 and not sw[0].startswith("-"):
            ev.emit(_dirname(sw[0]) + "\n")
            return ev.errexit(0, node, name)
        if name == "basename" and len(sw) == 1 and not sw[0].startswith("-"):
            b = sw[0].rstrip("/")
            ev.emit((os.path.basename(b) if b else ("/" if sw[0] else "")) + "\n")
            return ev.errexit(0, node, name)
        if name == "uname" and (not sw or sw == ["-s"]):
            ev.emit(os.uname().sysname + "\n")
            return ev.errexit(0, node, name)
        ev.output_unknown(name)
        return ev.errexit(None, node, name)

    return run


def _dirname(p: str) -> str:
    """coreutils ``dirname``."""
    if not p:
        return "."
    s = p.rstrip("/")
    if not s:
        return "/"
    if "/" not in s:
        return "."
    d = s[: s.rfind("/")].rstrip("/")
    return d or "/"


_PROGRAMS: dict[str, Builtin] = {
    "dirname": _pure("dirname"),
    "basename": _pure("basename"),
    "uname": _pure("uname"),
}


def read_script(path: Path | str, *, env: Mapping[str, str], args: list[str] | None = None) -> Reading:
    """Every path through the script at ``path`` started with environment ``env`` and arguments ``args``.

    Raises InputError for a file that is not a script (unreadable, oversized, a syntax error)."""
    script = Path(path).absolute()
    data = read_bounded(script, MAX_SCRIPT_BYTES, "launcher script")
    tree = parse(data, str(script))
    endings: list[Ending] = []
    notes: list[str] = []
    stack: list[list[int]] = [[]]
    while stack:
        prefix = stack.pop()
        if len(endings) >= MAX_PATHS:
            endings.append(
                Ending("unresolved", 1, str(script), f"more than {MAX_PATHS} paths through the script")
            )
            break
        ev = Evaluator(script, prefix)
        ending = ev.run(tree, env, list(args or []))
        if ending.launch is not None and ev.missing_source:
            ending.reason = "; ".join(ev.missing_source)
        ending.survived = ev.survived
        endings.append(ending)
        for note in ev.notes:
            if note not in notes:
                notes.append(note)
        for k in range(len(ev.choices) - 1, len(prefix) - 1, -1):
            for alt in range(ev.choices[k] - 1, 0, -1):
                stack.append([*prefix, *([0] * (k - len(prefix))), alt])
    return Reading(script, endings, notes)


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


__all__ = ["Ending", "Launch", "Reading", "Unknown", "is_server_command", "read_script", "shutil", "which"]
