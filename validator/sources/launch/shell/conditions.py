"""Conditions, statically: ``[ ]``/``test`` (string comparison, POSIX's rules by argument count, bash's
grammar beyond four), ``[[ ]]`` (pattern matching, ``&&``/``||``), file tests against the disk (unless the
script may have changed that path), and ``(( ))`` as a command (its arithmetic is ``arith``'s).

A condition that depends on what only the run knows is None: the executor forks there. ``Conditions``
holds the path's machine (the disk, the forks), variables and word expansion; the functions below it are
shared with the ``test`` and ``[`` builtins.
"""

from __future__ import annotations

import operator
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from tree_sitter import Node

from validator.sources.launch.shell.machine import Machine
from validator.sources.launch.shell.state import NAME
from validator.sources.launch.shell.syntax import line_of, part, snippet, text
from validator.sources.launch.shell.values import Unknown, Unmodelled, Value, join, process_file
from validator.sources.launch.shell.variables import Variables
from validator.trusted_files import UnsafeLocation, look_unplanted

INT_OPS: dict[str, Callable[[int, int], bool]] = {
    "-eq": operator.eq,
    "-ne": operator.ne,
    "-lt": operator.lt,
    "-le": operator.le,
    "-gt": operator.gt,
    "-ge": operator.ge,
}


# the syntax of [ ... ]: its operators are words to the builtin, as written
_TEST_OPERATORS = {"test_operator", "==", "=", "!=", "!", "=~", "<", ">", "&&", "||", "-a", "-o", "(", ")"}
# a lone word in [[ ]]: true when it is not empty
_WORDS = {
    "word",
    "string",
    "raw_string",
    "concatenation",
    "simple_expansion",
    "expansion",
    "number",
    "command_substitution",
}


def _negated(r: bool | None) -> bool | None:
    return None if r is None else not r


def _nonempty(v: Value) -> bool | None:
    """``-n``'s answer: an unknown value is non-empty only where that is known (``$BASH``)."""
    if isinstance(v, Unknown):
        return True if v.nonempty else None
    return v != ""


def leaves(nodes: list[Node]) -> Iterator[Node]:
    for n in nodes:
        if n.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            yield from leaves(list(n.children))
        else:
            yield n


class Conditions:
    """``[ ]``, ``[[ ]]`` and ``(( ))`` on one path."""

    def __init__(self, m: Machine, variables: Variables) -> None:
        self.m, self.vars, self.words = m, variables, variables.words

    # -- tests ------------------------------------------------------------------------------------------

    def test_command(self, node: Node) -> int | None:
        opener = node.children[0].type
        inner = [c for c in node.children if c.type not in ("[", "]", "[[", "]]")]
        if opener == "[":
            args: list[Value] = []
            for leaf in leaves(inner):
                if leaf.type in _TEST_OPERATORS:
                    args.append(text(leaf))
                    continue
                fs = self.words.fields(leaf)
                if isinstance(fs, Unknown):
                    return None
                args += [join(f) for f in fs]
            return test_words(self, args, node)
        if len(inner) != 1:
            raise Unmodelled(f"[[ ]] form {snippet(node)}", line_of(node))
        r = self.cond_expr(inner[0])
        return None if r is None else int(not r)

    def cond_expr(self, node: Node) -> bool | None:
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
                return _negated(self.cond_expr(operand))
            return unary_test(self, op, self.words.value(operand), node)
        if t == "binary_expression":
            left = part(node, "left")
            right = part(node, "right")
            op = text(part(node, "operator"))
            if op in ("&&", "||"):
                a = self.cond_expr(left)
                if a is None:
                    labels = [f"[[ {snippet(left)} ]] holds", f"[[ {snippet(left)} ]] fails"]
                    a = self.m.decide(2, labels, node) == 0
                if a == (op == "||"):
                    return a
                return self.cond_expr(right)
            lv = self.words.value(left)
            if op in ("==", "=", "!="):
                rx = self.words.pattern(right)
                if isinstance(lv, Unknown) or isinstance(rx, Unknown):
                    return None
                hit = rx.fullmatch(lv) is not None
                return hit if op != "!=" else not hit
            if op == "=~":
                raise Unmodelled("[[ =~ ]] (an extended regular expression)", line)
            if op in ("<", ">"):
                raise Unmodelled(f"[[ {op} ]] (the locale's collation order)", line)
            rv = self.words.value(right)
            if op in INT_OPS:
                a_ = self.words.arith(lv, node) if isinstance(lv, str) else lv
                b_ = self.words.arith(rv, node) if isinstance(rv, str) else rv
                if isinstance(a_, Unknown) or isinstance(b_, Unknown):
                    return None
                return INT_OPS[op](int(a_), int(b_))
            if op in ("-nt", "-ot", "-ef"):
                raise Unmodelled(f"file comparison {op}", line)
            raise Unmodelled(f"[[ ]] operator {op!r}", line)
        if t in _WORDS:
            return _nonempty(self.words.value(node))
        raise Unmodelled(f"[[ ]] expression {snippet(node)}", line)

    # -- arithmetic -------------------------------------------------------------------------------------

    def arith_command(self, node: Node) -> int | None:
        inner = self.words.arith_text(node, 2, 2)
        if isinstance(inner, Unknown):
            return None
        v = self.words.arith(inner, node)
        if isinstance(v, Unknown):
            return None
        return 0 if int(v) != 0 else 1


# -- test / [ -------------------------------------------------------------------------------------------


def unary_test(ev: Conditions, op: str, operand: Value, node: Node) -> bool | None:
    if op in ("-n", "-z"):
        r = _nonempty(operand)
        return r if op == "-n" else _negated(r)
    if op == "-v":
        if ev.m.posix:
            raise Unmodelled("test -v in a /bin/sh script", line_of(node))
        if isinstance(operand, Unknown):
            return None
        if not NAME.fullmatch(operand):  # -v 1, -v 'A[0]': a parameter or an element, not modelled
            raise Unmodelled(f"test -v {operand!r}", line_of(node))
        return ev.vars.scalar(operand) is not None or ev.vars.elements(operand) is not None
    if op in ("-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h", "-w", "-a"):
        if isinstance(operand, Unknown):
            return None
        if operand == "" or ev.m.changed(operand):  # also a relative path when the directory is unknown
            return None
        ev.m.uses_cwd(operand)
        path = Path(str(ev.m.st.cwd)) / operand
        if process_file(str(path)):  # the shell's own (or another process's) files at run time
            return None
        need = {"-x": os.X_OK, "-r": os.R_OK, "-w": os.W_OK}.get(op, os.F_OK)
        try:  # walked, never looked at by name: where the script's owner could not look, unknown
            # where root may and the script's owner may not (mode bits, ACL): unknown
            st = look_unplanted(str(path), need, follow_last=op not in ("-L", "-h"), theirs=True)
        except UnsafeLocation:
            return None
        except OSError:  # a name over the kernel's limits: not there, to bash too
            return False
        if st is None:
            return False
        if op in ("-f", "-s"):
            return stat.S_ISREG(st.st_mode) and (op == "-f" or st.st_size > 0)
        if op == "-d":
            return stat.S_ISDIR(st.st_mode)
        return stat.S_ISLNK(st.st_mode) if op in ("-L", "-h") else True
    raise Unmodelled(f"test operator {op}", line_of(node))


def _binary(ev: Conditions, left: Value, op: str, right: Value, node: Node) -> bool | None:
    if ev.m.posix and op == "==":
        raise Unmodelled("[ a == b ] in a /bin/sh script (dash's test has no ==)", line_of(node))
    if op in ("=", "==", "!="):  # test and [ compare strings: no patterns
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        return (left == right) == (op != "!=")
    if isinstance(left, Unknown) or isinstance(right, Unknown):  # the rest of _BINARY_OPS: INT_OPS
        return None
    try:
        a, b = int(left.strip()), int(right.strip())
    except ValueError:
        raise Unmodelled(
            f"[ {left!r} {op} {right!r} ]: not integers (bash reports an error)", line_of(node)
        ) from None
    return INT_OPS[op](a, b)


_UNARY_OPS = {"-n", "-z", "-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h", "-w", "-v"}
_BINARY_OPS = {"=", "==", "!=", *INT_OPS}


def test_words(ev: Conditions, args: list[Value], node: Node) -> int | None:
    """The ``test``/``[`` builtin on its words, by POSIX's rules for up to four arguments."""
    r = _test_posix(ev, args, node)
    return None if r is None else int(not r)


def _test_posix(ev: Conditions, args: list[Value], node: Node) -> bool | None:
    n = len(args)
    if n == 0:
        return False
    if n == 1:
        return _nonempty(args[0])
    if n == 3 and isinstance(args[1], str) and args[1] in _BINARY_OPS:
        return _binary(ev, args[0], args[1], args[2], node)
    if n <= 4 and args[0] == "!":
        return _negated(_test_posix(ev, args[1:], node))
    if n == 2 and isinstance(args[0], str) and args[0] in _UNARY_OPS:
        return unary_test(ev, args[0], args[1], node)
    if n <= 4:
        raise Unmodelled(f"test with {args!r}", line_of(node))
    return _TestParser(ev, args, node).parse()


class _TestParser:
    """``test`` with more than four arguments: bash's grammar (``-o`` below ``-a`` below ``!``, then
    parentheses, unary and binary primaries). Any operand unknown where it decides makes it None."""

    def __init__(self, ev: Conditions, args: list[Value], node: Node) -> None:
        self.ev, self.args, self.node, self.k = ev, args, node, 0

    def parse(self) -> bool | None:
        r = self.orr()
        if self.k != len(self.args):
            raise Unmodelled(f"test with {self.args!r}", line_of(self.node))
        return r

    def orr(self) -> bool | None:
        return self.junction("-o", self.andd)

    def andd(self) -> bool | None:
        return self.junction("-a", self.term)

    def junction(self, op: str, operand: Callable[[], bool | None]) -> bool | None:
        """``-o`` or ``-a`` from left to right: one operand that decides it (true for ``-o``, false for
        ``-a``) decides, else an unknown one makes it unknown."""
        decides = op == "-o"
        a = operand()
        while self.k < len(self.args) and self.args[self.k] == op:
            self.k += 1
            b = operand()
            a = decides if decides in (a, b) else (None if None in (a, b) else not decides)
        return a

    def term(self) -> bool | None:
        args, k = self.args, self.k
        if k >= len(args):
            raise Unmodelled("test: argument expected", line_of(self.node))
        if args[k] == "!":
            self.k += 1
            return _negated(self.term())
        if args[k] == "(":
            self.k += 1
            r = self.orr()
            if self.k >= len(args) or args[self.k] != ")":
                raise Unmodelled("test: ( without )", line_of(self.node))
            self.k += 1
            return r
        if k + 2 < len(args) and isinstance(args[k + 1], str) and args[k + 1] in _BINARY_OPS:
            self.k += 3
            return _binary(self.ev, args[k], str(args[k + 1]), args[k + 2], self.node)
        if isinstance(args[k], str) and args[k] in _UNARY_OPS and k + 1 < len(args):
            self.k += 2
            return unary_test(self.ev, str(args[k]), args[k + 1], self.node)
        if isinstance(args[k], Unknown):
            raise Unmodelled(
                "test: an operand known only at run time where an operator may be", line_of(self.node)
            )
        self.k += 1
        return args[k] != ""
