"""A bash script evaluated statically, path by path, as bash 5 would run it on this host.

What it computes: for every path through the script (a path forks where a condition is known only at
run time), how the path ends: exit, a construct the reader does not model (``Unresolvable``), or the first
command that starts the SGLang server (``Launch``: its words, the variables exported to it, the directory).
``launch_script`` turns that into ``LaunchFacts``; ``tests/test_shell_differential.py`` holds every
modelled construct to what real bash does.

The reader, module by module: ``shell_parse`` (the tree), ``shell_words`` (word expansion),
``shell_state`` (variables, a path's state, how a path ends), ``shell_vars`` (lookups, assignments,
declarations), ``shell_cond`` (``[ ]``, ``[[ ]]``, arithmetic), ``shell_builtins`` (the builtins), and this
module: statements, commands, compound commands, command substitution and the walk over every path.

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

import itertools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from validator.errors import UnresolvedLaunch
from validator.sources.files import read_bounded
from validator.sources.shell_builtins import BUILTINS, POSIX_BUILTINS, PROGRAMS
from validator.sources.shell_cond import Conditions
from validator.sources.shell_parse import (
    MAX_SCRIPT_BYTES,
    field_of,
    interpreter,
    interpreter_options,
    line_of,
    parse,
    snippet,
    text,
)
from validator.sources.shell_state import (
    BASH_VARS,
    MAKERS,
    MAX_DEPTH,
    MAX_LOOP,
    MAX_PATHS,
    MAX_STEPS,
    Ending,
    Launch,
    Launched,
    LoopJump,
    Reading,
    ShellExit,
    ShellReturn,
    State,
    Var,
    inner,
    is_server_command,
    reads_only,
    which,
)
from validator.sources.shell_vars import Variables
from validator.sources.shell_words import Field, Unbound, Unknown, Unmodelled, Unsplit, Value, join

# POSIX's special builtins: the assignments before them persist in a POSIX shell
_SPECIAL = {":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set"}
_SPECIAL |= {"shift", "times", "trap", "unset"}


class Evaluator(Variables, Conditions):
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
        self.st: State
        self.file = str(script)  # the file whose statements run now
        self.notes: list[str] = []
        self.missing_source: list[str] = []
        self.line = 0
        self.initial_opts: set[str] = set()  # what the #! line switches on (#!/bin/bash -e)
        self.posix = False  # a #!/bin/sh script: only what POSIX sh and bash do alike is modelled
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

    # -- running ----------------------------------------------------------------------------------------

    def run(self, tree: Any, env: Mapping[str, str], args: list[str]) -> Ending:
        self.st = State(
            vars={k: Var(value=v, exported=True) for k, v in env.items()},
            funcs={},
            positional=list(args),
            opts=set(self.initial_opts),
            cwd=str(self.script.parent),
            sources=[str(self.script)],
        )
        self.st.vars.pop("PWD", None)
        if "IFS" in self.st.vars:  # bash ignores an inherited IFS
            del self.st.vars["IFS"]
        for name in [
            k for k in self.st.vars if not self.posix and (k in BASH_VARS or k.startswith("BASH_FUNC_"))
        ]:
            if name.startswith("BASH_FUNC_"):
                return Ending("unresolved", 1, self.file, f"{name} in the environment: an exported function")
            del self.st.vars[name]
        if env.get("BASH_ENV") and not self.posix:
            return Ending("unresolved", 1, self.file, "BASH_ENV is set: bash sources that file first")
        if (env.get("SHELLOPTS") or env.get("BASHOPTS")) and not self.posix:
            return Ending("unresolved", 1, self.file, "SHELLOPTS/BASHOPTS in the environment")
        ending = self._walk(tree)
        trap = self.st.traps.get("EXIT")
        if ending.kind == "exit" and trap and not ending.reason.startswith("exec "):
            # a path that ends without starting the server may still start it from its EXIT trap
            return Ending("unresolved", ending.line, ending.where, trap, assumed=ending.assumed)
        return ending

    def _walk(self, tree: Any) -> Ending:
        try:
            self.block(list(tree.root_node.children))
        except Launched as hit:
            return Ending("launch", hit.launch.line, hit.launch.where, launch=hit.launch, assumed=self.taken)
        except ShellExit as ex:
            return Ending("exit", ex.line, self.file, ex.why or f"exit {ex.status}", assumed=self.taken)
        except Unmodelled as um:
            line = um.line or self.line
            return Ending("unresolved", line, um.where or self.file, um.reason, assumed=self.taken)
        except ShellReturn:
            return Ending("exit", 0, self.file, "return outside a function", assumed=self.taken)
        except LoopJump:
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
        except (ShellExit, ShellReturn, LoopJump, Unbound):
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
        if status is None and self.st.traps.get("EXIT"):
            # the path where it failed runs the EXIT trap, which may start the server: follow both
            if not self.known_status(None, what, node):
                raise ShellExit(1, line_of(node), f"set -e: {what} failed")
            self.st.status = 0
            return 0
        if status is None:
            self.survived.append(f"{self.file}:{line_of(node)}: {what} succeeded")
            self.st.status = 0
            return 0
        if status != 0:
            raise ShellExit(status, line_of(node), f"set -e: {what} failed (status {status})")
        return status

    @contextmanager
    def ignoring(self) -> Iterator[None]:
        self.ignore_errexit += 1
        try:
            yield
        finally:
            self.ignore_errexit -= 1

    def posix_check(self, node: Any) -> None:
        """A ``#!/bin/sh`` script runs under dash (Ubuntu, Debian): what is bash's alone is not modelled
        there (dash refuses it, or reads it otherwise: ``&>`` is ``&`` then ``>``)."""
        t = node.type
        line = line_of(node)
        if t == "declaration_command" and text(node.children[0]) != "export":
            raise Unmodelled(f"{text(node.children[0])} in a /bin/sh script", line)
        if t == "declaration_command" and any(text(c).startswith(("-", "+")) for c in node.children[1:]):
            raise Unmodelled("export with an option in a /bin/sh script", line)
        if t == "test_command" and node.children[0].type == "[[":
            raise Unmodelled("[[ ]] in a /bin/sh script", line)
        if t in ("c_style_for_statement",) or (t == "compound_statement" and node.children[0].type == "(("):
            raise Unmodelled("(( )) in a /bin/sh script", line)
        if t == "function_definition" and node.children[0].type == "function":
            raise Unmodelled("the function keyword in a /bin/sh script", line)
        raw = bytes(node.text)
        if t in ("redirected_statement", "command", "pipeline", "list") and (
            b"&>" in raw or b"|&" in raw or b"<<<" in raw or b"<(" in raw or b">(" in raw
        ):
            raise Unmodelled("&>, |&, <<< or a process substitution in a /bin/sh script", line)
        if t == "case_statement" and (b";&" in raw):
            raise Unmodelled(";& or ;;& in a /bin/sh script", line)

    def stmt(self, node: Any) -> int | None:
        self.line = line_of(node)  # for what is found where no node is at hand
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unmodelled(f"more than {MAX_STEPS} statements on one path", line_of(node))
        t = node.type
        if self.posix:
            self.posix_check(node)
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
            return self.errexit(self.subshell(inner(node, "(", ")")), node, "( ... )")
        if t == "compound_statement":
            kids = inner(node, "{", "}")
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
        if t == "c_style_for_statement":
            return self.c_for_statement(node)
        if t == "for_statement":
            return self.for_statement(node)
        if t in ("while_statement",):
            return self.while_statement(node)
        raise Unmodelled(f"{t.replace('_', ' ')}: {snippet(node)}", line_of(node))

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
            if cut and text(name_node) in ("export", "declare", "typeset", "local", "readonly", "unset"):
                # the grammar read a declaration as a plain command: its words' splitting is unknown
                raise Unmodelled(
                    f"the grammar misreads the {text(name_node)} after assignments", line_of(node)
                )
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
        if self.posix and head in BUILTINS and head not in POSIX_BUILTINS:
            raise Unmodelled(f"{head} in a /bin/sh script (a bash builtin)", line_of(node))
        if self.posix and head in ("shift", "export", "unset", "set", "trap"):
            # a special builtin that fails ends a non-interactive POSIX shell (dash: shift past the end)
            for n, v in prefix:
                self.assign(n, v, node)
            with self.ignoring():
                status = BUILTINS[head](self, args, [], node)
            if status is None or status != 0:
                raise ShellExit(status, line_of(node), f"{head} failed: dash stops")
            self.st.status = 0
            return 0
        if head in BUILTINS and not (execs and head not in ("exec",)):
            if head in ("exec", "command", "builtin") or not prefix:
                return BUILTINS[head](self, args, prefix, node)
            if self.posix and head in _SPECIAL:  # POSIX: assignments before a special builtin stay
                for n, v in prefix:
                    self.assign(n, v, node)
                return BUILTINS[head](self, args, [], node)
            with self.temporary(prefix, node):
                status = BUILTINS[head](self, args, prefix, node)
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
            raise ShellExit(None, line_of(node), f"exec {head}: the script becomes that program")
        if head in PROGRAMS:
            return PROGRAMS[head](self, args, prefix, node)
        self.output_unknown(head)
        name = os.path.basename(head)
        if name in MAKERS:
            for a in values[1:]:
                if isinstance(a, Unknown):
                    self.st.dirty = None
                elif not a.startswith("-"):
                    self.touch(a)
        elif not reads_only(name, values[1:]):
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
        raise Launched(
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
                status = self.subshell(inner(body, "(", ")"))
            elif body.type == "compound_statement":
                status = self.block(inner(body, "{", "}"))
            else:
                status = self.stmt(body)
        except ShellReturn as r:
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
        except ShellExit as ex:
            status = ex.status
        except ShellReturn as r:
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
            except (ShellExit, ShellReturn, LoopJump, Unbound) as ex:
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
                status = self.block(inner(body, "do", "done"))
            except LoopJump as lp:
                if lp.n > 1:
                    raise LoopJump(lp.kind, lp.n - 1) from None
                if lp.kind == "break":
                    break
        self.st.status = status
        return status

    def c_for_statement(self, node: Any) -> int | None:
        """``for (( init; cond; step ))``: the three arithmetic parts, from the source between the
        separators (a part with an expansion in it is not modelled)."""
        src = bytes(node.text)
        seps = [c for c in node.children if c.type in ("((", ";", "))")][:4]
        if len(seps) != 4 or [c.type for c in seps] != ["((", ";", ";", "))"]:
            raise Unmodelled(f"for (( )) form {snippet(node)}", line_of(node))
        parts = [
            src[a.end_byte - node.start_byte : b.start_byte - node.start_byte].decode().strip()
            for a, b in itertools.pairwise(seps)
        ]
        if any("$" in p or "`" in p for p in parts):
            raise Unmodelled(f"for (( )) with an expansion: {snippet(node)}", line_of(node))
        body = node.child_by_field_name("body")
        init, cond, step = parts
        if init:
            self.arith(init, node)
        status: int | None = 0
        for n in range(MAX_LOOP + 1):
            if n == MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            if cond:
                v = self.arith(cond, node)
                holds = int(v) != 0 if isinstance(v, str) else self.known_status(None, f"(( {cond} ))", node)
                if not holds:
                    break
            try:
                status = self.block(inner(body, "do", "done"))
            except LoopJump as lp:
                if lp.n > 1:
                    raise LoopJump(lp.kind, lp.n - 1) from None
                if lp.kind == "break":
                    break
            if step:
                self.arith(step, node)
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
                status = self.block(inner(body, "do", "done"))
            except LoopJump as lp:
                if lp.n > 1:
                    raise LoopJump(lp.kind, lp.n - 1) from None
                if lp.kind == "break":
                    break
        self.st.status = status
        return status

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
        except ShellExit as ex:
            status, out = ex.status, join(self._capturing)
        except Unbound:  # bash reports it and the substitution's subshell exits
            status, out = 1, join(self._capturing)
        except Launched:
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


def read_script(path: Path | str, *, env: Mapping[str, str], args: list[str] | None = None) -> Reading:
    """Every path through the script at ``path`` started with environment ``env`` and arguments ``args``.

    Raises InputError for a file that is not a script (unreadable, oversized, a syntax error)."""
    script = Path(path).absolute()
    data = read_bounded(script, MAX_SCRIPT_BYTES, "launcher script")
    shell = interpreter(data)
    if shell not in ("bash", "sh"):
        raise UnresolvedLaunch(
            f"{script}:1: the script runs under {shell}; the reader models bash and POSIX sh"
        )
    options = interpreter_options(data)
    if options is None:
        raise UnresolvedLaunch(f"{script}:1: the #! line's options are not modelled")
    tree = parse(data, str(script), "sh" if shell == "sh" else "bash")
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
        ev.posix = shell == "sh"
        ev.initial_opts = set(options)
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


__all__ = ["Ending", "Evaluator", "Launch", "Reading", "is_server_command", "read_script", "which"]
