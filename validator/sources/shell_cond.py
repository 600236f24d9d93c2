"""Conditions, statically: ``[ ]``/``test`` (string comparison, POSIX's rules by argument count, bash's
grammar beyond four), ``[[ ]]`` (pattern matching, ``&&``/``||``), file tests against the disk (unless the
script may have changed that path), and integer arithmetic (``$(( ))``, ``(( ))``) on known operands.

A condition that depends on what only the run knows is None: the evaluator forks there. ``Conditions`` is a
mixin of the evaluator; the functions below it are shared with the ``test`` and ``[`` builtins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from validator.sources.shell_parse import line_of, snippet, text
from validator.sources.shell_state import State
from validator.sources.shell_words import Unbound, Unknown, Unmodelled, Value, Words, join

INT_OPS = {
    "-eq": lambda a, b: a == b,
    "-ne": lambda a, b: a != b,
    "-lt": lambda a, b: a < b,
    "-le": lambda a, b: a <= b,
    "-gt": lambda a, b: a > b,
    "-ge": lambda a, b: a >= b,
}


def leaves(nodes: list[Any]) -> Iterator[Any]:
    for n in nodes:
        if n.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            yield from leaves(list(n.children))
        else:
            yield n


class Conditions(Words):
    """``[ ]``, ``[[ ]]`` and arithmetic over the evaluator's state."""

    st: State

    def decide(self, n: int, labels: list[str], node: Any) -> int:  # pragma: no cover - the evaluator's
        raise NotImplementedError

    def changed(self, path: str) -> bool:  # pragma: no cover - the evaluator's
        raise NotImplementedError

    # -- tests ------------------------------------------------------------------------------------------

    def test_command(self, node: Any) -> int | None:
        opener = node.children[0].type
        inner = [c for c in node.children if c.type not in ("[", "]", "[[", "]]")]
        if opener == "[":
            args: list[Value] = []
            for leaf in leaves(inner):
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
            return test_words(self, args, node)
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
            return unary_test(self, op, self.value(operand), node)
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
            if op in INT_OPS:
                a_ = self.arith(lv, node) if isinstance(lv, str) else lv
                b_ = self.arith(rv, node) if isinstance(rv, str) else rv
                if isinstance(a_, Unknown) or isinstance(b_, Unknown):
                    return None
                return bool(INT_OPS[op](int(a_), int(b_)))
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
        return Arith(self, expr, node).evaluate()


# -- test / [ -------------------------------------------------------------------------------------------


def unary_test(ev: Conditions, op: str, operand: Value, node: Any) -> bool | None:
    if op in ("-n", "-z"):
        if isinstance(operand, Unknown):
            return (op == "-n") if operand.nonempty else None
        return (operand != "") == (op == "-n")
    if op == "-v":
        if ev.posix:
            raise Unmodelled("test -v in a /bin/sh script", line_of(node))
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


def _binary(ev: Conditions, left: Value, op: str, right: Value, node: Any) -> bool | None:
    if ev.posix and op == "==":
        raise Unmodelled("[ a == b ] in a /bin/sh script (dash's test has no ==)", line_of(node))
    if op in ("=", "==", "!="):  # test and [ compare strings: no patterns
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        return (left == right) == (op != "!=")
    if op in INT_OPS:
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return None
        try:
            a, b = int(left.strip()), int(right.strip())
        except ValueError:
            raise Unmodelled(
                f"[ {left!r} {op} {right!r} ]: not integers (bash reports an error)", line_of(node)
            ) from None
        return bool(INT_OPS[op](a, b))
    raise Unmodelled(f"test operator {op}", line_of(node))


_UNARY_OPS = {"-n", "-z", "-f", "-d", "-e", "-x", "-r", "-s", "-L", "-h", "-w", "-v"}
_BINARY_OPS = {"=", "==", "!=", *INT_OPS}


def test_words(ev: Conditions, args: list[Value], node: Any) -> int | None:
    """The ``test``/``[`` builtin on its words, by POSIX's rules for up to four arguments."""
    r = _test_posix(ev, args, node)
    return None if r is None else int(not r)


def _test_posix(ev: Conditions, args: list[Value], node: Any) -> bool | None:
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
            return unary_test(ev, args[0], args[1], node)
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

    def __init__(self, ev: Conditions, args: list[Value], node: Any) -> None:
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
            return unary_test(self.ev, str(args[k]), args[k + 1], self.node)
        if isinstance(args[k], Unknown):
            raise Unmodelled(
                "test: an operand known only at run time where an operator may be", line_of(self.node)
            )
        self.k += 1
        return args[k] != ""


# -- arithmetic -----------------------------------------------------------------------------------------


class Arith:
    """Integer arithmetic as ``$(( ))``, ``(( ))`` and ``for (( ; ; ))`` do it, on known operands: ``+ - *
    / %``, comparisons, ``&& || !`` (short-circuit), ``?:``, ``,``, parentheses, assignments (``= += -= *=
    /= %=``) and ``++``/``--``; a name is read as arithmetic recursively, an unset or empty one is 0.
    Bitwise and shift operators, ``**`` and octal or based constants are not modelled."""

    _TOKEN = re.compile(
        r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(\$\{?[A-Za-z_0-9@#?]+\}?)"
        r"|(\+\+|--|\+=|-=|\*=|/=|%=|<=|>=|==|!=|&&|\|\||[-+*/%()<>!=?:,]))"
    )

    def __init__(self, ev: Conditions, expr: str, node: Any, depth: int = 0) -> None:
        self.ev, self.node, self.depth = ev, node, depth
        self.toks: list[tuple[str, str]] = []
        pos = 0
        expr = expr.strip()
        if "$(" in expr or "`" in expr:
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
        self.live = True  # False inside a branch that short-circuit evaluation skips

    def fail(self, what: str) -> Unmodelled:
        return Unmodelled(f"arithmetic: {what}", line_of(self.node))

    def evaluate(self) -> Value:
        if not self.toks:
            return "0"
        v = self.comma()
        if self.k != len(self.toks):
            raise self.fail("syntax")
        return self.unknown if self.unknown is not None else str(v)

    def peek(self) -> str | None:
        return self.toks[self.k][1] if self.k < len(self.toks) and self.toks[self.k][0] == "o" else None

    def comma(self) -> int:
        v = self.assign()
        while self.peek() == ",":
            self.k += 1
            v = self.assign()
        return v

    def assign(self) -> int:
        if (
            self.k + 1 < len(self.toks)
            and self.toks[self.k][0] == "v"
            and self.toks[self.k + 1]
            in (("o", "="), ("o", "+="), ("o", "-="), ("o", "*="), ("o", "/="), ("o", "%="))
        ):
            if self.ev.posix:
                raise self.fail("an assignment inside arithmetic in a /bin/sh script")
            name, op = self.toks[self.k][1], self.toks[self.k + 1][1]
            self.k += 2
            rhs = self.assign()
            value = rhs if op == "=" else self.binop(op[0], self.read(name), rhs)
            self.store(name, value)
            return value
        return self.ternary()

    def store(self, name: str, value: int) -> None:
        if not self.live:
            return
        if not NAME_RE.fullmatch(name):
            raise self.fail(f"assignment to {name!r}")
        self.ev.set_scalar(name, self.unknown if self.unknown is not None else str(value), self.node)

    def ternary(self) -> int:
        c = self.orr()
        if self.peek() != "?":
            return c
        self.k += 1
        if self.unknown is not None:
            raise self.fail("?: on a value known only at run time")
        live = self.live
        self.live = live and c != 0
        a = self.assign()
        if self.peek() != ":":
            raise self.fail("?: without :")
        self.k += 1
        self.live = live and c == 0
        b = self.ternary()
        self.live = live
        return a if c != 0 else b

    def orr(self) -> int:
        v = self.andd()
        while self.peek() == "||":
            self.k += 1
            live = self.live
            self.live = live and not v
            r = self.andd()
            self.live = live
            v = int(bool(v) or bool(r))
        return v

    def andd(self) -> int:
        v = self.cmp()
        while self.peek() == "&&":
            self.k += 1
            live = self.live
            self.live = live and bool(v)
            r = self.cmp()
            self.live = live
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
            op = self.peek() or ""
            self.k += 1
            v = self.binop(op, v, self.mul())
        return v

    def mul(self) -> int:
        v = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.peek() or ""
            self.k += 1
            v = self.binop(op, v, self.unary())
        return v

    def binop(self, op: str, v: int, r: int) -> int:
        if op == "+":
            return _wrap(v + r)
        if op == "-":
            return _wrap(v - r)
        if op == "*":
            return _wrap(v * r)
        if r == 0:
            if self.unknown is None and self.live:
                raise self.fail("division by zero")
            return 0
        q = abs(v) // abs(r) * (1 if (v >= 0) == (r >= 0) else -1)
        return q if op == "/" else v - q * r

    def unary(self) -> int:
        op = self.peek()
        if op in ("++", "--"):
            if self.ev.posix:
                raise self.fail("++ or -- in a /bin/sh script")
            self.k += 1
            if self.k >= len(self.toks) or self.toks[self.k][0] != "v":
                raise self.fail(f"{op} of a non-variable")
            name = self.toks[self.k][1]
            self.k += 1
            value = self.read(name) + (1 if op == "++" else -1)
            self.store(name, value)
            return value
        if op in ("-", "+", "!"):
            self.k += 1
            v = self.unary()
            return -v if op == "-" else (v if op == "+" else int(not v))
        if op == "(":
            self.k += 1
            v = self.comma()
            if self.peek() != ")":
                raise self.fail("parentheses")
            self.k += 1
            return v
        if self.k >= len(self.toks):
            raise self.fail("syntax")
        kind, tok = self.toks[self.k]
        self.k += 1
        if kind == "n":
            return int(tok)
        if kind == "o":
            raise self.fail(f"operator {tok!r}")
        value = self.read(tok)
        post = self.peek()
        if post in ("++", "--") and self.ev.posix:
            raise self.fail("++ or -- in a /bin/sh script")
        if post in ("++", "--"):
            self.k += 1
            self.store(tok, value + (1 if post == "++" else -1))
        return value

    def read(self, tok: str) -> int:
        value = self.ev.scalar(tok) if not tok.isdigit() else self.ev._lookup(tok, None, self.node)
        if value is None or value == "":
            if value is None and self.ev.nounset():
                raise Unbound(tok)
            return 0
        if isinstance(value, Unknown):
            self.unknown = self.unknown or value
            return 1
        if self.depth > 8:
            raise self.fail("recursion")
        inner = Arith(self.ev, value, self.node, self.depth + 1).evaluate()
        if isinstance(inner, Unknown):
            self.unknown = self.unknown or inner
            return 1
        return int(inner)


NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _wrap(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v
