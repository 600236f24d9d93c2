"""Bash word expansion, statically, as bash 5 does it: a word's syntax (quotes, concatenations, ``~``,
``$'...'``, ``$(...)``, ``$((...))``) walked into runs of text, parameter expansions handed to
``params``, then split into argv words by ``fields``, or read as one value, or as a pattern.

A word's value is known text or ``Unknown`` (with the reason). What cannot be known is never guessed: an
unknown value in a quoted word is an unknown part of one field; unquoted, the number of fields is unknown
too, and the whole word is ``Unknown``. A construct this module does not model raises ``Unmodelled``.

``Words`` is a mixin: the evaluator provides the variables (through ``Parameters``), command substitution,
arithmetic, ``~`` and ``set -f`` (the abstract methods at the top).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from validator.sources.shell.fields import WS, Seg, ansi_c, split_fields, unescape_bare, unescape_double
from validator.sources.shell.params import Operand, Parameters, RawOperand
from validator.sources.shell.patterns import glob_regex
from validator.sources.shell.syntax import line_of, node_bytes, snippet, text
from validator.sources.shell.values import Fields, Unknown, Unmodelled, Value, join

_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class Words(Parameters):
    """Word expansion over the evaluator's state."""

    # provided by the evaluator
    def command_output(self, node: Node) -> Value:  # pragma: no cover
        raise NotImplementedError

    def home(self, user: str) -> Value | None:  # pragma: no cover
        raise NotImplementedError

    def noglob(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------------------

    def fields(self, node: Node) -> Fields:
        """The argv words one word node becomes (split, glob-guarded, quotes removed)."""
        segs = self.segments(node, quoted=False, first=True)
        ifs = self.scalar("IFS")
        return split_fields(segs, WS if ifs is None else ifs, glob=not self.noglob())

    def value(self, node: Node, *, assignment: bool = False) -> Value:
        """One word without splitting or globbing (an assignment's value, a ``case`` subject, ``[[ ]]``)."""
        segs = self.segments(node, quoted=False, first=True, assignment=assignment)
        parts: list[Value] = []
        for k, s in enumerate(segs):
            if s.brk:
                parts.append(self.first_ifs())
            elif s.literal and not s.quoted and isinstance(s.value, str):
                parts.append(unescape_bare(s.value))
            else:
                parts.append(s.value)
            del k
        return join(parts)

    def pattern(self, node: Node) -> re.Pattern[str] | Unknown:
        """A word as a pattern: its quoted runs literal, the rest special."""
        if node.type == "regex":  # the grammar's name for an unquoted [[ $v == pattern ]] operand
            raw = text(node)
            if any(c in raw for c in "$`'\"\\ "):
                raise Unmodelled(f"the pattern {raw!r}", line_of(node))
            return glob_regex([(raw, False)], line_of(node))
        segs = self.segments(node, quoted=False, first=False)
        pieces: list[tuple[Value, bool]] = []
        for s in segs:
            if s.brk:
                pieces.append((self.first_ifs(), True))
            else:
                pieces.append((s.value, s.quoted))
        return glob_regex(pieces, line_of(node))

    def segments(self, node: Operand, *, quoted: bool, first: bool, assignment: bool = False) -> list[Seg]:
        if isinstance(node, RawOperand):
            return [Seg(node.raw, quoted=quoted, literal=not quoted)]
        t = node.type
        line = line_of(node)
        if t in ("word", "number", "extglob_pattern", "variable_name"):
            raw = text(node)
            if quoted:
                return [Seg(raw, quoted=True)]
            if (
                self.posix
                and ("~" in raw)
                and (assignment or _ASSIGNMENT_WORD.match(raw))
                and not raw.startswith("~")
            ):
                raise Unmodelled(f"~ inside {raw!r} in a /bin/sh script", line)
            if first and not assignment and _ASSIGNMENT_WORD.match(raw) and ("=~" in raw or ":~" in raw):
                # bash expands ~ after = and : also in an argument that looks like an assignment
                name, _, rest = raw.partition("=")
                return [Seg(name + "=", quoted=False, literal=True), *self._tilde(rest, True, line)]
            if first and (raw.startswith("~") or (assignment and ":~" in raw)):
                return self._tilde(raw, assignment, line)
            if _brace_expansion(raw):
                raise Unmodelled(f"brace expansion {raw!r}", line)
            return [Seg(raw, quoted=False, literal=True)]
        if self.posix and t in ("ansi_c_string", "translated_string"):
            raise Unmodelled("$'...' in a /bin/sh script", line)
        if t in ("raw_string", "ansi_c_string") and quoted:
            # inside "${v:-'x'}" single quotes are ordinary characters: bash keeps them
            return [Seg(text(node), quoted=True)]
        if t == "raw_string":
            return [Seg(text(node)[1:-1], quoted=True)]
        if t == "ansi_c_string":
            return [Seg(ansi_c(text(node), line), quoted=True)]
        if t == "string":
            parts: list[Seg] = []
            inside = False
            for child in node.children:
                if child.type == '"':
                    continue
                inside = True
                if child.type == "string_content":
                    parts.append(Seg(unescape_double(text(child)), quoted=True))
                else:
                    parts += self.segments(child, quoted=True, first=False)
            # "" is one empty word; "$@" with no parameters (or "${A[@]}" of no elements) is none
            return parts if inside else [Seg("", quoted=True)]
        if t == "translated_string":
            raise Unmodelled('$"..." (a translated string)', line)
        if t == "concatenation":
            out: list[Seg] = []
            for k, child in enumerate(node.children):
                out += self.segments(child, quoted=quoted, first=first and k == 0, assignment=assignment)
            return out
        if t == "simple_expansion":
            name = text(node.children[-1])
            if len(node.children) != 2:
                raise Unmodelled(f"expansion {text(node)!r}", line)
            return self._param(name, None, quoted, node)
        if t == "expansion":
            return self._braced(node, quoted)
        if t == "command_substitution":
            return [Seg(self.command_output(node), quoted=quoted)]
        if t == "arithmetic_expansion":
            inner = self.arith_text(node, 3, 2)
            if isinstance(inner, Unknown):
                return [Seg(inner, quoted=quoted)]
            return [Seg(self.arith(inner, node), quoted=quoted)]
        if t == "process_substitution":
            return [Seg(Unknown(f"{snippet(node)}: a process substitution"), quoted=quoted)]
        raise Unmodelled(f"{t.replace('_', ' ')} {snippet(node)!r}", line)

    def arith_text(self, node: Node, head: int, tail: int) -> Value:
        """An arithmetic node's expression with its ``$x``, ``${...}`` and ``$(...)`` expanded first, as
        bash does before it evaluates."""
        src = node_bytes(node)
        spans: list[tuple[int, int, Value]] = []
        stack = list(node.children)
        while stack:
            c = stack.pop()
            if c.type in ("simple_expansion", "expansion", "command_substitution"):
                spans.append((c.start_byte - node.start_byte, c.end_byte - node.start_byte, self.value(c)))
            else:
                stack.extend(c.children)
        out = src
        for start, end, v in sorted(spans, key=lambda s: s[0], reverse=True):
            if isinstance(v, Unknown):
                return v
            out = out[:start] + v.encode("utf-8", "surrogateescape") + out[end:]
        return out[head : len(out) - tail].decode("utf-8", "surrogateescape")

    def _tilde(self, raw: str, assignment: bool, line: int) -> list[Seg]:
        pieces = raw.split(":") if assignment else [raw]
        out: list[Seg] = []
        for k, piece in enumerate(pieces):
            if k:
                out.append(Seg(":", quoted=False, literal=True))
            if piece.startswith("~"):
                user, slash, rest = piece[1:].partition("/")
                if any(c in user for c in "\\$`'\"*?["):
                    out.append(Seg(piece, quoted=False, literal=True))
                    continue
                home = self.home(user)
                if home is None:
                    out.append(Seg(piece, quoted=False, literal=True))
                    continue
                if isinstance(home, str) and (slash or rest):
                    home = home.rstrip("/") or "/"
                    if home == "/":
                        home = ""
                out.append(Seg(home, quoted=True))
                if slash or rest:
                    out.append(Seg(slash + rest, quoted=False, literal=True))
            else:
                out.append(Seg(piece, quoted=False, literal=True))
        return out


def _brace_expansion(raw: str) -> bool:
    """An unquoted ``{a,b}`` or ``{1..3}``: brace expansion, not modelled."""
    return bool(re.search(r"(?<!\$)\{[^{}]*(,|\.\.)[^{}]*\}", raw))
