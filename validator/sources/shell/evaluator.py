"""A bash script evaluated statically along one path, as bash 5 would run it on this host.

What it computes: how the path ends: exit, a construct the reader does not model (``Unmodelled``), or the
first command that starts the SGLang server (``Launch``: its words, the variables exported to it, the
directory). ``reader.read_script`` runs it once per path; ``tests/test_shell_differential.py`` holds
every modelled construct to what real bash does.

This module is the statement dispatch (``stmt``: which rule each syntax node follows), blocks, the start
of a path (the environment bash inherits and what it ignores of it) and the ``#!/bin/sh`` restrictions.
The rules themselves are in the mixins it combines: ``commands`` (simple commands), ``compound``
(control flow), and below them ``machine``, ``variables``, ``conditions`` and ``words``.

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
``enable``, ``hash -p``, ``BASH_ENV``. What is known only at run time makes unknown exactly what it can
change: a sourced file whose text is not known every variable from there on (``Machine.opaque_from``), a
loop over unknown words what its body can assign (``Compound.for_unknown``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tree_sitter import Node, Tree

from validator.sources.shell.commands import Commands
from validator.sources.shell.compound import Compound
from validator.sources.shell.conditions import Conditions
from validator.sources.shell.paths import Forks
from validator.sources.shell.state import (
    BASH_VARS,
    MAX_STEPS,
    Ending,
    Launched,
    LoopJump,
    ShellExit,
    ShellReturn,
    State,
    Var,
)
from validator.sources.shell.syntax import inner, line_of, node_bytes, part, snippet, text
from validator.sources.shell.values import Unbound, Unmodelled, Value


class Evaluator(Commands, Compound):
    """One path through the script: the statements, dispatched to the rules of their kind."""

    def __init__(self, script: Path, forks: Forks) -> None:
        super().__init__(script, forks)
        self.tests = Conditions(self)

    def run(
        self,
        tree: Tree,
        env: Mapping[str, str],
        args: list[str],
        *,
        inside: str | None = None,
        cwd: Value = "",
    ) -> Ending:
        """The path's ending. ``inside``: the script runs where this host cannot see (a container): the
        variables not in ``env`` and every file there are unknown (why: ``inside``), the directory ``cwd``."""
        self.st = State(
            vars={k: Var(value=v, exported=True) for k, v in env.items()},
            funcs={},
            positional=list(args),
            opts=set(self.initial_opts),
            cwd=str(self.script.parent) if inside is None else cwd,
            sources=[str(self.script)],
        )
        if inside is not None:
            self.st.opaque = inside
            self.st.dirty = None
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

    def _walk(self, tree: Tree) -> Ending:
        try:
            self.block(list(tree.root_node.children))
        except Launched as hit:
            return Ending(
                "launch", hit.launch.line, hit.launch.where, launch=hit.launch, assumed=self.forks.taken
            )
        except ShellExit as ex:
            return Ending("exit", ex.line, self.file, ex.why or f"exit {ex.status}", assumed=self.forks.taken)
        except Unmodelled as um:
            line = um.line or self.line
            return Ending("unresolved", line, um.where or self.file, um.reason, assumed=self.forks.taken)
        except ShellReturn:
            return Ending("exit", 0, self.file, "return outside a function", assumed=self.forks.taken)
        except LoopJump:
            return Ending("exit", 0, self.file, "break outside a loop", assumed=self.forks.taken)
        except Unbound as ub:
            return Ending("exit", 0, self.file, f"unbound variable {ub}", assumed=self.forks.taken)
        return Ending("exit", 0, self.file, "the script ends", assumed=self.forks.taken)

    def block(self, nodes: list[Node]) -> int | None:
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

    def posix_check(self, node: Node) -> None:
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
        raw = node_bytes(node)
        if t in ("redirected_statement", "command", "pipeline", "list") and (
            b"&>" in raw or b"|&" in raw or b"<<<" in raw or b"<(" in raw or b">(" in raw
        ):
            raise Unmodelled("&>, |&, <<< or a process substitution in a /bin/sh script", line)
        if t == "case_statement" and (b";&" in raw):
            raise Unmodelled(";& or ;;& in a /bin/sh script", line)

    def stmt(self, node: Node) -> int | None:
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
                return self.errexit(self.tests.arith_command(node), node, snippet(node))
            return self.block(kids)
        if t == "function_definition":
            name = text(part(node, "name"))
            self.st.funcs[name] = part(node, "body")
            self.st.status = 0
            return 0
        if t == "test_command":
            return self.errexit(self.tests.test_command(node), node, snippet(node))
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
