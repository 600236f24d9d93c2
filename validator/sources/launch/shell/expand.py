"""Bash word expansion, statically, as bash 5 does it: a word's syntax (quotes, concatenations, ``~``,
``$'...'``, ``$(...)``, ``$((...))``) walked into runs of text, parameter expansion (``$v``, ``${v:-d}``,
``${v#p}``, ``${v/p/r}``, ``${#v}``, ``${!v}``, arrays and ``$@``), then split into argv words
(``fields``), or read as one value, or as a pattern.

Never guessed: an unknown value in a quoted word is an unknown part of one field; unquoted, the number of
fields is unknown too (``Unsplit``); a construct not modelled raises ``Unmodelled``. ``Expander`` holds no
state: variables through ``Names``, ``$(...)`` through the executor's ``substitute``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from validator.sources.launch.shell.arith import Arith
from validator.sources.launch.shell.fields import (
    BREAK,
    WS,
    Seg,
    ansi_c,
    split_fields,
    unescape_bare,
    unescape_double,
)
from validator.sources.launch.shell.patterns import glob_regex, strip_pattern, substitute_pattern
from validator.sources.launch.shell.state import Names
from validator.sources.launch.shell.syntax import line_of, node_bytes, part, snippet, text
from validator.sources.launch.shell.values import (
    Fields,
    Unbound,
    Unknown,
    Unmodelled,
    Unsplit,
    Value,
    charge,
    join,
    join_with,
)

# the longest value a pattern operator (``${v//p/r}``, ``${v##p}``) is evaluated on: each tries the
# pattern at every position against every end, so its time grows as the square of the length (a 16 KiB
# value took 27 s, 1 MiB hours: red team 19); a longer one is known only at run time
MAX_PATTERN_SUBJECT = 2048

_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class Expander:
    """Word and parameter expansion over one path's variables (``names``)."""

    def __init__(self, names: Names, substitute: Callable[[Node], Value]) -> None:
        self.names = names
        self.substitute = substitute  # $(...): the output of the commands, run by the executor

    def arith(self, expr: str, node: Node) -> Value:
        """``expr`` as bash integer arithmetic (``arith.Arith``)."""
        return Arith(self.names, expr, node).evaluate()

    def fields(self, node: Node) -> Fields:
        """The argv words one word node becomes (split, glob-guarded, quotes removed)."""
        segs = self.segments(node, quoted=False, first=True)
        ifs = self.names.scalar("IFS")
        return split_fields(segs, WS if ifs is None else ifs, glob=not self.names.noglob())

    def value(self, node: Node, *, assignment: bool = False) -> Value:
        """One word without splitting or globbing (an assignment's value, a ``case`` subject, ``[[ ]]``)."""
        segs = self.segments(node, quoted=False, first=True, assignment=assignment)
        return join([self.first_ifs() if s.brk else _unquoted(s) for s in segs])

    def pattern(self, node: Node) -> re.Pattern[str] | Unknown:
        """A word as a pattern: its quoted runs literal, the rest special."""
        if node.type == "regex":  # the grammar's name for an unquoted [[ $v == pattern ]] operand
            raw = text(node)
            if any(c in raw for c in "$`'\"\\ "):
                raise Unmodelled(f"the pattern {raw!r}", line_of(node))
            return glob_regex([(raw, False)], line_of(node), self.names.posix)
        segs = self.segments(node, quoted=False, first=False)
        pieces = [(self.first_ifs(), True) if s.brk else (s.value, s.quoted) for s in segs]
        return glob_regex(pieces, line_of(node), self.names.posix)

    def segments(self, node: Operand, *, quoted: bool, first: bool, assignment: bool = False) -> list[Seg]:
        if isinstance(node, RawOperand):
            return [Seg(node.raw, quoted=quoted, literal=not quoted)]
        t = node.type
        line = line_of(node)
        if t in ("word", "number", "extglob_pattern", "variable_name"):
            raw = text(node)
            if t == "word" and _unparsed_expansion(raw):  # "${v:-$@}": the grammar gives '$@' as a word
                raise Unmodelled(f"{raw!r}, an expansion the grammar reads as text", line)
            if quoted:
                return [Seg(raw, quoted=True)]
            if (
                self.names.posix
                and ("~" in raw)
                and (assignment or _ASSIGNMENT_WORD.match(raw))
                and not raw.startswith("~")
            ):
                raise Unmodelled(f"~ inside {raw!r} in a /bin/sh script", line)
            if first and not assignment and _ASSIGNMENT_WORD.match(raw) and ("=~" in raw or ":~" in raw):
                # bash expands ~ after = and : also in an argument that looks like an assignment
                name, _, rest = raw.partition("=")
                return [Seg(name + "=", quoted=False, literal=True), *self._tilde(rest, True)]
            if first and (raw.startswith("~") or (assignment and ":~" in raw)):
                return self._tilde(raw, assignment)
            if _brace_expansion(raw):
                raise Unmodelled(f"brace expansion {raw!r}", line)
            return [Seg(raw, quoted=False, literal=True)]
        if self.names.posix and t in ("ansi_c_string", "translated_string"):
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
            for k, child in enumerate(node.children):
                # tree-sitter-bash gives the white space before an expansion or the closing quote to that
                # token (``"$A $B"``: ``' $B'``; ``"  "``: ``'  "'``), not to a string_content: it is text
                lead = text(child)[: len(text(child)) - len(text(child).lstrip(" \t\n"))]
                if lead and child.type != "string_content" and k > 0:
                    parts.append(Seg(lead, quoted=True))
                    inside = True
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
            # the grammar splits ``{a,b}`` into the words "{", "a,b", "}": brace expansion, seen across them
            # (bash expands it before anything else: ``x{$v,y}`` too; red team 22 found ``{x,--flag}`` read
            # as one literal word where bash makes two)
            shape = "".join(re.sub(r"\\.", "_", text(c)) if c.type == "word" else "_" for c in node.children)
            if not quoted and not assignment and _brace_expansion(shape):
                raise Unmodelled(f"brace expansion {snippet(node)!r}", line)
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
            return [Seg(self.substitute(node), quoted=quoted)]
        if t == "arithmetic_expansion":
            inner = self.arith_text(node, 3, 2)
            if isinstance(inner, Unknown):
                return [Seg(inner, quoted=quoted)]
            return [Seg(self.arith(inner, node), quoted=quoted)]
        if t == "process_substitution":
            return [Seg(Unknown(f"{snippet(node)}: a process substitution"), quoted=quoted)]
        raise Unmodelled(f"{t.replace('_', ' ')} {snippet(node)!r}", line)

    def arith_text(self, node: Node, head: int, tail: int) -> Value:
        """An arithmetic node's expression (or a substring's offset or length, the node itself perhaps an
        expansion) with its ``$x``, ``${...}`` and ``$(...)`` expanded first, as bash does before it
        evaluates; ``head`` and ``tail`` bytes (``$((`` and ``))``) cut off."""
        src = node_bytes(node)
        spans: list[tuple[int, int, Value]] = []
        stack = [node]
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

    def _tilde(self, raw: str, assignment: bool) -> list[Seg]:
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
                out.append(Seg(self.names.home(user), quoted=True))  # HOME=/: ~/x is //x, as in bash
                if slash:
                    out.append(Seg(slash + rest, quoted=False, literal=True))
            else:
                out.append(Seg(piece, quoted=False, literal=True))
        return out

    def first_ifs(self) -> Value:
        ifs = self.names.scalar("IFS")
        if ifs is None:
            return " "
        return ifs if isinstance(ifs, Unknown) else ifs[:1]

    def _param(self, name: str, index: str | None, quoted: bool, node: Node) -> list[Seg]:
        """``$name`` / ``${name[index]}`` with no operator, as segments (``$@`` and ``[@]`` give one per
        element, with field boundaries between them when quoted)."""
        many = name in ("@", "*") or index in ("@", "*")
        if not many:
            return [Seg(self._one(name, index, node), quoted=quoted)]
        star = name == "*" or index == "*"
        values = self._many(name)
        if isinstance(values, Unknown):  # how many words, too, is unknown
            if quoted and star:
                return [Seg(values, quoted=True)]
            return [Seg(Unsplit(values.reason), quoted=False)]
        if star and quoted:
            sep = self.first_ifs()
            return [Seg(join_with(values, sep), quoted=True)]
        ifs = self.names.scalar("IFS")
        if self.names.posix and not quoted and "" in values and isinstance(ifs, str) and ifs.strip(" \t\n"):
            # dash makes no field of an empty parameter there, whatever IFS holds; bash's rule is below
            raise Unmodelled(
                f"unquoted {snippet(node)} with an empty argument and a non-blank IFS in a /bin/sh script",
                line_of(node),
            )
        if not quoted and ifs != "":
            # unquoted, bash joins the elements with IFS's first character and splits the result (so an
            # empty element is a word when IFS holds a non-blank delimiter)
            sep = self.first_ifs()
            return [Seg(join_with(values, sep), quoted=False)]
        return _listed(values, quoted)

    def _many(self, name: str) -> list[Value] | Unknown:
        if name in ("@", "*"):
            return self.names.positional()
        els = self.names.elements(name)
        if els is None:  # bash 5 exempts ${A[@]} from set -u, as it does "$@"
            return []
        return els if isinstance(els, Unknown) else [v for _, v in els]

    def _one(self, name: str, index: str | None, node: Node) -> Value:
        return self._set(self.names.lookup(name, index, node), name)

    def _set(self, found: Value | None, name: str) -> Value:
        """An unset parameter expands to nothing, or under ``set -u`` stops the script."""
        if found is None:
            if self.names.nounset():
                raise Unbound(name)
            return ""
        return found

    def _braced(self, node: Node, quoted: bool) -> list[Seg]:
        kids = [c for c in node.children if c.type not in ("${", "}")]
        line = line_of(node)
        if not kids:
            raise Unmodelled("${}", line)
        if self.names.posix:
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
            if index in ("@", "*") and self.names.elements(name) is None and self.names.nounset():
                raise Unbound(f"{name}[{index}]")  # unlike ${A[@]}, ${#A[@]} is not exempt from set -u
            if index in ("@", "*") or (name in ("@", "*") and index is None):
                values = self._many(name)
                return [Seg(values if isinstance(values, Unknown) else str(len(values)), quoted=quoted)]
            v = self._one(name, index, node)
            return [Seg(v if isinstance(v, Unknown) else str(len(v)), quoted=quoted)]
        if head.type == "!" and len(kids) == 2:  # ${!v} ${!A[@]}
            name, index = self._name(kids[1], line)
            if index in ("@", "*"):
                els = self.names.elements(name)
                if isinstance(els, Unknown):
                    return [Seg(els, quoted=quoted)]
                keys: list[Value] = [k for k, _ in els or []]
                if index == "*" and quoted:
                    return [Seg(join_with(keys, self.first_ifs()), quoted=True)]
                return _listed(keys, quoted)
            target = self._one(name, index, node)
            return [Seg(self._set(self._indirect_raw(target, node), str(target)), quoted=quoted)]
        if head.type == "!" and len(kids) > 2:  # ${!v:-d}: indirection, then the operator
            name, index = self._name(kids[1], line)
            target = self._one(name, index, node)
            return self._operate(kids[2:], self._indirect_raw(target, node), None, quoted, node)
        name, index = self._name(head, line)
        if len(kids) == 1:
            return self._param(name, index, quoted, node)
        if name in ("@", "*") or index in ("@", "*"):
            raise Unmodelled(f"operator on a list: {snippet(node)}", line)
        return self._operate(kids[1:], self.names.lookup(name, index, node), name, quoted, node)

    def _name(self, node: Node, line: int) -> tuple[str, str | None]:
        if node.type in ("variable_name", "special_variable_name", "number"):
            return text(node), None
        if node.type == "subscript":
            name = text(part(node, "name"))
            index_node = part(node, "index")
            raw = text(index_node)
            if raw in ("@", "*"):
                return name, raw
            idx = self.value(index_node)
            if isinstance(idx, Unknown):
                raise Unmodelled(f"array index computed at run time: {snippet(node)}", line)
            return name, idx
        raise Unmodelled(f"parameter {text(node)!r}", line)

    def _indirect_raw(self, target: Value, node: Node) -> Value | None:
        if isinstance(target, Unknown):
            return target
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.*)\])?|([0-9]+|[@*#?$!-])", target)
        if m is None:
            raise Unmodelled(
                f"${{!...}} names {target!r}, not a variable (bash: invalid indirect)", line_of(node)
            )
        if m.group(2) is not None:
            raise Unmodelled(f"${{!...}} names an array element {target!r}", line_of(node))
        return self.names.lookup(m.group(1) or m.group(3), None, node)

    def _operate(
        self, kids: list[Node], current: Value | None, name: str | None, quoted: bool, node: Node
    ) -> list[Seg]:
        line = line_of(node)
        op = text(kids[0])
        operands = kids[1:]
        close = node.children[-1]
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            word = self._checked(node, kids[0], operands, close)
            if isinstance(current, Unknown) and not (op.startswith(":") and current.nonempty):
                return [Seg(current, quoted=quoted)]
            empty = current is None or (op.startswith(":") and current == "")
            if op in (":+", "+"):
                return self._operand(word, quoted) if not empty else [Seg("", quoted=quoted)]
            if not empty:
                assert current is not None
                return [Seg(current, quoted=quoted)]
            if op in (":?", "?"):
                raise Unbound(f"{name}: {op} says the script stops here")
            segs = self._operand(word, quoted)
            if op in (":=", "="):
                if name is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    raise Unmodelled(f"{snippet(node)}: assigning through an indirection", line)
                if any(_bare_many(w) for w in word):
                    raise Unmodelled(f"{snippet(node)}: an unquoted $@ or $* in the value it assigns", line)
                # a quoted "$@": bash joins its words with a space, dash with IFS's first character
                sep = self.first_ifs() if self.names.posix else " "
                value = join([sep if s.brk else _unquoted(s) for s in segs])
                self.names.set_scalar(name, value, node)
                return [Seg(value, quoted=quoted)]
            return segs
        current = self._set(current, str(name))
        if op in ("#", "##", "%", "%%", "/", "//", "/#", "/%"):
            pat_nodes: Sequence[Operand] = operands
            rep_nodes: Sequence[Operand] = []
            cut = (
                next((k for k, c in enumerate(operands) if c.type == "/"), None)
                if op.startswith("/")
                else None
            )
            split = _escaped_slash(node, kids[0], close) if op.startswith("/") else None
            if split is not None:
                # ${v//\//--}: the grammar cuts the pattern at the escaped slash; bash at the first
                # unescaped one
                pat_nodes, rep_nodes = [RawOperand(split[0])], [RawOperand(split[1])]
            elif cut is not None:
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
            # matched at each position against each end: n^2, about 0.4 s for 2,048 characters
            if len(current) > MAX_PATTERN_SUBJECT or not charge(len(current) ** 2 // 40):
                why = f"{snippet(node)} over a value of {len(current)} characters is not evaluated"
                return [Seg(Unknown(why), quoted=quoted)]
            if op.startswith("/"):
                rep = self._pieces(rep_nodes)
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
            convert = _upper if op.startswith("^") else _lower
            changed = convert(current) if len(op) == 2 else convert(current[:1]) + current[1:]
            return [Seg(changed, quoted=quoted)]
        if op == ":":
            return [Seg(self._substring(current, operands, node), quoted=quoted)]
        raise Unmodelled(f"parameter operator {op!r} in {snippet(node)}", line)

    def _checked(self, node: Node, after: Node, operands: list[Node], before: Node) -> Sequence[Operand]:
        """The operand nodes between ``after`` and ``before``, if they cover that source exactly; the
        grammar sometimes drops a blank (``${v%% *}`` reads as ``*``): then the raw text, when it holds no
        quote or expansion, is a literal word; else the construct is not modelled."""
        raw = node_bytes(node)[after.end_byte - node.start_byte : before.start_byte - node.start_byte]
        if b"".join(node_bytes(c) for c in operands) == raw and (
            not operands
            or (operands[0].start_byte == after.end_byte and operands[-1].end_byte == before.start_byte)
        ):
            return operands
        if any(c in raw for c in b"$`'\\\""):
            raise Unmodelled(f"the operand of {snippet(node)} (the grammar misreads it)", line_of(node))
        return [RawOperand(raw.decode("utf-8", "surrogateescape"))]

    def _substring(self, current: Value, operands: list[Node], node: Node) -> Value:
        parts = [c for c in operands if c.type != ":"]
        if len(parts) not in (1, 2) or text(node).count(":") != len(parts):
            raise Unmodelled(f"substring {snippet(node)}", line_of(node))
        nums: list[int] = []
        for p in parts:
            expr = self.arith_text(p, 0, 0)
            v = expr if isinstance(expr, Unknown) else self.arith(expr, node)
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

    def _operand(self, operands: Sequence[Operand], quoted: bool) -> list[Seg]:
        """The word of ``${v:-word}`` (``:+``, ``:=``...) as the expansion gives it. Unquoted, its literal
        text is split as an expansion's result is (bash(1), "Word Splitting": ``${v:-a b}`` is two words, on
        IFS; a quoted or escaped blank stays); the blanks the grammar leaves between its nodes are text too
        (``${v:-a "b c"}``: ``a``, a blank, ``b c``)."""
        out: list[Seg] = []
        k = 0
        for child in operands:
            if not isinstance(child, RawOperand) and child.type == "regex":
                raise Unmodelled(f"operand {text(child)!r}", line_of(child))
            nodes: list[Operand] = [child]
            if isinstance(child, Node) and child.type == "concatenation":
                nodes = list(child.children)
            for i, one in enumerate(nodes):
                if i and isinstance(child, Node) and isinstance(one, Node):
                    before = nodes[i - 1]
                    assert isinstance(before, Node)
                    gap = node_bytes(child)[
                        before.end_byte - child.start_byte : one.start_byte - child.start_byte
                    ]
                    if gap.strip(b" \t\n"):
                        raise Unmodelled(f"the operand of ${{...}} {text(child)!r}", line_of(child))
                    if gap:
                        out.append(Seg(gap.decode("ascii"), quoted=quoted))
                segs = self.segments(one, quoted=quoted, first=k == 0)
                if not quoted and k == 0 and isinstance(one, Node) and self._tilde_splits(text(one)):
                    # '${v:-~ --flag}': the tilde-prefix runs to the first '/', so its user is ' --flag';
                    # with no such user bash leaves the text, split as the rest is: how many words is unknown
                    segs = [Seg(s.value, quoted=False) if isinstance(s.value, Unknown) else s for s in segs]
                out += segs
                k += 1
        if not quoted:
            out = [piece for seg in out for piece in _split_literal(seg)]
        return out or [Seg("", quoted=quoted)]

    def _tilde_splits(self, raw: str) -> bool:
        """Whether ``raw``, an operand's first word, starts with a ``~user`` whose name holds a character of
        IFS: bash expands it when that user exists (a result never split) and else leaves the text, which
        field splitting then splits."""
        if not raw.startswith("~"):
            return False
        user = raw[1:].partition("/")[0]
        ifs = self.names.scalar("IFS")
        ifs = WS if ifs is None else ifs
        return bool(user) and (isinstance(ifs, Unknown) or any(c in ifs for c in user))

    def _pieces(self, nodes: Sequence[Operand]) -> list[tuple[Value, bool]]:
        pieces: list[tuple[Value, bool]] = []
        for child in nodes:
            if isinstance(child, RawOperand):
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

    def _pattern_of(self, nodes: Sequence[Operand], line: int) -> re.Pattern[str] | Unknown:
        return glob_regex(self._pieces(nodes), line, self.names.posix)


def _split_literal(seg: Seg) -> list[Seg]:
    """An unquoted literal run of an operand as runs field splitting splits (an expansion's result): its
    backslash-escaped characters quoted, the rest not; any other run as it is."""
    if not seg.literal or seg.quoted or not isinstance(seg.value, str):
        return [seg]
    return [
        Seg(m.group(1), quoted=True) if m.group(1) is not None else Seg(m.group(2), quoted=False)
        for m in re.finditer(r"\\(.)|([^\\]+|\\$)", seg.value, re.DOTALL)
    ]


def _brace_expansion(raw: str) -> bool:
    """An unquoted ``{a,b}`` or ``{1..3}``: brace expansion, not modelled."""
    return bool(re.search(r"(?<!\$)\{[^{}]*(,|\.\.)[^{}]*\}", raw))


@dataclass
class RawOperand:
    """Operand text taken from the source itself (see ``Expander._checked``): a literal, unquoted word."""

    raw: str
    type: str = "raw"


Operand = Node | RawOperand  # an operand of ${v#p}: a syntax node, or text the grammar misread


def _escaped_slash(node: Node, op: Node, close: Node) -> tuple[str, str] | None:
    """The pattern and replacement of ``${v/PAT/REP}`` read from its source, where PAT holds an escaped
    slash (``\\/``) and nothing is quoted or expanded; None otherwise (the grammar's reading stands)."""
    raw = node_bytes(node)[op.end_byte - node.start_byte : close.start_byte - node.start_byte].decode(
        "utf-8", "surrogateescape"
    )
    if "\\/" not in raw or any(c in raw for c in "$`'\""):
        return None
    i = 0
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] == "/":
            return raw[:i], raw[i + 1 :]
        i += 1
    return raw, ""


def _quoting(node: Operand) -> bool:
    """A node that is or holds quoting (whose meaning inside a double-quoted ``${v#p}`` is subtle)."""
    if isinstance(node, RawOperand):
        return False
    if node.type in ("raw_string", "ansi_c_string", "string", "translated_string"):
        return True
    return any(_quoting(c) for c in node.children)


def _unparsed_expansion(raw: str) -> bool:
    """Whether ``raw`` (a word as the grammar gives it) holds an unescaped ``$`` that starts an expansion,
    or a command or process substitution."""
    # a backquote, ``$[`` and ``<(``/``>(`` too: inside ``${v:-...}`` the grammar leaves them as text
    for m in re.finditer(r"\$[@*#?$!\-0-9A-Za-z_{(\[]|`|[<>]\(", raw):
        slashes = len(raw[: m.start()]) - len(raw[: m.start()].rstrip("\\"))
        if slashes % 2 == 0:
            return True
    return False


def _bare_many(node: Operand) -> bool:
    """Whether ``node`` holds an unquoted ``$@``, ``$*``, ``${A[@]}`` or ``${A[*]}`` (outside a string)."""
    if not isinstance(node, Node) or node.type == "string":
        return False
    if node.type in ("simple_expansion", "expansion"):
        t = text(node)
        return t in ("$@", "$*", "${@}", "${*}") or t.endswith(("[@]}", "[*]}"))
    return any(_bare_many(c) for c in node.children)


def _unquoted(s: Seg) -> Value:
    """A run with quote removal: an unquoted literal loses its backslashes."""
    return unescape_bare(s.value) if s.literal and not s.quoted and isinstance(s.value, str) else s.value


def _listed(values: list[Value], quoted: bool) -> list[Seg]:
    """One run per value, a field boundary between each two (``"$@"``, ``"${A[@]}"``)."""
    out: list[Seg] = []
    for k, v in enumerate(values):
        if k:
            out.append(BREAK)
        out.append(Seg(v, quoted=quoted))
    return out


def _upper(s: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in s)


def _lower(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)
