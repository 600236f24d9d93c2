"""Bash word expansion, statically: parameter expansion, field splitting and patterns, as bash 5 does them.

A word's value is known text or ``Unknown`` (with the reason). Known values are computed exactly as bash
computes them: quoting, ``$@`` and arrays (one field per element), ``IFS`` (whitespace and non-whitespace
delimiters), the parameter operators (``:-`` ``:=`` ``#`` ``%`` ``/`` ``^^`` ...), patterns with bash's
bracket expressions and ``patsub_replacement``. What cannot be known is never guessed: an unknown value in
a quoted word is an unknown part of one field; unquoted, the number of fields is unknown too, and the whole
word is ``Unknown``. A construct this module does not model raises ``Unmodelled``.

``Words`` is a mixin: the evaluator provides the variables, the positional parameters and command
substitution (the abstract methods at the top).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from validator.sources.shell_parse import line_of, snippet, text


@dataclass(frozen=True)
class Unknown:
    """A value bash computes at run time; ``reason`` says what. ``nonempty``: known not to be empty
    (``$BASH_VERSION``), which is all a ``-n`` test needs."""

    reason: str
    nonempty: bool = False


@dataclass(frozen=True)
class Unsplit(Unknown):
    """An unquoted unknown: even how many words it becomes is known only at run time."""


Value = str | Unknown
Field = list[Value]  # one argv word: known text and unknown runs, e.g. ``--model-path=`` + Unknown
Fields = list[Field] | Unknown  # Unknown: even how many words is known only at run time


class Unmodelled(Exception):
    """A construct the reader does not model: the path's outcome is unresolved, never guessed."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(f"line {line}: {reason}")
        self.reason = reason
        self.line = line
        self.where: str | None = None  # the file (a sourced one), set where it is known


class Unbound(Exception):
    """``set -u`` and an unset variable: bash prints an error and the script exits."""


def join(parts: list[Value]) -> Value:
    """Concatenate parts; any unknown part makes the whole unknown (with the first reason)."""
    for p in parts:
        if isinstance(p, Unknown):
            return p
    return "".join(p for p in parts if isinstance(p, str))


@dataclass
class Seg:
    """A run of a word after expansion: ``quoted`` runs are neither split nor globbed; ``pattern`` runs
    (unquoted literal text) keep their backslashes for pattern matching."""

    value: Value
    quoted: bool
    literal: bool = False  # written in the script (an unquoted literal is not field-split)
    brk: bool = False  # a field boundary ("$@", "${A[@]}" between elements)


BREAK = Seg("", quoted=True, brk=True)
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WS = " \t\n"


def split_fields(segs: list[Seg], ifs: Value, *, glob: bool) -> Fields:
    """Field splitting (bash's rules for IFS whitespace and non-whitespace) and the pathname-expansion
    guard: an unquoted glob character makes the word unknown (what matches depends on the disk at run
    time); ``glob`` False is ``set -f``."""
    if isinstance(ifs, Unknown):
        if any(not s.quoted and not s.literal and s.value != "" for s in segs):
            return Unsplit(f"IFS is computed at run time ({ifs.reason})")
        ifs = _WS
    ws = "".join(c for c in ifs if c in _WS)
    fields: list[Field] = []
    cur: Field = []
    have = False
    for seg in segs:
        if seg.brk:
            if have:
                fields.append(cur)
            cur, have = [], False
            continue
        v = seg.value
        if isinstance(v, Unknown):
            if not seg.quoted and not seg.literal:
                return Unsplit(f"{v.reason} (unquoted: split into words at run time)")
            cur.append(v)
            have = True
            continue
        if seg.literal and not seg.quoted:
            if glob and _has_glob(v):
                return Unsplit(f"{v!r}: pathname expansion at run time")
            cur.append(_unescape_bare(v))
            have = True
            continue
        if seg.quoted or not ifs:
            if not seg.quoted and glob and _has_glob(v, escapes=False):
                return Unsplit(f"{v!r}: pathname expansion at run time")
            cur.append(v)
            have = have or seg.quoted or v != ""  # an unquoted empty expansion makes no word
            continue
        i = 0
        while i < len(v):
            c = v[i]
            if c in ifs:
                j = i
                while j < len(v) and v[j] in ws:
                    j += 1
                hard = j < len(v) and v[j] in ifs and v[j] not in ws
                if hard:
                    j += 1
                    while j < len(v) and v[j] in ws:
                        j += 1
                if hard or have:
                    fields.append(cur)
                    cur, have = [], False
                i = j
                continue
            if glob and c in "*?[" and _has_glob(v[i:], escapes=False):
                return Unsplit(f"{v!r}: pathname expansion at run time")
            cur.append(c)
            have = True
            i += 1
    if have:
        fields.append(cur)
    return [_merge(f) for f in fields]


def _merge(field: Field) -> Field:
    """Adjacent known text as one string (joined once: adding a character at a time to the last string
    made a 1 MB value, ``a=$a$a`` twenty times, take 46 s), unknown parts kept between."""
    out: Field = []
    run: list[str] = []
    for p in field:
        if isinstance(p, str):
            run.append(p)
            continue
        if run and (text := "".join(run)):
            out.append(text)
        run = []
        out.append(p)
    if run and (text := "".join(run)):
        out.append(text)
    return out or [""]


def _has_glob(v: str, *, escapes: bool = True) -> bool:
    i = 0
    while i < len(v):
        c = v[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c in "*?":
            return True
        if c == "[" and "]" in v[i + 2 :]:
            return True
        i += 1
    return False


def _unescape_bare(v: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            if v[i + 1] != "\n":
                out.append(v[i + 1])
            i += 2
            continue
        out.append(v[i])
        i += 1
    return "".join(out)


def _unescape_double(v: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v) and v[i + 1] in '$`"\\\n':
            if v[i + 1] != "\n":
                out.append(v[i + 1])
            i += 2
            continue
        out.append(v[i])
        i += 1
    return "".join(out)


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f"}
_ANSI |= {"v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(raw: str, line: int) -> str:
    body = raw[2:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _ANSI:
                raise Unmodelled(f"$'...' escape \\{nxt}", line)
            out.append(_ANSI[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


# -- patterns ---------------------------------------------------------------------------------------------

_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "xdigit": "0-9A-Fa-f",
    "blank": " \\t",
}


def glob_regex(pieces: list[tuple[Value, bool]], line: int) -> re.Pattern[str] | Unknown:
    """A bash pattern (``case``, ``[[ == ]]``, ``${v#p}``) as a regex: unquoted ``*`` ``?`` ``[...]`` are
    special, quoted text is literal. Extended globs and collating classes are not modelled."""
    out: list[str] = []
    for value, quoted in pieces:
        if isinstance(value, Unknown):
            return value
        if quoted:
            out.append(re.escape(value))
            continue
        i = 0
        while i < len(value):
            c = value[i]
            if c == "\\":
                out.append(re.escape(value[i + 1 : i + 2] or "\\"))
                i += 2
                continue
            if c in "@!+*?" and value[i + 1 : i + 2] == "(":
                raise Unmodelled(f"extended pattern {value!r}", line)
            if c == "*":
                out.append(".*")
            elif c == "?":
                out.append(".")
            elif c == "[":
                end, cls = _bracket(value, i, line)
                if cls is None:
                    out.append(re.escape("["))
                else:
                    out.append(cls)
                    i = end
            else:
                out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _bracket(v: str, start: int, line: int) -> tuple[int, str | None]:
    """``[...]`` at ``start``: (index of its ``]``, regex class), or (start, None) when it is literal."""
    i = start + 1
    neg = i < len(v) and v[i] in "!^"
    if neg:
        i += 1
    items: list[str] = []
    first = True
    while i < len(v):
        c = v[i]
        if c == "]" and not first:
            return i, f"[{'^' if neg else ''}{''.join(items)}]"
        first = False
        if c == "[" and v[i + 1 : i + 2] in (":", "=", "."):
            close = v.find(v[i + 1] + "]", i + 2)
            if close < 0:
                items.append(re.escape(c))
                i += 1
                continue
            name = v[i + 2 : close]
            if v[i + 1] != ":" or name not in _CLASSES:
                raise Unmodelled(f"bracket expression [{v[i + 1]}{name}{v[i + 1]}]", line)
            items.append(_CLASSES[name])
            i = close + 2
            continue
        if c == "\\" and i + 1 < len(v):
            items.append(re.escape(v[i + 1]))
            i += 2
            continue
        if i + 2 < len(v) and v[i + 1] == "-" and v[i + 2] != "]":
            lo, hi = c, v[i + 2]
            if hi == "\\" and i + 3 < len(v):
                hi = v[i + 3]
                i += 1
            if ord(lo) > ord(hi):
                raise Unmodelled(f"bracket range {lo}-{hi}", line)
            items.append(f"{re.escape(lo)}-{re.escape(hi)}")
            i += 3
            continue
        items.append(re.escape(c))
        i += 1
    return start, None


def strip_pattern(value: str, rx: re.Pattern[str], op: str) -> str:
    """``${v#p}`` ``${v##p}`` (shortest / longest prefix) and ``${v%p}`` ``${v%%p}`` (suffix)."""
    n = len(value)
    if op in ("#", "##"):
        for k in range(0, n + 1) if op == "#" else range(n, -1, -1):
            if rx.fullmatch(value[:k]):
                return value[k:]
        return value
    for k in range(n, -1, -1) if op == "%" else range(0, n + 1):
        if rx.fullmatch(value[k:]):
            return value[:k]
    return value


def substitute_pattern(value: str, rx: re.Pattern[str], rep: list[tuple[str, bool]], op: str) -> str:
    """``${v/p/r}`` (first, longest), ``//`` (all), ``/#`` (anchored at the start), ``/%`` (at the end).
    In the replacement an unquoted ``&`` is the matched text (bash 5.2's ``patsub_replacement``)."""

    def render(match: str) -> str:
        out: list[str] = []
        for t, quoted in rep:
            if quoted:
                out.append(t)
                continue
            i = 0
            while i < len(t):
                if t[i] == "\\" and i + 1 < len(t):
                    out.append(t[i + 1])
                    i += 2
                    continue
                out.append(match if t[i] == "&" else t[i])
                i += 1
        return "".join(out)

    n = len(value)
    if op == "/#":
        for k in range(n, -1, -1):
            if rx.fullmatch(value[:k]):
                return render(value[:k]) + value[k:]
        return value
    if op == "/%":
        for k in range(0, n + 1):
            if rx.fullmatch(value[k:]):
                return value[:k] + render(value[k:])
        return value
    out: list[str] = []
    i = 0
    while i <= n:
        for end in range(n, i - 1, -1):
            if rx.fullmatch(value[i:end]):
                if end == i:  # an empty match replaces nothing in bash
                    continue
                out.append(render(value[i:end]))
                if op == "/":
                    return "".join(out) + value[end:]
                i = end
                break
        else:
            if i < n:
                out.append(value[i])
            i += 1
    return "".join(out)


# -- the mixin --------------------------------------------------------------------------------------------

_SPECIAL_RUNTIME = {"$": "the shell's process id", "!": "the last background job", "_": "the last argument"}
_SPECIAL_RUNTIME["-"] = "the shell's flags"


class Words:
    """Word expansion over the evaluator's state (the methods below the line are the evaluator's)."""

    posix = False  # a #!/bin/sh script (see Evaluator.posix)

    # provided by the evaluator
    def scalar(self, name: str) -> Value | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def elements(self, name: str) -> list[tuple[str, Value]] | Unknown | None:  # pragma: no cover
        """An array's (key, value) pairs in bash's order; a scalar as element 0; None when unset."""
        raise NotImplementedError

    def element(self, name: str, key: str, node: Any) -> Value | None:  # pragma: no cover
        raise NotImplementedError

    def positional(self) -> list[Value] | Unknown:  # pragma: no cover
        raise NotImplementedError

    def set_scalar(self, name: str, value: Value, node: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def command_output(self, node: Any) -> Value:  # pragma: no cover
        raise NotImplementedError

    def arith(self, expr: str, node: Any) -> Value:  # pragma: no cover
        raise NotImplementedError

    def home(self, user: str) -> Value | None:  # pragma: no cover
        raise NotImplementedError

    def nounset(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    def noglob(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------------------

    def fields(self, node: Any) -> Fields:
        """The argv words one word node becomes (split, glob-guarded, quotes removed)."""
        segs = self.segments(node, quoted=False, first=True)
        ifs = self.scalar("IFS")
        return split_fields(segs, _WS if ifs is None else ifs, glob=not self.noglob())

    def value(self, node: Any, *, assignment: bool = False) -> Value:
        """One word without splitting or globbing (an assignment's value, a ``case`` subject, ``[[ ]]``)."""
        segs = self.segments(node, quoted=False, first=True, assignment=assignment)
        parts: list[Value] = []
        for k, s in enumerate(segs):
            if s.brk:
                parts.append(self._first_ifs())
            elif s.literal and not s.quoted and isinstance(s.value, str):
                parts.append(_unescape_bare(s.value))
            else:
                parts.append(s.value)
            del k
        return join(parts)

    def pattern(self, node: Any) -> re.Pattern[str] | Unknown:
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
                pieces.append((self._first_ifs(), True))
            else:
                pieces.append((s.value, s.quoted))
        return glob_regex(pieces, line_of(node))

    def _first_ifs(self) -> Value:
        ifs = self.scalar("IFS")
        if ifs is None:
            return " "
        return ifs if isinstance(ifs, Unknown) else ifs[:1]

    def segments(self, node: Any, *, quoted: bool, first: bool, assignment: bool = False) -> list[Seg]:
        if isinstance(node, _Raw):
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
            return [Seg(_ansi_c(text(node), line), quoted=True)]
        if t == "string":
            parts: list[Seg] = []
            inside = False
            for child in node.children:
                if child.type == '"':
                    continue
                inside = True
                if child.type == "string_content":
                    parts.append(Seg(_unescape_double(text(child)), quoted=True))
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

    def arith_text(self, node: Any, head: int, tail: int) -> Value:
        """An arithmetic node's expression with its ``$x``, ``${...}`` and ``$(...)`` expanded first, as
        bash does before it evaluates."""
        src = bytes(node.text)
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

    # -- parameters -------------------------------------------------------------------------------------

    def _param(self, name: str, index: str | None, quoted: bool, node: Any) -> list[Seg]:
        """``$name`` / ``${name[index]}`` with no operator, as segments (``$@`` and ``[@]`` give one per
        element, with field boundaries between them when quoted)."""
        many = name in ("@", "*") or index in ("@", "*")
        if not many:
            return [Seg(self._one(name, index, node), quoted=quoted)]
        star = name == "*" or index == "*"
        values = self._many(name, index, node)
        if isinstance(values, Unknown):  # how many words, too, is unknown
            if quoted and star:
                return [Seg(values, quoted=True)]
            return [Seg(Unsplit(values.reason), quoted=False)]
        if star and quoted:
            sep = self._first_ifs()
            return [Seg(join(_interleave(values, sep)), quoted=True)]
        ifs = self.scalar("IFS")
        if not quoted and ifs != "":
            # unquoted, bash joins the elements with IFS's first character and splits the result (so an
            # empty element is a word when IFS holds a non-blank delimiter)
            sep = self._first_ifs()
            return [Seg(join(_interleave(values, sep)), quoted=False)]
        out: list[Seg] = []
        for k, v in enumerate(values):
            if k:
                out.append(BREAK)
            out.append(Seg(v, quoted=quoted))
        return out

    def _many(self, name: str, index: str | None, node: Any) -> list[Value] | Unknown:
        if name in ("@", "*"):
            return self.positional()
        els = self.elements(name)
        if els is None:  # bash 5 exempts ${A[@]} from set -u, as it does "$@"
            return []
        return els if isinstance(els, Unknown) else [v for _, v in els]

    def _one(self, name: str, index: str | None, node: Any) -> Value:
        found = self._lookup(name, index, node)
        if found is None:
            if self.nounset():
                raise Unbound(name)
            return ""
        return found

    def _lookup(self, name: str, index: str | None, node: Any) -> Value | None:
        if index is not None:
            return self.element(name, index, node)
        if name == "#":
            pos = self.positional()
            return pos if isinstance(pos, Unknown) else str(len(pos))
        if name.isdigit() and name != "0":
            pos = self.positional()
            if isinstance(pos, Unknown):
                return pos
            k = int(name)
            return pos[k - 1] if k <= len(pos) else None
        if name in _SPECIAL_RUNTIME:
            return Unknown(f"${name}: {_SPECIAL_RUNTIME[name]}, known only at run time")
        return self.scalar(name)

    def _braced(self, node: Any, quoted: bool) -> list[Seg]:
        kids = [c for c in node.children if c.type not in ("${", "}")]
        line = line_of(node)
        if not kids:
            raise Unmodelled("${}", line)
        if self.posix:
            ops = [
                text(c) for c in kids[1:] if c.type not in ("word", "string", "raw_string", "concatenation")
            ]
            posix_ops = {":-", "-", ":=", "=", ":?", "?", ":+", "+", "#", "##", "%", "%%"}
            if (
                kids[0].type in ("!", "subscript")
                or any(c.type == "subscript" for c in kids)
                or (kids[0].type != "#" and ops and ops[0] not in posix_ops)
            ):
                raise Unmodelled(f"{snippet(node)} in a /bin/sh script (bash's)", line)
        head = kids[0]
        if head.type == "#" and len(kids) == 2:  # ${#V} ${#A[@]}
            name, index = self._name(kids[1], line)
            if index in ("@", "*") and self.elements(name) is None and self.nounset():
                raise Unbound(f"{name}[{index}]")  # unlike ${A[@]}, ${#A[@]} is not exempt from set -u
            if index in ("@", "*") or (name in ("@", "*") and index is None):
                values = self._many(name, index, node)
                return [Seg(values if isinstance(values, Unknown) else str(len(values)), quoted=quoted)]
            v = self._one(name, index, node)
            return [Seg(v if isinstance(v, Unknown) else str(len(v)), quoted=quoted)]
        if head.type == "!" and len(kids) == 2:  # ${!v} ${!A[@]}
            name, index = self._name(kids[1], line)
            if index in ("@", "*"):
                els = self.elements(name)
                keys: list[Value] = (
                    [] if els is None else [k for k, _ in els] if isinstance(els, list) else []
                )
                if isinstance(els, Unknown):
                    return [Seg(els, quoted=quoted)]
                if index == "*" and quoted:
                    return [Seg(join(_interleave(keys, self._first_ifs())), quoted=True)]
                out: list[Seg] = []
                for k, key in enumerate(keys):
                    if k:
                        out.append(BREAK)
                    out.append(Seg(key, quoted=quoted))
                return out
            target = self._one(name, index, node)
            return [Seg(self._indirect(target, node), quoted=quoted)]
        if head.type == "!" and len(kids) > 2:  # ${!v:-d}: indirection, then the operator
            name, index = self._name(kids[1], line)
            target = self._one(name, index, node)
            return self._operate(kids[2:], self._indirect_raw(target, node), None, quoted, node)
        name, index = self._name(head, line)
        if len(kids) == 1:
            return self._param(name, index, quoted, node)
        if name in ("@", "*") or index in ("@", "*"):
            raise Unmodelled(f"operator on a list: {snippet(node)}", line)
        return self._operate(kids[1:], self._lookup(name, index, node), name, quoted, node)

    def _name(self, node: Any, line: int) -> tuple[str, str | None]:
        if node.type in ("variable_name", "special_variable_name"):
            return text(node), None
        if node.type == "number":
            return text(node), None
        if node.type == "subscript":
            name = text(node.child_by_field_name("name"))
            index_node = node.child_by_field_name("index")
            raw = text(index_node)
            if raw in ("@", "*"):
                return name, raw
            idx = self.value(index_node)
            if isinstance(idx, Unknown):
                raise Unmodelled(f"array index computed at run time: {snippet(node)}", line)
            return name, idx
        raise Unmodelled(f"parameter {text(node)!r}", line)

    def _indirect_raw(self, target: Value, node: Any) -> Value | None:
        if isinstance(target, Unknown):
            return target
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.*)\])?|([0-9]+|[@*#?$!-])", target)
        if m is None:
            raise Unmodelled(
                f"${{!...}} names {target!r}, not a variable (bash: invalid indirect)", line_of(node)
            )
        if m.group(2) is not None:
            raise Unmodelled(f"${{!...}} names an array element {target!r}", line_of(node))
        return self._lookup(m.group(1) or m.group(3), None, node)

    def _indirect(self, target: Value, node: Any) -> Value:
        found = self._indirect_raw(target, node)
        if found is None:
            if self.nounset():
                raise Unbound(str(target))
            return ""
        return found

    def _operate(
        self, kids: list[Any], current: Value | None, name: str | None, quoted: bool, node: Any
    ) -> list[Seg]:
        line = line_of(node)
        op = text(kids[0])
        operands = kids[1:]
        close = node.children[-1]
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            operands = self._checked(node, kids[0], operands, close)
            if isinstance(current, Unknown) and not (op.startswith(":") and current.nonempty):
                return [Seg(current, quoted=quoted)]
            empty = current is None or (op.startswith(":") and current == "")
            if op in (":+", "+"):
                return self._operand(operands, quoted) if not empty else [Seg("", quoted=quoted)]
            if not empty:
                assert current is not None
                return [Seg(current, quoted=quoted)]
            if op in (":?", "?"):
                raise Unbound(f"{name}: {op} says the script stops here")
            segs = self._operand(operands, quoted)
            if op in (":=", "="):
                if name is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    raise Unmodelled(f"{snippet(node)}: assigning through an indirection", line)
                value = self._join_segs(segs)
                self.set_scalar(name, value, node)
                return [Seg(value, quoted=quoted)]
            return segs
        if current is None:
            if self.nounset():
                raise Unbound(str(name))
            current = ""
        if op in ("#", "##", "%", "%%", "/", "//", "/#", "/%"):
            pat_nodes, rep_nodes = operands, []
            cut = (
                next((k for k, c in enumerate(operands) if c.type == "/"), None)
                if op.startswith("/")
                else None
            )
            if cut is not None:
                pat_nodes = self._checked(node, kids[0], operands[:cut], operands[cut])
                rep_nodes = self._checked(node, operands[cut], operands[cut + 1 :], close)
            else:
                pat_nodes = self._checked(node, kids[0], operands, close)
            if quoted and any(_quoting(c) for c in [*pat_nodes, *rep_nodes]):
                raise Unmodelled(f"quotes inside a double-quoted {snippet(node)}", line)
            rx = self._pattern_of(pat_nodes, line)
            if isinstance(current, Unknown):
                return [Seg(current, quoted=quoted)]
            if isinstance(rx, Unknown):
                return [Seg(rx, quoted=quoted)]
            if op.startswith("/"):
                rep = self._pieces(rep_nodes, quoted=True)
                if any(isinstance(v, Unknown) for v, _ in rep):
                    return [Seg(next(v for v, _ in rep if isinstance(v, Unknown)), quoted=quoted)]
                known = [(v, q) for v, q in rep if isinstance(v, str)]
                if rx.pattern == "":
                    return [Seg(current, quoted=quoted)]
                return [Seg(substitute_pattern(current, rx, known, op), quoted=quoted)]
            return [Seg(strip_pattern(current, rx, op), quoted=quoted)]
        if op in ("^^", ",,", "^", ",") and not operands:
            if isinstance(current, Unknown):
                return [Seg(current, quoted=quoted)]
            if op == "^^":
                return [Seg(_upper(current), quoted=quoted)]
            if op == ",,":
                return [Seg(_lower(current), quoted=quoted)]
            first = current[:1]
            first = _upper(first) if op == "^" else _lower(first)
            return [Seg(first + current[1:], quoted=quoted)]
        if op == ":":
            return [Seg(self._substring(current, operands, node), quoted=quoted)]
        raise Unmodelled(f"parameter operator {op!r} in {snippet(node)}", line)

    def _checked(self, node: Any, after: Any, operands: list[Any], before: Any) -> list[Any]:
        """The operand nodes between ``after`` and ``before``, if they cover that source exactly; the
        grammar sometimes drops a blank (``${v%% *}`` reads as ``*``): then the raw text, when it holds no
        quote or expansion, is a literal word; else the construct is not modelled."""
        raw = bytes(node.text)[after.end_byte - node.start_byte : before.start_byte - node.start_byte]
        if b"".join(bytes(c.text) for c in operands) == raw and (
            not operands
            or (operands[0].start_byte == after.end_byte and operands[-1].end_byte == before.start_byte)
        ):
            return operands
        if any(c in raw for c in b"$`'\\\""):
            raise Unmodelled(f"the operand of {snippet(node)} (the grammar misreads it)", line_of(node))
        return [_Raw(raw.decode("utf-8", "surrogateescape"))]

    def _substring(self, current: Value, operands: list[Any], node: Any) -> Value:
        parts = [c for c in operands if c.type != ":"]
        if len(parts) not in (1, 2) or text(node).count(":") != len(parts):
            raise Unmodelled(f"substring {snippet(node)}", line_of(node))
        nums: list[int] = []
        for p in parts:
            v = self.arith(text(p), node)
            if isinstance(v, Unknown):
                return v
            nums.append(int(v))
        if isinstance(current, Unknown):
            return current
        n = len(current)
        off = nums[0] if nums[0] >= 0 else max(n + nums[0], -1)
        if off < 0 or off > n:
            return ""
        if len(nums) == 1:
            return current[off:]
        ln = nums[1]
        if ln < 0:
            end = n + ln
            if end < off:
                raise Unmodelled(f"substring length below the offset: {snippet(node)}", line_of(node))
            return current[off:end]
        return current[off : off + ln]

    def _operand(self, operands: list[Any], quoted: bool) -> list[Seg]:
        out: list[Seg] = []
        for k, child in enumerate(operands):
            if not isinstance(child, _Raw) and child.type == "regex":
                raise Unmodelled(f"operand {text(child)!r}", line_of(child))
            out += self.segments(child, quoted=quoted, first=k == 0)
        return out or [Seg("", quoted=quoted)]

    def _join_segs(self, segs: list[Seg]) -> Value:
        return join(
            [
                (
                    _unescape_bare(s.value)
                    if s.literal and not s.quoted and isinstance(s.value, str)
                    else s.value
                )
                for s in segs
            ]
        )

    def _pieces(self, nodes: list[Any], *, quoted: bool) -> list[tuple[Value, bool]]:
        pieces: list[tuple[Value, bool]] = []
        for child in nodes:
            if isinstance(child, _Raw):
                pieces.append((child.raw, False))
                continue
            if child.type == "regex":
                raw = text(child)
                if any(c in raw for c in "$`'\"\\"):
                    return [(Unknown(f"pattern {raw!r} (quoted or expanded inside ${{...}})"), True)]
                pieces.append((raw, False))
                continue
            for s in self.segments(child, quoted=False, first=False):
                pieces.append((s.value, s.quoted))
        return pieces

    def _pattern_of(self, nodes: list[Any], line: int) -> re.Pattern[str] | Unknown:
        return glob_regex(self._pieces(nodes, quoted=False), line)


@dataclass
class _Raw:
    """Operand text taken from the source itself (see ``Words._checked``): a literal, unquoted word."""

    raw: str
    type: str = "raw"


def _quoting(node: Any) -> bool:
    """A node that is or holds quoting (whose meaning inside a double-quoted ``${v#p}`` is subtle)."""
    if isinstance(node, _Raw):
        return False
    if node.type in ("raw_string", "ansi_c_string", "string", "translated_string"):
        return True
    return any(_quoting(c) for c in node.children)


def _interleave(values: list[Value], sep: Value) -> list[Value]:
    out: list[Value] = []
    for k, v in enumerate(values):
        if k:
            out.append(sep)
        out.append(v)
    return out


def _upper(s: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in s)


def _lower(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def _brace_expansion(raw: str) -> bool:
    """An unquoted ``{a,b}`` or ``{1..3}``: brace expansion, not modelled."""
    return bool(re.search(r"(?<!\$)\{[^{}]*(,|\.\.)[^{}]*\}", raw))
