"""A safe reader for the Python reprs SGLang logs: literals, and ``Name(key=value, ...)`` records.

``server_args=`` is the dict's repr or the ``ServerArgs(...)`` dataclass repr, neither reliably
``literal_eval``-able (a call; ``<function f at 0x...>``). Nothing is evaluated: a small recursive-descent
parser reads literals, records as dicts of their keywords, and keeps anything else as an :class:`Unresolved`
text, going on after it, so one odd field never hides the others.
"""

from __future__ import annotations

import ast
import re

MAX_DEPTH = 32  # nesting deeper than this is kept as text (a hostile line cannot exhaust the stack)

_WS = re.compile(r"\s*")
_STRING = re.compile(r"""(?:[rRbBuU]{1,2})?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")""")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w.])")
_NAME = re.compile(r"[A-Za-z_][\w.]*")
_KEYWORD = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)")
_CONSTANTS: dict[str, object] = {
    "None": None,
    "True": True,
    "False": False,
    "inf": float("inf"),
    "nan": float("nan"),
}
_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}


class Unresolved(str):
    """A value whose repr is not a literal (kept as its text; never evaluated)."""

    __slots__ = ()


class _Fail(Exception):
    """The text is not a repr this reader knows at this point."""


class _Spent(Exception):
    """Unknown text was re-scanned past the reader's budget: give up on the whole text."""


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        # each nesting level that fails re-scans its unknown text; bounded, so that a pathological line
        # (400 KB of unclosed brackets) costs a few passes over it, not one per level
        self.budget = 4 * len(text) + 4096

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]  # \s* always matches

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise _Fail
        self.pos += 1

    def value(self, depth: int) -> object:
        """One value; on text it does not know, the raw text up to the next separator (Unresolved)."""
        start = self.pos
        try:
            return self._value(depth)
        except _Fail:
            self.pos = start
            return self._skip_unknown()

    def _value(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise _Fail
        ch = self.peek()
        text, pos = self.text, self.pos
        if ch and ch in "{[(":  # "" (the end of the text) is in every string
            return self._container(ch, depth)
        if (m := _STRING.match(text, pos)) is not None:
            self.pos = m.end()
            try:
                value: object = ast.literal_eval(m.group())  # one string literal: a constant, never code
            except (ValueError, SyntaxError):
                raise _Fail from None
            while (m2 := _STRING.match(text, _WS.match(text, self.pos).end())) is not None:  # type: ignore[union-attr]
                try:  # implicit concatenation ('a' 'b'), as Python reads it
                    more = ast.literal_eval(m2.group())
                except (ValueError, SyntaxError):
                    raise _Fail from None
                if type(more) is not type(value):
                    raise _Fail
                value = value + more  # type: ignore[operator]
                self.pos = m2.end()
            return value
        if (m := _NUMBER.match(text, pos)) is not None:
            self.pos = m.end()
            token = m.group()
            try:
                return float(token) if any(c in token for c in ".eE") else int(token)
            except ValueError:
                raise _Fail from None
        if (m := _NAME.match(text, pos)) is not None:
            name = m.group()
            after = _WS.match(text, m.end()).end()  # type: ignore[union-attr]
            if after < len(text) and text[after] == "(":
                self.pos = after
                return self.record(depth)
            if name in _CONSTANTS:
                self.pos = m.end()
                return _CONSTANTS[name]
        raise _Fail

    def record(self, depth: int) -> dict[str, object]:
        """``Name(key=value, ...)`` at ``(``: its keywords (a positional argument makes it unknown)."""
        self.expect("(")
        out: dict[str, object] = {}
        while True:
            if self.peek() == ")":
                self.pos += 1
                return out
            m = _KEYWORD.match(self.text, self.pos)
            if m is None:
                raise _Fail
            self.pos = m.end()
            self.ws()
            out.setdefault(m.group(1), self.value(depth + 1))
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != ")":
                raise _Fail

    def _container(self, open_ch: str, depth: int) -> object:
        close = _OPEN[open_ch]
        self.pos += 1
        items: list[object] = []
        pairs: dict[object, object] = {}
        saw_comma = False
        while self.peek() != close:
            item = self.value(depth + 1)
            if open_ch == "{" and not items and self.peek() == ":":  # a dict's key
                self.pos += 1
                self.ws()
                try:
                    pairs.setdefault(item, self.value(depth + 1))
                except TypeError:  # an unhashable key: not a dict this reader can hold
                    raise _Fail from None
            elif pairs:  # a dict's entries, then a bare item
                raise _Fail
            else:
                items.append(item)
            if self.peek() == ",":
                self.pos += 1
                saw_comma = True
            elif self.peek() != close:
                raise _Fail
        self.pos += 1
        if open_ch == "{":
            if not items:
                return pairs
            try:
                return set(items)
            except TypeError:
                raise _Fail from None
        if open_ch == "(":
            return tuple(items) if saw_comma or not items else items[0]
        return items

    def _skip_unknown(self) -> Unresolved:
        """Text up to the next ``,`` or closing bracket at this level, brackets and quotes balanced."""
        text = self.text
        start = self.pos
        stack: list[str] = []
        i = start
        while i < len(text):
            ch = text[i]
            if ch in "'\"":
                m = _STRING.match(text, i)
                i = m.end() if m is not None else i + 1
                continue
            if ch in _OPEN:
                stack.append(_OPEN[ch])
            elif stack and ch == stack[-1]:
                stack.pop()
            elif not stack and ch in ",)]}:":
                break
            i += 1
        self.budget -= i - start
        if self.budget < 0:
            raise _Spent
        if i == start:
            raise _Fail
        self.pos = i
        return Unresolved(text[start:i].strip())


def parse_repr(text: str) -> object:
    """The value ``text`` holds, read safely; raises ValueError when it is not one whole repr."""
    reader = _Reader(text)
    try:
        value = reader.value(0)
    except (_Fail, _Spent):
        raise ValueError("not a repr this reader knows") from None
    reader.ws()
    if reader.pos != len(text):
        raise ValueError(f"unexpected text at {reader.pos}")
    return value
