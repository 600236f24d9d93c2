"""The builtins that set variables, options and positional parameters: a declaration reached as a
command word (``builtin export X=1``: the declarations themselves are ``variables``'), ``set`` (options
and ``set --``), ``shift``, ``getopts``, ``let`` and ``read`` (of a here-string or
here-document whose text is known; else its values are known only at run time).
"""

from __future__ import annotations

from tree_sitter import Node

from validator.sources.launch.shell.api import Builtin, Shell
from validator.sources.launch.shell.builtins_flow import stdin_text
from validator.sources.launch.shell.machine import Prefix, known_words
from validator.sources.launch.shell.state import NAME
from validator.sources.launch.shell.syntax import OPTION_LETTERS, line_of
from validator.sources.launch.shell.values import Field, Unknown, Unmodelled, Value, count, join
from validator.sources.launch.shell.variables import declaration_option


def b_export(kind: str) -> Builtin:
    """A declaration builtin reached as a command word (``builtin export X=1``, ``command declare -x``):
    its arguments are the words as expanded."""

    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        if kind == "unset" or ev.m.posix:  # dash does not split an assignment after `command export`
            raise Unmodelled(f"{kind} given as a command word", line_of(node))
        if kind == "local" and not ev.m.in_function:
            return ev.m.errexit(1, node, kind)
        words, flags = [join(f) for f in args], dict[str, bool]()
        status = ev.vars.declare_words(kind, flags, words, node)
        names = [w.partition("=")[0] for w in words if isinstance(w, str) and not declaration_option(w)]
        return ev.m.errexit(ev.vars.listing(kind, flags, names, status), node, kind)

    return run


_SET_LETTERS = {**OPTION_LETTERS, "h": "hashall", "B": "braceexpand"}  # set -e, set +x, ...
_SET_NAMES = {*_SET_LETTERS.values(), "pipefail", "errtrace", "functrace", "noclobber"}  # set -o NAME


def b_set(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    k = 0
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            raise Unmodelled(f"set with an argument known only at run time: {w.reason}", line_of(node))
        if w in ("--", "-"):
            rest = words[k + 1 :]
            if w == "-" and not rest:
                break
            ev.m.st.positional = list(rest)
            return ev.m.errexit(0, node, "set")
        if w[:1] in "-+" and len(w) > 1:
            on = w[0] == "-"
            k += 1
            for letter in w[1:]:
                if letter == "o":
                    if k >= len(words):
                        raise Unmodelled("set -o with no option name (it lists them)", line_of(node))
                    opt = words[k]
                    k += 1
                    if ev.m.posix and opt == "pipefail":
                        raise Unmodelled("set -o pipefail in a /bin/sh script", line_of(node))
                    if not isinstance(opt, str) or opt not in _SET_NAMES or opt in ("errtrace", "functrace"):
                        raise Unmodelled(f"set -o {opt!r}", line_of(node))
                    (ev.m.st.opts.add if on else ev.m.st.opts.discard)(opt)
                    continue
                if letter not in _SET_LETTERS:
                    raise Unmodelled(f"set {w[0]}{letter}", line_of(node))
                (ev.m.st.opts.add if on else ev.m.st.opts.discard)(_SET_LETTERS[letter])
            continue
        ev.m.st.positional = list(words[k:])
        return ev.m.errexit(0, node, "set")
    if not words:  # set alone lists every variable and function
        ev.m.output_unknown("set (a listing)")
    return ev.m.errexit(0, node, "set")


def b_shift(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = known_words(args, node, "shift")
    n = (-1 if (c := count(words[0])) is None else c) if words else 1
    if n < 0:
        raise Unmodelled(f"shift {words!r}", line_of(node))
    pos = ev.m.st.positional
    if isinstance(pos, Unknown):
        raise Unmodelled(f"shift: {pos.reason}", line_of(node))
    if n > len(pos):
        return ev.m.errexit(1, node, "shift")
    ev.m.st.positional = pos[n:]
    return ev.m.errexit(0, node, "shift")


def b_getopts(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    """``getopts OPTSTRING NAME [ARGS]``: one option per call from ``$OPTIND``, as bash parses them
    (``-p VALUE``, ``-pVALUE``, ``--``, a leading ``:`` for silent errors). Clusters (``-ab``) are not
    modelled."""
    words = known_words(args, node, "getopts")
    if len(words) < 2:
        return ev.m.errexit(2, node, "getopts")
    optstring, name = words[0], words[1]
    argv_v: list[Value] | Unknown = list(words[2:]) if len(words) > 2 else ev.vars.positional()
    if isinstance(argv_v, Unknown) or any(isinstance(a, Unknown) for a in argv_v):
        raise Unmodelled("getopts over arguments known only at run time", line_of(node))
    argv = [str(a) for a in argv_v]
    raw = ev.vars.scalar("OPTIND")
    optind = count(raw) if isinstance(raw, str) else None
    if optind is None or optind < 1:
        raise Unmodelled(f"getopts with OPTIND {raw!r}", line_of(node))
    silent = optstring.startswith(":")
    k = optind - 1
    if k >= len(argv) or not argv[k].startswith("-") or argv[k] == "-":
        ev.vars.assign(name, "?", node)
        return ev.m.errexit(1, node, "getopts")
    if argv[k] == "--":
        ev.vars.assign("OPTIND", str(optind + 1), node)
        ev.vars.assign(name, "?", node)
        return ev.m.errexit(1, node, "getopts")
    arg, c = argv[k], argv[k][1]
    idx = optstring.find(c) if c != ":" else -1
    takes = idx >= 0 and optstring[idx + 1 : idx + 2] == ":"
    if len(arg) > 2 and not takes:
        raise Unmodelled(f"getopts on the option cluster {arg!r}", line_of(node))
    ev.m.st.vars.pop("OPTARG", None)
    if idx < 0:
        ev.vars.assign(name, "?", node)
        if silent:
            ev.vars.assign("OPTARG", c, node)
        ev.vars.assign("OPTIND", str(optind + 1), node)
        return ev.m.errexit(0, node, "getopts")
    if takes:
        if len(arg) > 2:
            ev.vars.assign("OPTARG", arg[2:], node)
            optind += 1
        elif k + 1 < len(argv):
            ev.vars.assign("OPTARG", argv[k + 1], node)
            optind += 2
        else:
            ev.vars.assign(name, ":" if silent else "?", node)
            if silent:
                ev.vars.assign("OPTARG", c, node)
            ev.vars.assign("OPTIND", str(optind + 1), node)
            return ev.m.errexit(0, node, "getopts")
    else:
        optind += 1
    ev.vars.assign(name, c, node)
    ev.vars.assign("OPTIND", str(optind), node)
    return ev.m.errexit(0, node, "getopts")


def b_let(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    """``let EXPR...``: each argument as arithmetic; the status is 1 when the last is 0."""
    last: Value = "0"
    for w in known_words(args, node, "let"):
        last = ev.words.arith(w, node)
    if not args:
        return ev.m.errexit(2, node, "let")
    return ev.m.errexit(None if isinstance(last, Unknown) else int(int(last) == 0), node, "let")


def b_read(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    """``read [-rs] [-d DELIM] [-p PROMPT] [-a NAME] [NAME...]``: one line of its input (up to DELIM) split
    on ``IFS`` (bash manual, "read": the last name takes the rest; ``-a`` assigns the words from index 0
    after unsetting the array; without ``-r`` a backslash quotes the next character and backslash-newline
    continues the line).
    The input is known when it is a here-string or static here-document; else every target is unknown."""
    words = [join(f) for f in args]
    raw, array, names, k, delim = False, None, [], 0, "\n"
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            raise Unmodelled(f"read with an argument known only at run time: {w.reason}", line_of(node))
        k += 1
        if w == "--":
            break
        if not w.startswith("-") or w == "-":
            k -= 1
            break
        for j, c in enumerate(w[1:], start=1):
            if ev.m.posix and c not in "rp":
                raise Unmodelled(f"read -{c} in a /bin/sh script (dash knows -r and -p)", line_of(node))
            if c in "rse":
                raw = raw or c == "r"
            elif c in "apid":
                value = w[j + 1 :] or (words[k] if k < len(words) else None)
                if not w[j + 1 :]:
                    k += 1
                if not isinstance(value, str):
                    raise Unmodelled(f"read -{c} without a known value", line_of(node))
                if c == "a":
                    array = value
                if c == "d":  # the line ends at its first character; -d '' at a NUL byte
                    delim = value[:1] or "\0"
                break  # -p PROMPT, -i TEXT: for a terminal only, as -s and -e; they change no value
            else:
                why = "reads a set number of characters, from a descriptor or with a timeout"
                raise Unmodelled(f"read -{c}: the option {why}, not modelled", line_of(node))
    for w in words[k:]:
        if not isinstance(w, str) or not NAME.fullmatch(w):
            raise Unmodelled(f"read into {w!r}: not a variable name", line_of(node))
        names.append(w)
    if array is not None and not NAME.fullmatch(array):
        raise Unmodelled(f"read -a {array!r}: not a variable name", line_of(node))
    reply = array is None and not names  # no name: REPLY gets the line itself, not split or stripped
    if reply:
        names = ["REPLY"]
    ifs = ev.vars.scalar("IFS")
    ifs = " \t\n" if ifs is None else ifs
    stdin = stdin_text(ev, node)
    line: list[tuple[str, bool]] | Unknown = stdin if isinstance(stdin, Unknown) else []
    status = 1
    if isinstance(ifs, Unknown):
        line = Unknown(f"IFS is known only at run time ({ifs.reason})")
    elif isinstance(stdin, str):
        line, status = _read_line(stdin, raw, delim)
    if isinstance(line, Unknown):
        unknown = Unknown(f"read from input at run time (line {line_of(node)}): {line.reason}")
        if array is not None:
            _array(ev, array, unknown, node)
        for n in names:
            ev.vars.assign(n, unknown, node)
        return ev.m.errexit(None, node, "read")
    assert isinstance(ifs, str)
    if reply:
        ev.vars.assign("REPLY", "".join(c for c, _ in line), node)
    elif array is not None:
        _array(ev, array, _fields(line, ifs, 0), node)
    else:
        fields = _fields(line, ifs, len(names))
        for n, value in zip(names, fields + [""] * len(names), strict=False):
            ev.vars.assign(n, value, node)
    return ev.m.errexit(status, node, "read")


def _read_line(text: str, raw: bool, delim: str) -> tuple[list[tuple[str, bool]], int]:
    """One line of ``text`` (up to ``delim``) as (character, quoted by a backslash) pairs, and read's
    status: 0 when ``delim`` ended it, 1 at the end of the input."""
    out: list[tuple[str, bool]] = []
    k = 0
    while k < len(text):
        c = text[k]
        if c == delim:
            return out, 0
        if c == "\\" and not raw:
            if k + 1 < len(text) and text[k + 1] != "\n":
                out.append((text[k + 1], True))
            k += 2
            continue
        out.append((c, False))
        k += 1
    return out, 1


def _fields(line: list[tuple[str, bool]], ifs: str, names: int) -> list[str]:
    """The line split on ``ifs`` as bash's ``read`` splits it (builtins/read.def, subst.c's
    ``get_word_from_string`` and ``list_string``): IFS white space (space, tab, newline in IFS) around a
    field is dropped and a run of it is one separator; any other IFS character, with the white space around
    it, is one separator, so two in a row delimit an empty field. With ``names`` > 0 the last name takes
    the rest of the line, its trailing IFS white space dropped (quoted or not), or the one field it holds
    without its delimiter; with 0 (``-a``) every field. A backslash-quoted character never splits."""

    def sep(k: int) -> bool:
        return line[k][0] in ifs and not line[k][1]

    def white(k: int) -> bool:
        return line[k][0] in " \t\n" and sep(k)

    def word(k: int) -> tuple[str, int, int]:
        """The field at ``k`` (no leading white space), where it ends, and where the next one starts."""
        end = next((j for j in range(k, n) if sep(j)), n)
        j = end
        if j < n:
            whitesep = white(j)
            j += 1
            while j < n and white(j):
                j += 1
            if j < n and whitesep and sep(j) and not white(j):  # ``a , b``: one separator
                j += 1
                while j < n and white(j):
                    j += 1
        return "".join(c for c, _ in line[k:end]), end, j

    words: list[str] = []
    k, n = 0, len(line)
    while k < n and white(k):
        k += 1
    if not names:  # list_string: an empty field where a separator that is not white space ends it
        while k < n:
            text, end, k = word(k)
            if text or (end < n and line[end][0] not in " \t\n"):
                words.append(text)
        return words
    while k < n and len(words) < names - 1:
        text, _, k = word(k)
        words.append(text)
    if k < n:
        text, _, after = word(k)
        if after < n:  # more than one field left: the rest as it is, less trailing IFS white space
            end = n  # (a backslash-quoted one too: read.def's strip_trailing_ifs_whitespace)
            while end > k and line[end - 1][0] in " \t\n" and line[end - 1][0] in ifs:
                end -= 1
            text = "".join(c for c, _ in line[k:end])
        words.append(text)
    return words


def _array(ev: Shell, name: str, values: list[str] | Unknown, node: Node) -> None:
    """``read -a NAME``: the array emptied, then given ``values`` from index 0."""
    ev.vars.assign(name, "", node, key="0")  # bash's own or readonly names refused as any assignment
    var = ev.m.st.vars[name]
    if var.assoc:
        raise Unmodelled(f"read -a into the associative array {name}", line_of(node))
    var.items = values if isinstance(values, Unknown) else {str(i): v for i, v in enumerate(values)}
    var.value, var.maybe_array = None, False
