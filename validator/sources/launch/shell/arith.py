"""Bash integer arithmetic, statically: ``$(( ))``, ``(( ))``, ``let`` and ``for (( ; ; ))`` on known
operands, with bash's 64-bit wrap-around, short-circuit evaluation and assignments. An operand known only
at run time makes the result ``Unknown``; an operator not modelled raises ``Unmodelled``.

A small expression parser of its own, apart from the conditions (``[ ]``, ``[[ ]]``) that use it, because
it is a grammar (precedence, assignment, recursion into a variable's text) rather than a rule on words.
It reads and writes variables through ``state.Names``, not the evaluator.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from tree_sitter import Node

from validator.sources.launch.shell.state import Names
from validator.sources.launch.shell.syntax import line_of
from validator.sources.launch.shell.values import Unbound, Unknown, Unmodelled, Value


class Arith:
    """Integer arithmetic as ``$(( ))``, ``(( ))`` and ``for (( ; ; ))`` do it, on known operands: ``+ - *
    / %``, comparisons, ``&& || !`` (short-circuit), ``?:``, ``,``, parentheses, assignments (``= += -= *=
    /= %=``) and ``++``/``--``; a name is read as arithmetic recursively, an unset or empty one is 0.
    Bitwise and shift operators, ``**`` and octal or based constants are not modelled."""

    # no $: the callers expand $x, ${x} and $(...) first, as bash does; one left in the text (let 'a=$b',
    # [[ 1 -lt '$b' ]]) is a syntax error to bash
    _TOKEN = re.compile(
        r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)"
        r"|(\+\+|--|\+=|-=|\*=|/=|%=|<=|>=|==|!=|&&|\|\||[-+*/%()<>!=?:,]))"
    )

    def __init__(self, ev: Names, expr: str, node: Node, depth: int = 0) -> None:
        self.ev, self.node, self.depth = ev, node, depth
        self.toks: list[tuple[str, str]] = []
        pos = 0
        expr = expr.strip()
        while pos < len(expr):
            m = self._TOKEN.match(expr, pos)
            if m is None:
                raise Unmodelled(f"arithmetic {expr!r}", line_of(node))
            num, name, op = m.groups()
            if num is not None:
                if len(num) > 40:  # past 64 bits in any base; Python refuses over 4,300 digits
                    raise Unmodelled(f"arithmetic number {num[:20]!r}... of {len(num)} digits", line_of(node))
                if len(num) > 1 and num.startswith("0") and not num.lower().startswith("0x"):
                    raise Unmodelled(f"octal arithmetic {num!r}", line_of(node))
                self.toks.append(("n", str(int(num, 0))))
            elif name is not None:
                self.toks.append(("v", name))
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
        return self.logical("||", self.andd)

    def andd(self) -> int:
        return self.logical("&&", self.cmp)

    def logical(self, op: str, operand: Callable[[], int]) -> int:
        """``&&`` or ``||`` between operands, short-circuit: the right one is evaluated but not live."""
        v = operand()
        while self.peek() == op:
            self.k += 1
            live = self.live
            self.live = live and bool(v) == (op == "&&")
            r = operand()
            self.live = live
            v = int(bool(v) and bool(r)) if op == "&&" else int(bool(v) or bool(r))
        return v

    def cmp(self) -> int:
        return self.chain(("<", ">", "<=", ">=", "==", "!="), self.add)

    def add(self) -> int:
        return self.chain(("+", "-"), self.mul)

    def mul(self) -> int:
        return self.chain(("*", "/", "%"), self.unary)

    def chain(self, ops: tuple[str, ...], operand: Callable[[], int]) -> int:
        """Left-associative binary operators ``ops`` between operands."""
        v = operand()
        while (op := self.peek()) in ops:
            self.k += 1
            v = self.binop(op or "", v, operand())
        return v

    def binop(self, op: str, v: int, r: int) -> int:
        if op in _COMPARE:
            return int(_COMPARE[op](v, r))
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
        value = self.ev.scalar(tok)
        if value is None or value == "":
            if value is None and self.ev.nounset():
                if self.ev.posix:  # dash reads it as 0, bash stops
                    raise self.fail(f"{tok} unset under set -u in a /bin/sh script")
                raise Unbound(tok)
            return 0
        if isinstance(value, Unknown):
            self.unknown = self.unknown or value
            return 1
        if self.ev.posix and not _DECIMAL.fullmatch(value):
            # dash reads a variable's value as a number only ("Illegal number"), bash as an expression
            raise self.fail(f"{tok}={value!r} in a /bin/sh script")
        if self.depth > 8:
            raise self.fail("recursion")
        inner = Arith(self.ev, value, self.node, self.depth + 1).evaluate()
        if isinstance(inner, Unknown):
            self.unknown = self.unknown or inner
            return 1
        return int(inner)


_COMPARE = {
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _wrap(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v
