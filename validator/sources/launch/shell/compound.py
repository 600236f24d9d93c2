"""Compound commands: ``if``, ``case`` (with ``;;``, ``;&``, ``;;&``), ``for``, ``for (( ))``,
``while``/``until``, ``&&``/``||`` lists, pipelines (each part in its own copy of the state, ``pipefail``),
subshells and background jobs. Each runs its parts through the executor's ``stmt``/``block`` and forks,
through ``known_status``, where a condition is known only at run time. Control flow only: it never looks
a command up.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextlib import nullcontext, suppress

from tree_sitter import Node

from validator.sources.launch.shell.api import Shell
from validator.sources.launch.shell.effects import Effects, effects_of
from validator.sources.launch.shell.state import MAX_LOOP, LoopJump, ShellExit, ShellReturn
from validator.sources.launch.shell.syntax import field_of, inner, line_of, node_bytes, part, snippet, text
from validator.sources.launch.shell.values import Unbound, Unknown, Unmodelled, Value, join


class Compound:
    """Lists, pipelines, subshells and the compound commands on one path (``sh``: the executor)."""

    def __init__(self, sh: Shell) -> None:
        self.sh, self.m, self.vars, self.words = sh, sh.m, sh.vars, sh.words

    def background(self, node: Node) -> int | None:
        with self.m.in_copy(), self.m.ignoring(), suppress(ShellExit, ShellReturn, LoopJump, Unbound):
            self.sh.stmt(node)
        self.m.st.status = 0
        self.m.st.dirty = None  # a job running alongside may change anything on the disk
        return 0

    def subshell(self, nodes: list[Node]) -> int | None:
        with self.m.in_copy(), self.m.loops_apart(subshell=True):
            try:
                status = self.sh.block(nodes)
            except (ShellExit, ShellReturn) as ex:
                status = ex.status
            except Unbound:
                status = 1
        self.m.st.status = status
        return status

    # -- lists, pipelines -------------------------------------------------------------------------------

    def and_or(self, node: Node) -> int | None:
        left, op, right = node.children[0], node.children[1].type, node.children[2]
        with self.m.ignoring():
            status = self.sh.stmt(left)
        if status is None and op == "||" and no_op(right, self.m.st.funcs):
            # ``cmd || true``: 0 whichever way cmd went, and the two paths would differ in nothing else
            self.m.st.status = 0
            return 0
        ok = self.m.known_status(status, snippet(left), left)
        if (op == "&&") == ok:
            return self.sh.stmt(right)
        self.m.st.status = status if status is not None else (1 if op == "&&" else 0)
        return self.m.st.status

    def pipeline(self, node: Node) -> int | None:
        parts = [c for c in node.children if c.type not in ("|", "|&")]
        statuses: list[int | None] = []
        for piece in parts:
            with self.m.in_copy(), self.m.loops_apart(subshell=True):  # each part a subshell
                try:
                    with (
                        self.m.ignoring(),
                        self.m.stdout_elsewhere() if piece is not parts[-1] else nullcontext(),
                    ):
                        statuses.append(self.sh.stmt(piece))
                except (ShellExit, ShellReturn, LoopJump, Unbound) as ex:
                    statuses.append(ex.status if isinstance(ex, (ShellExit, ShellReturn)) else 1)
        status = statuses[-1]
        if "pipefail" in self.m.st.opts:
            status = next((s for s in reversed(statuses) if s != 0), 0)
        return self.m.errexit(status, node, snippet(node))

    # -- compound commands ------------------------------------------------------------------------------

    def if_statement(self, node: Node) -> int | None:
        clauses: list[tuple[list[Node], list[Node]]] = []  # (condition, body); else: no condition
        for clause in [node, *(c for c in node.children if c.type in ("elif_clause", "else_clause"))]:
            cond: list[Node] = []
            body: list[Node] = []
            in_body = clause.type == "else_clause"
            for c in clause.children:
                if c.type == "then":
                    in_body = True
                elif c.type not in ("if", "elif", "else", "fi", "elif_clause", "else_clause"):
                    (body if in_body else cond).append(c)
            clauses.append((cond, body))
        for cond, body in clauses:
            if not cond:
                return self.sh.block(body)
            with self.m.ignoring():
                status = self.sh.block(cond)
            if self.m.known_status(
                status, " ".join(snippet(c) for c in cond if c.type not in (";", "\n")), node
            ):
                return self.sh.block(body)
        self.m.st.status = 0
        return 0

    def case_statement(self, node: Node) -> int | None:
        subject = self.words.value(part(node, "value"))
        self.m.st.status = 0
        falling = False
        status: int | None = 0
        ends = (";;", ";&", ";;&")
        for item in [c for c in node.children if c.type == "case_item"]:
            patterns = [c for c in item.children if field_of(item, c) == "value"]
            body = [
                c
                for c in item.children
                if field_of(item, c) != "value" and c.type not in (")", "|", "(", *ends)
            ]
            term = next((c.type for c in item.children if c.type in ends), ";;")
            hit = falling
            if not hit:
                for p in patterns:
                    rx = self.words.pattern(p)
                    if isinstance(subject, str) and not isinstance(rx, Unknown):
                        hit = rx.fullmatch(subject) is not None
                    else:
                        unknown = subject if isinstance(subject, Unknown) else rx
                        why = f"{text(p)!r} ({unknown.reason if isinstance(unknown, Unknown) else ''})"
                        labels = [f"case matches {why}", f"case does not match {why}"]
                        hit = self.m.decide(2, labels, node) == 0
                    if hit:
                        break
            if hit:
                status = self.sh.block(body) if body else 0
                if term == ";;":
                    return status
                falling = term == ";&"
        self.m.st.status = status
        return status

    def for_statement(self, node: Node) -> int | None:
        var = text(part(node, "variable"))
        values = [c for c in node.children if field_of(node, c) == "value"]
        body = part(node, "body")
        items: list[Value] = []
        if not any(c.type == "in" for c in node.children):
            pos = self.m.st.positional
            if isinstance(pos, Unknown):
                return self.for_unknown(node, var, body, f"the arguments: {pos.reason}")
            items = list(pos)
        for v in values:
            fs = self.words.fields(v)
            if isinstance(fs, Unknown):
                return self.for_unknown(node, var, body, fs.reason)
            items += [join(f) for f in fs]
        status: int | None = 0
        for n, item in enumerate(items):
            if n >= MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            self.vars.assign(var, item, node)
            status, broke = self._iteration(body, status)
            if broke:
                break
        self.m.st.status = status
        return status

    def for_unknown(self, node: Node, var: str, body: Node, why: str) -> int | None:
        """``for`` over words known only at run time (a glob): two paths. No iteration; or the last one,
        run once from the state before the loop with what the body can change (``effects.effects_of``)
        made unknown, its ``break``, ``return`` and ``exit`` as they come. Where the syntax does not bound
        the body's effects, the loop is not modelled."""
        fx = effects_of(inner(body, "do", "done"), self.m.st.funcs)
        if isinstance(fx, str):
            raise Unmodelled(f"for over words known only at run time ({why}), around {fx}", line_of(node))
        labels = [f"for {var}: no words ({why})", f"for {var}: one or more words ({why})"]
        if self.m.decide(2, labels, node) == 0:
            self.m.st.status = 0
            return 0
        self.m.unknown_effects(fx, f"set by the loop at line {line_of(node)}")
        self.vars.assign(var, Unknown(f"${var}: a word of {why}"), node)
        status, _ = self._iteration(body, 0)
        self.m.st.status = status
        return status

    def c_for_statement(self, node: Node) -> int | None:
        """``for (( init; cond; step ))``: the three arithmetic parts, from the source between the
        separators (a part with an expansion in it is not modelled)."""
        src = node_bytes(node)
        seps = [c for c in node.children if c.type in ("((", ";", "))")][:4]
        if len(seps) != 4 or [c.type for c in seps] != ["((", ";", ";", "))"]:
            raise Unmodelled(f"for (( )) form {snippet(node)}", line_of(node))
        parts = [
            src[a.end_byte - node.start_byte : b.start_byte - node.start_byte].decode().strip()
            for a, b in itertools.pairwise(seps)
        ]
        if any("$" in p or "`" in p for p in parts):
            raise Unmodelled(f"for (( )) with an expansion: {snippet(node)}", line_of(node))
        body = part(node, "body")
        init, cond, step = parts
        if init:
            self.words.arith(init, node)
        status: int | None = 0
        for n in range(MAX_LOOP + 1):
            if n == MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            if cond:
                v = self.words.arith(cond, node)
                holds = (
                    int(v) != 0 if isinstance(v, str) else self.m.known_status(None, f"(( {cond} ))", node)
                )
                if not holds:
                    break
            status, broke = self._iteration(body, status)
            if broke:
                break
            if step:
                self.words.arith(step, node)
        self.m.st.status = status
        return status

    def while_statement(self, node: Node) -> int | None:
        cond = [c for c in node.children if field_of(node, c) == "condition"]
        body = part(node, "body")
        until = node.children[0].type == "until"
        status: int | None = 0
        widened = False
        for n in range(MAX_LOOP + 1):
            if n == MAX_LOOP:
                raise Unmodelled(f"more than {MAX_LOOP} iterations", line_of(node))
            with self.m.ignoring():
                c = self.sh.block(cond)
            fx = None if c is not None or widened else effects_of([*cond, body], self.m.st.funcs)
            if c is None and widened:
                break  # the iteration run from the widened state was the last one; see below
            if c is None and isinstance(fx, Effects):
                # known only at run time from here: the loop stops now, or runs on; then the state at the
                # start of its last iteration is this one with what the condition and the body can change
                # made unknown, and that iteration runs once (as for a loop over unknown words)
                why = f"the loop at line {line_of(node)}"
                if self.m.decide(2, [f"{why} stops here", f"{why} runs on"], node) == 0:
                    break
                self.m.unknown_effects(fx, f"changed by {why}")
                widened = True
            elif self.m.known_status(c, "loop condition", node) == until:
                break
            status, broke = self._iteration(body, status)
            if broke:
                break
        self.m.st.status = status
        return status

    def _iteration(self, body: Node, status: int | None) -> tuple[int | None, bool]:
        """One run of a loop's body: its status (``status``, the last one, where it jumped), and whether
        it broke out of this loop; a ``break N``/``continue N`` for an outer loop goes on up, and one past
        the outermost acts on it (bash(1): "all enclosing loops are exited", "the top-level loop is
        resumed")."""
        self.m.loops += 1
        try:
            return self.sh.block(inner(body, "do", "done")), False
        except LoopJump as lp:
            if lp.n > 1 and self.m.loops > 1:
                raise LoopJump(lp.kind, lp.n - 1) from None
            return status, lp.kind == "break"
        finally:
            self.m.loops -= 1


def no_op(node: Node, funcs: Mapping[str, Node]) -> bool:
    """``true`` or ``:`` alone (no words, redirections or prefix, not a function): it changes nothing and
    succeeds."""
    return (
        node.type == "command"
        and len(node.children) == 1
        and text(node) in ("true", ":")
        and text(node) not in funcs
    )
