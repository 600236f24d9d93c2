"""POSIX shell words, evaluated statically: the part of a shell that decides a launch command.

Why a real parser: a launcher script (``start.sh``) or a ``--launch-cmd`` string is shell, and the words the
server gets depend on quoting (``"$SPEC"`` is one word, ``$SPEC`` several), on ``~`` (expanded only where it
starts a word or follows ``=``/``:`` in an assignment) and on ``${VAR:-default}``. ``shlex`` cannot tell a
quoted ``~`` from a bare one, and bashlex (the first candidate) stops with ``NotImplementedError`` on
``case`` and keeps no quoting in its word nodes. tree-sitter-bash is a complete bash grammar, maintained,
with wheels for aarch64 (DGX Spark) and x86-64: its concrete tree keeps every quote and expansion, so this
module can apply the shell's own rules (tilde, parameter expansion, field splitting) word by word.

Values that only exist at run time (``$1``, ``$(nvidia-smi ...)``, ``read``) are ``Unknown`` with the
reason, never a guess: callers report them.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from validator.errors import InputError

MAX_SCRIPT_BYTES = 1 << 20  # launcher scripts are a few KB; a bigger file is not one


@dataclass(frozen=True)
class Unknown:
    """A value the shell computes at run time; ``reason`` says what (``$1: a positional parameter``)."""

    reason: str


Value = str | Unknown
# One field (argv word) as parts: known text and unknown runs, e.g. ``--model-path=`` + Unknown.
Field = list[Value]
Lookup = Callable[[str], Value | None]
Substitution = Callable[[Any], Value]


def parse(source: bytes, where: str) -> Any:
    """The tree-sitter tree of ``source``; a syntax error raises InputError naming the line."""
    import tree_sitter
    import tree_sitter_bash

    if len(source) > MAX_SCRIPT_BYTES:
        raise InputError(where, f"larger than {MAX_SCRIPT_BYTES} bytes: not a launcher script")
    if b"\x00" in source:
        raise InputError(
            where, "NUL byte: not a shell script", source.count(b"\n", 0, source.index(b"\x00")) + 1
        )
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    tree = parser.parse(source)
    deep = _too_deep(tree)
    if deep is not None:
        raise InputError(where, f"nested deeper than {MAX_NESTING} levels: not a launcher script", deep)
    bad = _first_error(tree.root_node)
    if bad is not None:
        raise InputError(where, f"shell syntax error near {_text(bad)[:40]!r}", bad.start_point[0] + 1)
    return tree


MAX_NESTING = 200  # syntax-tree depth; the evaluator recurses along it


def _too_deep(tree: Any) -> int | None:
    """The line where the tree first gets deeper than MAX_NESTING (walked iteratively), else None."""
    cursor = tree.walk()
    depth = 0
    while True:
        if depth > MAX_NESTING:
            return int(cursor.node.start_point[0]) + 1
        if cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return None
            depth -= 1


def _first_error(node: Any) -> Any | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    if not node.has_error:
        return None
    for child in node.children:
        found = _first_error(child)
        if found is not None:
            return found
    return node


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", "replace")


def line_of(node: Any) -> int:
    return int(node.start_point[0]) + 1


def home_of(user: str, env: Mapping[str, str]) -> str | None:
    """``~`` (``user`` empty: $HOME, else the password database) or ``~user``."""
    if not user:
        home = env.get("HOME")
        if home:
            return home
        try:
            return pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return None
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None


def expand_tilde(text: str, env: Mapping[str, str], *, assignment: bool = False) -> str:
    """Tilde expansion of an unquoted word start (POSIX 2.6.1); in an assignment value also after each ``:``.
    An unknown ``~user`` stays as written, as in bash."""
    pieces = text.split(":") if assignment else [text]
    out = []
    for piece in pieces:
        if piece.startswith("~"):
            user, slash, rest = piece[1:].partition("/")
            home = home_of(user, env) if "\\" not in user else None
            if home is not None:
                piece = home.rstrip("/") + slash + rest if (slash or rest) else home
        out.append(piece)
    return ":".join(out)


def _unescape(text: str, escapable: str | None) -> str:
    """Backslash removal: outside quotes (``escapable`` None) ``\\x`` is ``x``; inside double quotes only
    the characters in ``escapable`` are escaped. A backslash-newline disappears in both."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and (escapable is None or text[i + 1] in escapable):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _unescape_bare(text: str) -> str:
    return _unescape(text, None)


def _unescape_double(text: str) -> str:
    return _unescape(text, '$`"\\\n')


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "v": "\v"}


def _ansi_c(text: str) -> str:
    body = text[2:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ANSI.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


@dataclass
class _Seg:
    value: Value
    quoted: bool  # no field splitting (and, for literal text, no tilde expansion)
    literal: bool = False  # text written in the script (not the result of an expansion)


class WordExpander:
    """Expands word nodes with a variable lookup; ``substitute`` evaluates ``$(...)``."""

    def __init__(self, lookup: Lookup, env: Callable[[], Mapping[str, str]], substitute: Substitution):
        self.lookup = lookup
        self.env = env
        self.substitute = substitute

    # -- one word -> fields ---------------------------------------------------------------------------

    def fields(self, node: Any) -> list[Field]:
        """The fields a word node expands to (unquoted expansions split at whitespace)."""
        segs = self._segments(node, quoted=False, first=True)
        fields: list[Field] = []
        current: Field = []
        started = False
        for seg in segs:
            if isinstance(seg.value, Unknown) or seg.quoted or seg.literal:
                current.append(seg.value)
                started = True
                continue
            text = seg.value
            if not text:
                continue
            pieces = text.split()
            if text[0].isspace() and (current or started):
                fields.append(current)
                current, started = [], False
            for k, piece in enumerate(pieces):
                if k > 0:
                    fields.append(current)
                    current = []
                current.append(piece)
                started = True
            if text[-1].isspace() and pieces:
                fields.append(current)
                current, started = [], False
        if started or current:
            fields.append(current)
        return [f for f in fields if f or started]

    def value(self, node: Any, *, assignment: bool = False) -> Value:
        """One word without field splitting (an assignment's value, a ``case`` subject, a test operand)."""
        segs = self._segments(node, quoted=False, first=True, assignment=assignment)
        return join([s.value for s in segs])

    # -- the expansions -------------------------------------------------------------------------------

    def _segments(self, node: Any, *, quoted: bool, first: bool, assignment: bool = False) -> list[_Seg]:
        t = node.type
        if t in ("word", "number"):
            text = _text(node)
            if not quoted and first and (text.startswith("~") or (assignment and ":~" in text)):
                text = expand_tilde(text, self.env(), assignment=assignment)
            return [_Seg(_unescape_bare(text), quoted=False, literal=True)]
        if t == "raw_string":
            return [_Seg(_text(node)[1:-1], quoted=True)]
        if t == "ansi_c_string":
            return [_Seg(_ansi_c(_text(node)), quoted=True)]
        if t == "string":
            parts: list[_Seg] = []
            for child in node.children:
                if child.type == '"':
                    continue
                if child.type == "string_content":
                    parts.append(_Seg(_unescape_double(_text(child)), quoted=True))
                else:
                    parts += [
                        _Seg(s.value, quoted=True) for s in self._segments(child, quoted=True, first=False)
                    ]
            return parts or [_Seg("", quoted=True)]
        if t == "translated_string":  # $"..." is "..." outside a translated locale
            return self._segments(node.children[-1], quoted=quoted, first=False)
        if t == "concatenation":
            out: list[_Seg] = []
            for k, child in enumerate(node.children):
                out += self._segments(child, quoted=quoted, first=first and k == 0, assignment=assignment)
            return out
        if t == "simple_expansion":
            return [_Seg(self._simple(node), quoted=quoted)]
        if t == "expansion":
            return [_Seg(self._braced(node, quoted), quoted=quoted)]
        if t == "command_substitution":
            return [_Seg(self.substitute(node), quoted=quoted)]
        if t == "arithmetic_expansion":
            return [_Seg(Unknown(f"{_text(node)}: arithmetic is not evaluated statically"), quoted=quoted)]
        if t == "process_substitution":
            return [_Seg(Unknown(f"{_text(node)}: a process substitution"), quoted=quoted)]
        return [_Seg(_unescape_bare(_text(node)), quoted=quoted, literal=True)]

    def _simple(self, node: Any) -> Value:
        name_node = node.children[-1]
        return self._var(_text(name_node))

    def _var(self, name: str) -> Value:
        if name in ("@", "*", "#") or (name.isdigit() and name != "0"):
            what = "the script's arguments" if name in ("@", "*", "#") else "a positional parameter"
            return Unknown(f"${name}: {what}, known only at run time")
        if name in ("$", "!", "?", "-", "_"):
            return Unknown(f"${name}: set by the shell at run time")
        found = self.lookup(name)
        return "" if found is None else found

    def _braced(self, node: Any, quoted: bool) -> Value:
        kids = [c for c in node.children if c.type not in ("${", "}")]
        if not kids:
            return ""
        head = kids[0]
        if head.type == "#" and len(kids) == 2:  # ${#VAR}
            v = self._var(_text(kids[1]))
            return v if isinstance(v, Unknown) else str(len(v))
        if head.type == "subscript":
            name = _text(head.child_by_field_name("name"))
            index = _text(head.child_by_field_name("index"))
            if name == "BASH_SOURCE" and index == "0":
                current = self._var("0")
            else:
                current = Unknown(f"${{{name}[{index}]}}: arrays are not evaluated statically")
        elif head.type in ("variable_name", "special_variable_name"):
            current = self._var(_text(head))
        else:
            return Unknown(f"{_text(node)}: not evaluated statically")
        name = _text(head)
        if len(kids) == 1:
            return current
        op = _text(kids[1])
        operand: Value = ""
        if len(kids) > 2:
            segs: list[_Seg] = []
            for k, child in enumerate(kids[2:]):
                if child.type == "regex":
                    segs.append(_Seg(_text(child), quoted=True))
                else:
                    segs += self._segments(child, quoted=quoted, first=k == 0)
            operand = join([s.value for s in segs])
        is_set = not (current == "" and self.lookup(name) is None)
        if op in (":-", "-", ":=", "="):
            if isinstance(current, Unknown):
                return current
            use_default = current == "" if op.startswith(":") else not is_set
            return operand if use_default else current
        if op in (":+", "+"):
            if isinstance(current, Unknown):
                return current
            use_alt = current != "" if op.startswith(":") else is_set
            return operand if use_alt else ""
        if op in (":?", "?"):
            if isinstance(current, Unknown):
                return current
            if current == "" if op.startswith(":") else not is_set:
                return Unknown(f"${{{name}{op}...}}: {name} is unset, and the shell would stop here")
            return current
        if op in ("#", "##", "%", "%%"):
            if isinstance(current, Unknown) or isinstance(operand, Unknown):
                return current if isinstance(current, Unknown) else operand
            return _strip_pattern(current, operand, op)
        return Unknown(f"{_text(node)}: the operator {op!r} is not evaluated statically")


def _strip_pattern(value: str, pattern: str, op: str) -> str:
    """``${v#p}`` ``${v##p}`` (shortest/longest prefix) and ``${v%p}`` ``${v%%p}`` (suffix)."""
    n = len(value)
    if op in ("#", "##"):
        cuts = range(0, n + 1) if op == "#" else range(n, -1, -1)
        for k in cuts:
            if fnmatch.fnmatchcase(value[:k], pattern):
                return value[k:]
        return value
    cuts = range(n, -1, -1) if op == "%" else range(0, n + 1)
    for k in cuts:
        if fnmatch.fnmatchcase(value[k:], pattern):
            return value[:k]
    return value


def join(parts: list[Value]) -> Value:
    """Concatenate parts; any unknown part makes the whole unknown (with the first reason)."""
    for p in parts:
        if isinstance(p, Unknown):
            return p
    return "".join(p for p in parts if isinstance(p, str))


def split_command_line(text: str, where: str, env: Mapping[str, str], *, comments: bool = False) -> list[str]:
    """A one-line command (``--launch-cmd``) split as a POSIX shell would, with ``~`` expanded.

    Parameter expansions are kept as written (there is no script around the string to set variables), as
    ``shlex.split`` did before; quoting, backslashes, ``#`` comments (``comments=True``) and tilde expansion
    apply. ``~`` is the environment's ``HOME``, ``~user`` that user's home."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")  # continuations, as before
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\n":
            i += 1
        if i >= n:
            break
        if comments and text[i] == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        buf: list[str] = []
        bare_start = i  # where the word's unquoted leading text begins (for ~)
        tilde_ok = text[i] == "~"
        while i < n and text[i] not in " \t\n":
            c = text[i]
            if c == "\\":
                if i + 1 >= n:
                    raise InputError(where, "cannot split the command: No escaped character")
                if text[i + 1] != "\n":
                    buf.append(text[i + 1])
                i += 2
                continue
            if c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise InputError(where, "cannot split the command: No closing quotation")
                buf.append(text[i + 1 : end])
                i = end + 1
                continue
            if c == '"':
                j = i + 1
                chunk: list[str] = []
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n and text[j + 1] in '$`"\\\n':
                        if text[j + 1] != "\n":
                            chunk.append(text[j + 1])
                        j += 2
                        continue
                    chunk.append(text[j])
                    j += 1
                if j >= n:
                    raise InputError(where, "cannot split the command: No closing quotation")
                buf.append("".join(chunk))
                i = j + 1
                continue
            buf.append(c)
            i += 1
        word = "".join(buf)
        raw = text[bare_start:i]
        if tilde_ok:
            prefix = raw.split("/", 1)[0]
            if not any(q in prefix for q in "'\"\\"):
                word = expand_tilde(word, env)
        elif "~" in raw and _assignment_tilde(raw):
            name, _, value = word.partition("=")
            word = f"{name}={expand_tilde(value, env, assignment=True)}"
        words.append(word)
    return words


def _assignment_tilde(raw: str) -> bool:
    """``NAME=~/x`` (or ``NAME=a:~/x``) written bare: bash gives such words tilde expansion after the
    ``=`` and each ``:``, as for an assignment, also as a command argument (``env VAR=~/x cmd``)."""
    name, _, value = raw.partition("=")
    bare = not any(q in raw for q in "'\"\\")
    return name.isidentifier() and bare and (value.startswith("~") or ":~" in value)
