"""``--script FILE``: a launcher script (``start.sh``) read statically, never run -> ``LaunchFacts``.

Why: on DGX Spark most operators start SGLang from a script: ``source .venv/bin/activate``, a few
``export``s or a sourced ``.env``, profiles chosen by ``${PROFILE:-mtp}``, then ``exec python3 -m
sglang.launch_server ...``. Preflight must see the command and environment that script would hand to the
server, with the shell's own rules (see ``validator.sources.shell`` for the parser and word expansion):
only *exported* variables reach the server, ``VAR=x cmd`` and ``env VAR=x cmd`` set them for that command,
``set -a`` exports what follows, and a sourced file is more of the same script: ``source .venv/bin/activate``
is evaluated like any other (it puts the ``bin`` it was created for first on ``PATH``, so ``python3`` is that
venv's interpreter, also for a venv that was moved since).

The walk follows the statements in order from the script's directory (``cd`` moves it; ``$0`` is the
script), decides ``if``/``case``/``&&``/``||`` where the condition is known (string and file tests), and
for a condition known only at run time takes every branch and keeps what they agree on. What it cannot
know (``$1``, ``$(nvidia-smi ...)``, a variable set differently by such branches) is reported, not guessed:
an unknown flag value or variable is listed in ``LaunchFacts.unresolved`` and the checks that read it
become ``error``; an unknown program, an unknown bare word in the argument list, or a server command inside
an undecidable branch makes the whole launch ``error`` (``UnresolvedLaunch``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from validator.errors import InputError, UnresolvedLaunch
from validator.facts import LaunchFacts
from validator.sources.files import read_bounded
from validator.sources.shell import (
    MAX_SCRIPT_BYTES,
    Field,
    Unknown,
    Value,
    WordExpander,
    join,
    line_of,
    parse,
)

if TYPE_CHECKING:
    from validator.sources.docker_run import ContainerSpec

MAX_DEPTH = 16  # nested source/function calls
MAX_STEPS = 100_000  # statements evaluated; a launcher script needs a few hundred


@dataclass
class _State:
    vars: dict[str, Value]
    exported: set[str]
    origin: dict[str, str]
    cwd: Value
    functions: dict[str, Any] = field(default_factory=dict)
    allexport: bool = False

    def copy(self) -> _State:
        return _State(
            dict(self.vars),
            set(self.exported),
            dict(self.origin),
            self.cwd,
            dict(self.functions),
            self.allexport,
        )


@dataclass
class ServerCommand:
    """A command in the script that starts the server, with what the shell would give it."""

    fields: list[Field]
    env: dict[str, Value]
    origin: dict[str, str]
    cwd: Value
    line: int
    uncertain: str | None = None  # why it may or may not run (a branch decided at run time)
    execs: bool = False


class _Stop(Exception):
    """``exit``, ``exec`` or ``return``: the rest of the script (or function) does not run."""


def is_server_command(words: list[Value]) -> bool:
    """The command starts the server: SGLang's entry points, spark-validate launch, or a container run."""
    from validator.sources.docker_run import is_container_run

    known = [w for w in words if isinstance(w, str)]
    if is_container_run(known):
        return True
    names = [Path(w).name for w in known]
    for i, name in enumerate(names):
        if known[i] in ("sglang.launch_server", "-msglang.launch_server"):
            return True
        if name == "sglang" and i + 1 < len(known) and known[i + 1] == "serve":
            return True
        if name == "spark-validate" and i + 1 < len(known) and known[i + 1] == "launch":
            return True
    return False


class _Evaluator:
    def __init__(self, script: Path) -> None:
        self.script = script
        self.found: list[ServerCommand] = []
        self.notes: list[str] = []
        self.steps = 0
        self.depth = 0
        self.uncertain: list[str] = []
        self.zero = str(script)  # $0: a sourced file sees the sourcing script's
        self.in_condition = 0  # inside an if/elif condition, a program's exit status decides: unknown

    def where(self, node: Any) -> str:
        return f"{self.script}:{line_of(node)}"

    # -- expansion ------------------------------------------------------------------------------------

    def expander(self, st: _State) -> WordExpander:
        def lookup(name: str) -> Value | None:
            if name == "0":
                return self.zero
            if name == "PWD":
                return st.cwd
            return st.vars.get(name)

        def env() -> Mapping[str, str]:
            return {k: v for k, v in st.vars.items() if isinstance(v, str)}

        return WordExpander(lookup, env, lambda node: self.substitute(node, st))

    def substitute(self, node: Any, st: _State) -> Value:
        """``$(...)``: only the few commands whose output is known statically (``dirname``, ``pwd``, ...)."""
        body = [c for c in node.children if c.type not in ("$(", ")", "`")]
        sub = st.copy()
        out: list[Value] = []
        for stmt in body:
            value = self.capture(stmt, sub)
            if isinstance(value, Unknown):
                return value
            out.append(value)
        result = join(out)
        return result.rstrip("\n") if isinstance(result, str) else result

    def capture(self, node: Any, st: _State) -> Value:
        if node.type == "list":
            left, op, right = node.children[0], node.children[1].type, node.children[2]
            first = self.capture(left, st)
            if isinstance(first, Unknown) or op != "&&":
                return first if op == "&&" else Unknown(f"$({_snippet(node)}) runs at run time")
            second = self.capture(right, st)
            return join([first, second])
        if node.type != "command":
            return Unknown(f"$({_snippet(node)}) runs at run time")
        words = self.words(node, st)
        if not words or not isinstance(words[0], str):
            return Unknown(f"$({_snippet(node)}) runs at run time")
        name, args = words[0], words[1:]
        if any(isinstance(a, Unknown) for a in args):
            return next(a for a in args if isinstance(a, Unknown))
        sargs = [a for a in args if isinstance(a, str)]
        if name == "cd":
            self._cd(sargs, st)
            return ""
        if name == "pwd":
            return st.cwd if isinstance(st.cwd, Unknown) else st.cwd + "\n"
        if name == "dirname" and len(sargs) == 1:
            return (os.path.dirname(sargs[0].rstrip("/")) or ".") + "\n"
        if name == "basename" and sargs:
            return os.path.basename(sargs[0].rstrip("/")) + "\n"
        if (
            name in ("realpath", "readlink")
            and sargs
            and (name == "realpath" or sargs[0] in ("-f", "-e", "-m"))
        ):
            target = sargs[-1]
            base = st.cwd
            if isinstance(base, Unknown):
                return base
            return os.path.realpath(os.path.join(base, target)) + "\n"
        if name == "echo":
            return " ".join(a for a in sargs if a not in ("-n", "-e")) + "\n"
        return Unknown(f"$({_snippet(node)}) runs {name!r} at run time")

    def words(self, node: Any, st: _State) -> list[Value]:
        """A command's fields, each collapsed to one value (for builtins and detection)."""
        return [join(f) for f in self.fields(node, st)]

    def fields(self, node: Any, st: _State) -> list[Field]:
        ex = self.expander(st)
        out: list[Field] = []
        for child in node.children:
            if child.type == "command_name":
                out += ex.fields(child.children[0])
            elif node.field_name_for_child(_index(node, child)) == "argument":
                out += ex.fields(child)
        return out

    # -- statements -----------------------------------------------------------------------------------

    def block(self, nodes: list[Any], st: _State) -> bool | None:
        status: bool | None = True
        for node in nodes:
            status = self.stmt(node, st)
        return status

    def stmt(self, node: Any, st: _State) -> bool | None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise InputError(
                str(self.script), f"more than {MAX_STEPS} statements evaluated: not a launcher script"
            )
        t = node.type
        if t in ("comment", ";", "&", "heredoc_body", "\n"):
            return True
        if t == "variable_assignment":
            self.assign(node, st, export=st.allexport)
            return True
        if t == "variable_assignments":
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assign(child, st, export=st.allexport)
            return True
        if t == "declaration_command":
            return self.declaration(node, st)
        if t == "unset_command":
            for child in node.children[1:]:
                name = bytes(child.text).decode()
                if not name.startswith("-"):
                    st.vars.pop(name, None)
                    st.exported.discard(name)
            return True
        if t == "command":
            return self.command(node, st)
        if t == "redirected_statement":
            body = node.child_by_field_name("body")
            return self.stmt(body, st) if body is not None else True
        if t == "list":
            return self.and_or(node, st)
        if t == "pipeline":
            status: bool | None = True
            for child in node.children:
                if child.type not in ("|", "|&"):
                    status = self.stmt(child, st.copy())
            return status
        if t == "negated_command":
            status = self.stmt(node.children[-1], st)
            return None if status is None else not status
        if t == "subshell":
            try:
                return self.block(_body(node, "(", ")"), st.copy())
            except _Stop:
                return True
        if t == "compound_statement":
            return self.block(_body(node, "{", "}"), st)
        if t == "function_definition":
            name = node.child_by_field_name("name")
            st.functions[bytes(name.text).decode()] = node.child_by_field_name("body")
            return True
        if t == "test_command":
            return self.test_node(node, st)
        if t == "if_statement":
            return self.if_statement(node, st)
        if t == "case_statement":
            return self.case_statement(node, st)
        if t in ("for_statement", "c_style_for_statement", "while_statement"):
            return self.loop(node, st)
        self.notes.append(f"line {line_of(node)}: {t.replace('_', ' ')} not evaluated")
        return None

    def assign(self, node: Any, st: _State, *, export: bool) -> str:
        name = bytes(node.child_by_field_name("name").text).decode()
        value_node = node.child_by_field_name("value")
        op = next((c.type for c in node.children if c.type in ("=", "+=")), "=")
        value: Value = "" if value_node is None else self.expander(st).value(value_node, assignment=True)
        if op == "+=":
            value = join([st.vars.get(name, ""), value])
        st.vars[name] = value
        st.origin[name] = f"script:{self.script}:{line_of(node)}"
        if export:
            st.exported.add(name)
        return name

    def declaration(self, node: Any, st: _State) -> bool:
        keyword = node.children[0].type
        export = keyword == "export" or st.allexport
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                self.assign(child, st, export=export)
            elif child.type in ("word", "variable_name"):
                text = bytes(child.text).decode()
                if text == "-x":
                    export = True
                elif not text.startswith("-") and export:
                    st.exported.add(text)
                    st.vars.setdefault(text, "")
        return True

    def and_or(self, node: Any, st: _State) -> bool | None:
        kids = node.children
        left, op, right = kids[0], kids[1].type, kids[2]
        status = self.stmt(left, st)
        run_right = status is False if op == "||" else status is True
        if status is None:
            return self.uncertain_branches(st, [[right], []], f"line {line_of(node)}: {_snippet(left)}")
        if run_right:
            return self.stmt(right, st)
        return status

    def if_statement(self, node: Any, st: _State) -> bool | None:
        clauses: list[tuple[list[Any], list[Any]]] = []  # (condition, body); else has no condition
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
                clauses.append((cond, body))
                cond, body, state = [], [], "cond"
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
                state = "done"
            elif state == "cond":
                cond.append(child)
            elif state == "body":
                body.append(child)
        if state != "done":
            clauses.append((cond, body))
        return self.choose(node, st, clauses)

    def choose(self, node: Any, st: _State, clauses: list[tuple[list[Any], list[Any]]]) -> bool | None:
        """Run the first clause whose condition holds; from an undecidable condition on, take all."""
        for k, (cond, body) in enumerate(clauses):
            if not cond:
                return self.block(body, st)
            self.in_condition += 1
            try:
                status = self.block([c for c in cond if c.type not in (";", "\n")], st)
            finally:
                self.in_condition -= 1
            if status is True:
                return self.block(body, st)
            if status is None:
                rest = [b for _, b in clauses[k + 1 :]]
                if clauses[-1][0]:  # no else: falling through runs nothing
                    rest.append([])
                why = f"line {line_of(node)}: {_snippet_nodes(cond)}"
                return self.uncertain_branches(st, [body, *rest], why)
        return True

    def case_statement(self, node: Any, st: _State) -> bool | None:
        subject_node = node.child_by_field_name("value")
        subject = self.expander(st).value(subject_node) if subject_node is not None else ""
        items = [c for c in node.children if c.type == "case_item"]
        bodies: list[list[Any]] = []
        for item in items:
            patterns: list[Value] = []
            body: list[Any] = []
            seen_paren = False
            for c in item.children:
                if c.type == ")":
                    seen_paren = True
                elif c.type in (";;", ";&", ";;&", "|"):
                    continue
                elif not seen_paren:
                    patterns.append(bytes(c.text).decode().strip("'\""))
                else:
                    body.append(c)
            if isinstance(subject, Unknown):
                bodies.append(body)
                continue
            if any(isinstance(p, str) and fnmatch.fnmatchcase(subject, p) for p in patterns):
                return self.block(body, st)
        if isinstance(subject, Unknown):
            return self.uncertain_branches(st, [*bodies, []], f"line {line_of(node)}: case {subject.reason}")
        return True

    def loop(self, node: Any, st: _State) -> bool | None:
        """Loops are not unrolled: their body is read for server commands, what they assign is unknown."""
        body = node.child_by_field_name("body")
        scratch = st.copy()
        why = f"line {line_of(node)}: inside a {node.type.split('_')[0]} loop"
        self.uncertain.append(why)
        try:
            if body is not None:
                self.block(_body(body, "do", "done"), scratch)
        except _Stop:
            pass
        finally:
            self.uncertain.pop()
        for name, value in scratch.vars.items():
            if st.vars.get(name) != value:
                st.vars[name] = Unknown(f"{name} is assigned {why}")
                st.origin[name] = f"script:{self.script}:{line_of(node)}"
        return None

    def uncertain_branches(self, st: _State, branches: list[list[Any]], why: str) -> bool | None:
        """Each branch from a copy of the state; afterwards keep what every branch that went on agrees on."""
        results: list[_State] = []
        self.uncertain.append(why)
        try:
            for branch in branches:
                sub = st.copy()
                try:
                    self.block(branch, sub)
                except _Stop:
                    continue
                results.append(sub)
        finally:
            self.uncertain.pop()
        if not results:
            raise _Stop
        merged = results[0]
        for other in results[1:]:
            for name in set(merged.vars) | set(other.vars):
                a, b = merged.vars.get(name), other.vars.get(name)
                if a != b:
                    merged.vars[name] = Unknown(f"{name} depends on a condition decided at run time ({why})")
                    merged.origin[name] = f"script:{self.script}"
            merged.exported |= other.exported
            if merged.cwd != other.cwd:
                merged.cwd = Unknown(f"the directory depends on a condition decided at run time ({why})")
            merged.functions.update(other.functions)
        st.vars, st.exported, st.origin, st.cwd = merged.vars, merged.exported, merged.origin, merged.cwd
        st.functions, st.allexport = merged.functions, merged.allexport
        return None

    # -- conditions -----------------------------------------------------------------------------------

    def test_node(self, node: Any, st: _State) -> bool | None:
        inner = [c for c in node.children if c.type not in ("[", "]", "[[", "]]")]
        if len(inner) != 1:
            return None
        return self.test_expr(inner[0], st)

    def test_expr(self, node: Any, st: _State) -> bool | None:
        ex = self.expander(st)
        t = node.type
        if t == "parenthesized_expression":
            inner = [c for c in node.children if c.type not in ("(", ")")]
            return self.test_expr(inner[0], st) if len(inner) == 1 else None
        if t == "unary_expression":
            op = bytes(node.children[0].text).decode()
            operand = node.children[-1]
            if op == "!":
                r = self.test_expr(operand, st)
                return None if r is None else not r
            return self.unary(op, ex.value(operand), st)
        if t == "binary_expression":
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            op = bytes(node.child_by_field_name("operator").text).decode()
            if op in ("&&", "||", "-a", "-o"):
                a = self.test_expr(left, st)
                if op in ("&&", "-a"):
                    if a is False:
                        return False
                    b = self.test_expr(right, st)
                    return False if b is False else (None if a is None or b is None else True)
                if a is True:
                    return True
                b = self.test_expr(right, st)
                return True if b is True else (None if a is None or b is None else False)
            return self.binary(ex.value(left), op, ex.value(right))
        return self.unary("-n", ex.value(node), st)

    def test_words(self, args: list[Value], st: _State) -> bool | None:
        if args and args[0] == "!":
            r = self.test_words(args[1:], st)
            return None if r is None else not r
        if len(args) == 1:
            return self.unary("-n", args[0], st)
        if len(args) == 2 and isinstance(args[0], str):
            return self.unary(args[0], args[1], st)
        if len(args) == 3 and isinstance(args[1], str):
            return self.binary(args[0], args[1], args[2])
        return None

    def unary(self, op: str, operand: Value, st: _State) -> bool | None:
        if isinstance(operand, Unknown):
            return None
        if op == "-n":
            return operand != ""
        if op == "-z":
            return operand == ""
        if op in ("-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h"):
            if isinstance(st.cwd, Unknown) and not operand.startswith("/"):
                return None
            base = st.cwd if isinstance(st.cwd, str) else "/"
            path = Path(base) / operand
            checks = {
                "-f": path.is_file,
                "-d": path.is_dir,
                "-e": path.exists,
                "-x": lambda: os.access(path, os.X_OK),
                "-r": lambda: os.access(path, os.R_OK),
                "-s": lambda: path.is_file() and path.stat().st_size > 0,
                "-L": path.is_symlink,
                "-h": path.is_symlink,
            }
            try:
                return bool(checks[op]())
            except OSError:
                return False
        if op == "-v":
            return operand in st.vars
        return None

    def binary(self, left: Value, op: str, right: Value) -> bool | None:
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(left, right) if op == "==" else left == right
        if op == "!=":
            return not fnmatch.fnmatchcase(left, right)
        ints = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-gt": int.__gt__}
        ints.update({"-le": int.__le__, "-ge": int.__ge__})
        if op in ints:
            try:
                return bool(ints[op](int(left), int(right)))
            except ValueError:
                return None
        return None

    # -- commands -------------------------------------------------------------------------------------

    def command(self, node: Any, st: _State) -> bool | None:
        prefix: dict[str, Value] = {}
        for child in node.children:
            if child.type == "variable_assignment":
                tmp = st.copy()
                name = self.assign(child, tmp, export=True)
                prefix[name] = tmp.vars[name]
        fields = self.fields(node, st)
        if not fields:
            for name, value in prefix.items():  # assignments only: they stay in the shell
                st.vars[name] = value
                st.origin[name] = f"script:{self.script}:{line_of(node)}"
                if st.allexport:
                    st.exported.add(name)
            return True
        words = [join(f) for f in fields]
        head = words[0]
        execs = False
        while head in ("exec", "nohup", "command", "time") and len(words) > 1:
            execs = execs or head == "exec"
            fields, words = fields[1:], words[1:]
            head = words[0]
        if is_server_command(words):
            self.server(node, st, fields, prefix, execs)
            if execs:
                raise _Stop
            return True
        if isinstance(head, Unknown):
            self.notes.append(f"line {line_of(node)}: {head.reason}")
            return None
        args = words[1:]
        if head in ("true", ":"):
            return True
        if head == "false":
            return False
        if head in ("test", "["):
            return self.test_words(args[:-1] if head == "[" and args and args[-1] == "]" else args, st)
        if head in ("source", "."):
            return self.source(node, st, args)
        if head in ("cd", "pushd"):
            known = [a for a in args if isinstance(a, str)]
            self._cd(known if len(known) == len(args) else None, st)
            return True
        if head == "set":
            flags = [a for a in args if isinstance(a, str)]
            for k, flag in enumerate(flags):
                option = flags[k + 1] if k + 1 < len(flags) else ""
                if (
                    flag[:1] in "-+"
                    and flag[1:2] not in ("-", "")
                    and ("a" in flag[1:] or (flag[1:] == "o" and option == "allexport"))
                ):
                    st.allexport = flag[0] == "-"
            return True
        if head == "export":
            for a in args:
                if isinstance(a, str) and "=" in a:
                    var, _, val = a.partition("=")
                    st.vars[var], st.origin[var] = val, f"script:{self.script}:{line_of(node)}"
                    st.exported.add(var)
                elif isinstance(a, str) and not a.startswith("-"):
                    st.exported.add(a)
            return True
        if head == "read":
            for a in args:
                if isinstance(a, str) and not a.startswith("-"):
                    st.vars[a] = Unknown(f"{a} is read from input at run time (line {line_of(node)})")
            return None
        if head == "exit":
            raise _Stop
        if head == "return":
            raise _Stop
        if head in ("eval", "docker", "podman"):
            self.notes.append(
                f"line {line_of(node)}: {head} is not evaluated (use --docker-cmd for docker run)"
            )
            return None
        if head in st.functions:
            return self.call(st.functions[head], st)
        if execs:
            raise _Stop
        if self.in_condition:
            return None  # `if nvidia-smi ...; then`: its status is known only at run time
        # any other program (mkdir, pip, nvidia-smi): it changes nothing the server sees, and is assumed to
        # succeed (`mkdir -p logs && exec ...`): if it fails, no server starts and there is nothing to check
        return True

    def call(self, body: Any, st: _State) -> bool | None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InputError(str(self.script), f"functions or sourced files nested deeper than {MAX_DEPTH}")
        try:
            inner = _body(body, "{", "}") if body.type == "compound_statement" else [body]
            return self.block(inner, st)
        except _Stop:
            if self.found and self.found[-1].execs:
                raise
            return True
        finally:
            self.depth -= 1

    def _cd(self, args: list[str] | None, st: _State) -> None:
        if args is None:
            st.cwd = Unknown("the directory is computed at run time")
            return
        target = next((a for a in args if not a.startswith("-") or a == "-"), None)
        if target is None:
            home = st.vars.get("HOME")
            st.cwd = home if home is not None else Unknown("cd with no argument: $HOME is not set")
            return
        if isinstance(st.cwd, Unknown) and not target.startswith("/"):
            return
        base = st.cwd if isinstance(st.cwd, str) else "/"
        st.cwd = os.path.normpath(os.path.join(base, target))

    def source(self, node: Any, st: _State, args: list[Value]) -> bool | None:
        if not args:
            raise InputError(self.where(node), "source names no file")
        target = args[0]
        if isinstance(target, Unknown):
            raise UnresolvedLaunch(
                f"{self.where(node)}: the sourced file is computed at run time: {target.reason}"
            )
        if isinstance(st.cwd, Unknown) and not target.startswith("/"):
            raise UnresolvedLaunch(f"{self.where(node)}: source {target}: {st.cwd.reason}")
        path = Path(st.cwd if isinstance(st.cwd, str) else "/") / target
        if not path.exists():
            raise InputError(
                self.where(node), f"source {target}: {path} does not exist (the script would fail here)"
            )
        data = read_bounded(path, MAX_SCRIPT_BYTES, "sourced file")
        tree = parse(data, str(path))
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InputError(str(path), f"sourced files nested deeper than {MAX_DEPTH}")
        try:
            # origins name the sourced file; $0 stays the script that sourced it
            sub = _Evaluator(path)
            sub.found, sub.notes, sub.steps, sub.depth, sub.uncertain = (
                self.found,
                self.notes,
                self.steps,
                self.depth,
                self.uncertain,
            )
            sub.zero = self.zero
            try:
                sub.block(list(tree.root_node.children), st)
            except _Stop:
                if self.found and self.found[-1].execs:
                    raise
            self.steps = sub.steps
        finally:
            self.depth -= 1
        return True

    def server(
        self, node: Any, st: _State, fields: list[Field], prefix: dict[str, Value], execs: bool
    ) -> None:
        env = {k: v for k, v in st.vars.items() if k in st.exported}
        origin = {k: st.origin.get(k, "environment") for k in env}
        for k, v in prefix.items():
            env[k], origin[k] = v, f"script:{self.script}:{line_of(node)}"
        uncertain = "; ".join(self.uncertain) or None
        self.found.append(ServerCommand(fields, env, origin, st.cwd, line_of(node), uncertain, execs))


def _index(parent: Any, child: Any) -> int:
    for i, c in enumerate(parent.children):
        if c.id == child.id:
            return i
    return -1


def _body(node: Any, open_: str, close: str) -> list[Any]:
    return [c for c in node.children if c.type not in (open_, close)]


def _snippet(node: Any) -> str:
    text = " ".join(bytes(node.text).decode("utf-8", "replace").split())
    return text if len(text) <= 60 else text[:57] + "..."


def _snippet_nodes(nodes: list[Any]) -> str:
    return " ".join(_snippet(n) for n in nodes if n.type not in (";", "\n"))


# -- the server command as LaunchFacts -----------------------------------------------------------------


def _takes_value(flag: str) -> str | None:
    """The argparse dest of a server flag that takes a value, else None."""
    from validator.sources.sglang_cli import load_table

    action = load_table().by_option.get(flag)
    if action is None or action.kind not in ("store", "lora_paths"):
        return None
    return action.dest


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def resolve(
    cmd: ServerCommand, where: str
) -> tuple[list[str], dict[str, str], dict[str, str], dict[str, str]]:
    """(argv, env, env origin, unresolved) for ``launch_from_argv``; raises UnresolvedLaunch."""
    if cmd.uncertain:
        raise UnresolvedLaunch(
            f"{where}: whether this server command runs is decided at run time ({cmd.uncertain})"
        )
    unresolved: dict[str, str] = {}
    env: dict[str, str] = {}
    for k, v in cmd.env.items():
        if isinstance(v, Unknown):
            unresolved[k] = v.reason
        else:
            env[k] = v
    argv: list[str] = []
    program_seen = False
    for f in cmd.fields:
        value = join(f)
        head = f[0] if f and isinstance(f[0], str) else ""
        if not program_seen:
            if isinstance(value, str):
                argv.append(value)
                prefix_word = value in ("exec", "env") or value.startswith("-") or _is_assignment(value)
                program_seen = not prefix_word
                continue
            if _is_assignment(head):
                unresolved[head.split("=", 1)[0]] = value.reason  # env NAME=$(...) python ...
                continue
            raise UnresolvedLaunch(f"{where}: the program is computed at run time: {value.reason}")
        if isinstance(value, str):
            argv.append(value)
            continue
        if head.startswith("--") and "=" in head:
            dest = _takes_value(head.split("=", 1)[0])
            if dest is not None:
                unresolved[dest] = value.reason
                continue
        if argv and argv[-1].startswith("-") and (dest := _takes_value(argv[-1])) is not None:
            argv.pop()
            unresolved[dest] = value.reason
            continue
        raise UnresolvedLaunch(f"{where}: an argument is computed at run time: {value.reason}")
    return argv, env, {k: cmd.origin.get(k, "environment") for k in env}, unresolved


def _container(argv: list[str], env: dict[str, str], where: str, cwd: Path | None) -> ContainerSpec | None:
    """The script's server runs in a container (``exec docker run ...``): its spec, else None."""
    from validator.sources.docker_run import is_container_run, parse_docker_words

    if not is_container_run(argv):
        return None
    return parse_docker_words(argv, env, f"script:{where}", str(cwd) if cwd is not None else None)


def container_of_script(
    path: Path | str, *, env: Mapping[str, str] | None = None, env_origin: Mapping[str, str] | None = None
) -> ContainerSpec | None:
    """The container a script's server command runs, when it is ``docker run`` (for what it hides)."""
    script, _, cmd = _evaluate(path, env, env_origin)
    argv, server_env, _, _ = resolve(cmd, f"{script}:{cmd.line}")
    cwd = Path(cmd.cwd) if isinstance(cmd.cwd, str) else None
    return _container(argv, server_env, str(script), cwd)


def _evaluate(
    path: Path | str, env: Mapping[str, str] | None, env_origin: Mapping[str, str] | None
) -> tuple[Path, _Evaluator, ServerCommand]:
    """Walk the script from its directory; the server command it runs (``exec``'d, else the last)."""
    script = Path(path).absolute()
    where = str(script)
    data = read_bounded(script, MAX_SCRIPT_BYTES, "launcher script")
    tree = parse(data, where)
    base = dict(env or {})
    st = _State(
        vars=dict(base),
        exported=set(base),
        origin={k: (env_origin or {}).get(k, "environment") for k in base},
        cwd=str(script.parent),
    )
    ev = _Evaluator(script)
    with contextlib.suppress(_Stop):
        ev.block(list(tree.root_node.children), st)
    if not ev.found:
        notes = f" ({'; '.join(ev.notes[:3])})" if ev.notes else ""
        raise InputError(
            where,
            "no command in the script starts the SGLang server (python -m sglang.launch_server, "
            f"sglang serve, spark-validate launch or docker run){notes}",
        )
    return script, ev, next((c for c in ev.found if c.execs), ev.found[-1])


def launch_from_script(
    path: Path | str, *, env: Mapping[str, str] | None = None, env_origin: Mapping[str, str] | None = None
) -> LaunchFacts:
    """``--script``: the server command the script runs, with the environment it gives it."""
    from validator.sources.launch_command import launch_from_argv

    script, ev, cmd = _evaluate(path, env, env_origin)
    where = str(script)
    at = f"{where}:{cmd.line}"
    argv, server_env, origin, unresolved = resolve(cmd, at)
    base_dir = Path(cmd.cwd) if isinstance(cmd.cwd, str) else None
    container = _container(argv, server_env, where, base_dir)
    if container is not None:
        from validator.sources.docker_run import launch_from_container

        facts = launch_from_container(container)
    else:
        facts = launch_from_argv(
            argv,
            origin=f"script:{where}",
            env=server_env,
            env_origin=origin,
            base_dir=base_dir,
            working_directory=base_dir,  # where the script's cd left it (its own directory at the start)
        )
    facts.unresolved.update(unresolved)
    if len(ev.found) > 1:
        facts.warnings.append(
            f"the script starts {len(ev.found)} server commands; checked the one at line {cmd.line}"
        )
    return facts


__all__ = [
    "ServerCommand",
    "UnresolvedLaunch",
    "container_of_script",
    "is_server_command",
    "launch_from_script",
    "resolve",
]
