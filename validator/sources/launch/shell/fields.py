"""Field splitting and quote removal: the runs of an expanded word (``Seg``) become argv words as bash 5
splits them on ``IFS`` (whitespace and non-whitespace delimiters), with the pathname-expansion guard (an
unquoted glob character makes the word's fields unknown: what matches depends on the disk at run time),
and the escapes of bare, double-quoted and ``$'...'`` text.

Pure functions of text, apart from the expansion (``params``, ``words``) that produces the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from validator.sources.launch.shell.values import Field, Fields, Unknown, Unmodelled, Unsplit, Value


@dataclass
class Seg:
    """A run of a word after expansion: ``quoted`` runs are neither split nor globbed; ``pattern`` runs
    (unquoted literal text) keep their backslashes for pattern matching."""

    value: Value
    quoted: bool
    literal: bool = False  # written in the script (an unquoted literal is not field-split)
    brk: bool = False  # a field boundary ("$@", "${A[@]}" between elements)


BREAK = Seg("", quoted=True, brk=True)
WS = " \t\n"  # IFS unset: blank, tab, newline


def split_fields(segs: list[Seg], ifs: Value, *, glob: bool) -> Fields:
    """Field splitting (bash's rules for IFS whitespace and non-whitespace) and the pathname-expansion
    guard: an unquoted glob character makes the word unknown (what matches depends on the disk at run
    time); ``glob`` False is ``set -f``."""
    if isinstance(ifs, Unknown):
        if any(not s.quoted and not s.literal and s.value != "" for s in segs):
            return Unsplit(f"IFS is computed at run time ({ifs.reason})")
        ifs = WS
    ws = "".join(c for c in ifs if c in WS)
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
            cur.append(unescape_bare(v))
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
    """Adjacent known text as one string, joined once (not a character at a time: ``a=$a$a`` doubles a
    value), unknown parts kept between."""
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


def _unescape(v: str, escapable: str | None) -> str:
    """Backslash removal: before any character (``escapable`` None) or only before those in ``escapable``;
    a backslash-newline is a line continuation and goes entirely."""
    out: list[str] = []
    i = 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v) and (escapable is None or v[i + 1] in escapable):
            if v[i + 1] != "\n":
                out.append(v[i + 1])
            i += 2
            continue
        out.append(v[i])
        i += 1
    return "".join(out)


def unescape_bare(v: str) -> str:
    return _unescape(v, None)


def unescape_double(v: str) -> str:
    """Inside double quotes a backslash escapes only ``$ ` " \\`` and the newline."""
    return _unescape(v, '$`"\\\n')


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f"}
_ANSI |= {"v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def ansi_c(raw: str, line: int) -> str:
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
