"""Shell variables over one path's state: lookups for word expansion (scalars, arrays, bash's own
variables, positional parameters), assignments (``=``, ``+=``, arrays, elements), and the declaration
builtins (``export``, ``declare``/``typeset``/``local``/``readonly`` with their flags, ``unset``).

Each export form is modelled exactly (``export -n``, ``declare +x``, ``set -a``, a quoted ``export
"X=1"``); a flag that changes what a later assignment means (``-n``, ``-i``, ``-l``) is not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from validator.sources.launch.shell.arith import Arith
from validator.sources.launch.shell.expand import Expander
from validator.sources.launch.shell.machine import Machine
from validator.sources.launch.shell.state import (
    BASH_DEFAULTS,
    BASH_VARS,
    MAYBE_UNSET,
    NAME,
    SHELL_TUNING,
    ShellExit,
    Var,
    bash_hash,
)
from validator.sources.launch.shell.syntax import line_of, part, text
from validator.sources.launch.shell.values import Unknown, Unmodelled, Value, count, join

_SPECIAL_RUNTIME = {"$": "the shell's process id", "!": "the last background job", "_": "the last argument"}
_SPECIAL_RUNTIME["-"] = "the shell's flags"

# names a sourced file cannot set: bash's own (read-only or recomputed at each use) and the reader's
_OWN = BASH_VARS | {"FUNCNAME", "BASH_SOURCE", "BASH_VERSION", "PWD"}


def declaration_option(word: str) -> bool:
    return word[:1] in "-+" and len(word) > 1 and NAME.fullmatch(word[1:].replace("-", "x")) is not None


class Variables:
    """One path's variables (``state.Names``), over its machine ``m``, and the word expansion over them
    (``words``: it runs ``$(...)`` through ``substitute``)."""

    def __init__(self, m: Machine, substitute: Callable[[Node], Value]) -> None:
        self.m = m
        self.words = Expander(self, substitute)

    @property
    def posix(self) -> bool:
        return self.m.posix

    # -- lookups (state.Names) --------------------------------------------------------------------------

    def scalar(self, name: str) -> Value | None:
        if name == "0":
            return self.m.zero
        if name == "?":
            if self.posix and self.m.substitutions != self.m.statement_substitutions:
                # bash's $? is a $(...)'s status as soon as it ran, dash's only after the command
                raise Unmodelled("$? after a $(...) in one command in a /bin/sh script", self.m.line)
            return Unknown("$?: an exit status") if self.m.st.status is None else str(self.m.st.status)
        var = self.m.st.vars.get(name)
        if var is not None:
            if var.items is None:
                return var.value
            return var.items if isinstance(var.items, Unknown) else var.items.get("0")
        if name == "PWD":
            self.m.uses_cwd(".")
            return self.m.st.cwd
        if self.m.st.opaque is not None and name not in _OWN:
            return self.unknown_unset(name)
        if self.posix:
            # dash sets few variables of its own, and none of bash's ($BASH_VERSION, $BASH_SOURCE are unset)
            if name in ("PPID", "LINENO", "PATH"):
                return Unknown(f"${name}: set by the shell at run time")
            return {"OPTIND": "1", "PS4": "+ "}.get(name)
        if name == "BASH_VERSION":
            return Unknown("$BASH_VERSION: the running bash's", nonempty=True)
        if name == "BASH":
            # bash always sets it to its own path: a venv's activate tests it with -n (Python <= 3.11.3)
            return Unknown("$BASH: the running bash's path", nonempty=True)
        if name == "BASH_SOURCE":
            self._no_source_in_a_string()
            return self.m.st.sources[-1] if self.m.st.sources else None
        if name in BASH_VARS:
            if name in MAYBE_UNSET and self.nounset():
                raise Unmodelled(f"${name} under set -u: bash may have it unset (and stop)", 0)
            return Unknown(f"${name}: set by bash at run time")
        if name in BASH_DEFAULTS:
            default = BASH_DEFAULTS[name]
            return Unknown(f"${name}: not in the environment, bash's default") if default is None else default
        return None  # unset (FUNCNAME outside a function too)

    def _no_source_in_a_string(self) -> None:
        """In a ``bash -c`` string BASH_SOURCE is empty, but ``environment`` inside a function: unmodelled."""
        if self.m.command_string:
            raise Unmodelled("BASH_SOURCE in a -c command string", self.m.line)

    def lookup(self, name: str, index: str | None, node: Node) -> Value | None:
        if index is not None:
            return self.element(name, index, node)
        if name == "#":
            pos = self.positional()
            return pos if isinstance(pos, Unknown) else str(len(pos))
        if name.isascii() and name.isdigit() and name != "0":
            pos = self.positional()
            if isinstance(pos, Unknown):
                return pos
            k = count(name)  # None: more digits than bash's intmax_t, past any argument
            return pos[k - 1] if k is not None and k <= len(pos) else None
        if name in _SPECIAL_RUNTIME:
            return Unknown(f"${name}: {_SPECIAL_RUNTIME[name]}, known only at run time")
        return self.scalar(name)

    def unknown_unset(self, name: str) -> Value:
        """A variable the script never set, after a sourced file that could not be read: that file may
        have set it. Under ``set -u`` the path where it did not stops there, so this one assumes it did."""
        assert self.m.st.opaque is not None
        if self.nounset():
            self.m.survived.append(f"{self.m.file}:{self.m.line}: ${name} was set by {self.m.st.opaque}")
        return Unknown(f"${name}: {self.m.st.opaque} may set it")

    def fresh(self, name: str) -> Var:
        """A variable the script creates now: unset, or, after a sourced file that could not be read,
        whatever that file may have made it (its value and whether it is exported unknown)."""
        if self.m.st.opaque is not None and name not in _OWN:
            return Var(
                value=Unknown(f"${name}: {self.m.st.opaque} may set it"), exported=None, maybe_array=True
            )
        return Var()

    def elements(self, name: str) -> list[tuple[str, Value]] | Unknown | None:
        var = self.m.st.vars.get(name)
        if var is None:
            if name == "BASH_SOURCE":
                self._no_source_in_a_string()
                return [(str(k), v) for k, v in enumerate(reversed(self.m.st.sources))]
            if name in BASH_VARS:
                return Unknown(f"${{{name}[@]}}: set by bash at run time")
            if self.m.st.opaque is not None and name not in _OWN:
                return Unknown(f"${{{name}[@]}}: {self.m.st.opaque} may set it")
            return None
        if var.items is None and var.maybe_array:
            return Unknown(
                f"${{{name}[@]}}: {self.m.st.opaque or 'a sourced file'} may have made it an array"
            )
        if var.items is None:
            return None if var.value is None else [("0", var.value)]
        if isinstance(var.items, Unknown):
            return var.items
        if var.assoc:
            order = sorted(
                enumerate(var.items), key=lambda kv: (bash_hash(kv[1]), -kv[0])
            )  # bucket ascending, newest first within a bucket
            return [(k, var.items[k]) for _, k in order]
        return [(k, var.items[k]) for k in sorted(var.items, key=int)]

    def element(self, name: str, key: str, node: Node) -> Value | None:
        var = self.m.st.vars.get(name)
        if var is None:
            if name == "BASH_SOURCE":
                self._no_source_in_a_string()
                k = count(key)
                if k is None:
                    raise Unmodelled(f"BASH_SOURCE[{key}]", line_of(node))
                return self.m.st.sources[-1 - k] if k < len(self.m.st.sources) else None
            if name in BASH_VARS:
                return Unknown(f"${{{name}[{key}]}}: set by bash at run time")
            if self.m.st.opaque is not None and name not in _OWN:
                return Unknown(f"${{{name}[{key}]}}: {self.m.st.opaque} may set it")
            return None
        if var.items is None:
            if not var.assoc and self._index(key, node) == "0":
                return var.value
            if var.maybe_array:
                return Unknown(f"${{{name}[{key}]}}: {self.m.st.opaque or 'a sourced file'} may set it")
            return None
        if isinstance(var.items, Unknown):
            return var.items
        return var.items.get(key if var.assoc else self._index(key, node))

    def _index(self, key: str, node: Node) -> str:
        v = Arith(self, key, node).evaluate()
        if isinstance(v, Unknown):
            raise Unmodelled(f"array index {key!r}: {v.reason}", line_of(node))
        if int(v) < 0:
            raise Unmodelled(f"negative array index {key!r}", line_of(node))
        return v

    def positional(self) -> list[Value] | Unknown:
        return self.m.st.positional

    def set_scalar(self, name: str, value: Value, node: Node) -> None:
        self.assign(name, value, node)

    def home(self, user: str) -> Value:
        if not user:
            h = self.scalar("HOME")
            return h if h is not None else Unknown("~: HOME is not set")
        return Unknown(f"~{user}: that user's home directory on the host")

    def nounset(self) -> bool:
        return "nounset" in self.m.st.opts

    def noglob(self) -> bool:
        return "noglob" in self.m.st.opts

    # -- variables --------------------------------------------------------------------------------------

    def origin(self, node: Node) -> str:
        return f"script:{self.m.file}:{line_of(node)}"

    @staticmethod
    def _tuning(name: str, node: Node) -> None:
        """Setting, declaring or unsetting one of bash's ``SHELL_TUNING`` variables (POSIXLY_CORRECT puts
        bash in POSIX mode, FUNCNEST cuts calls short, BASH_ARGV0 sets ``$0``...): how the rest runs is not
        modelled (dash has none of them: bash as sh still has)."""
        if name in SHELL_TUNING:
            raise Unmodelled(f"{name} is set or unset: it changes how bash itself runs", line_of(node))

    def assign(
        self, name: str, value: Value, node: Node, *, key: str | None = None, append: bool = False
    ) -> None:
        self._tuning(name, node)
        if name in BASH_VARS or name in ("PWD", "BASH_SOURCE", "FUNCNAME", "BASH_VERSION", "BASH_ENV"):
            raise Unmodelled(f"assignment to bash's own variable {name}", line_of(node))
        var = self.m.st.vars.get(name)
        if var is not None and var.readonly:
            raise Unmodelled(f"assignment to the readonly variable {name}", line_of(node))
        if var is None:
            var = self.fresh(name)
            self.m.st.vars[name] = var
        if "allexport" in self.m.st.opts:
            var.exported = True
        var.origin = self.origin(node)
        if key is not None or var.items is not None:
            if var.items is None and var.maybe_array:
                var.items = Unknown(f"${{{name}[@]}}: {self.m.st.opaque or 'a sourced file'} may set it")
            if var.items is None:
                var.items = {} if var.value is None or var.assoc else {"0": var.value}
                var.value = None
            if isinstance(var.items, Unknown):
                return  # an element set in an array whose elements are unknown: still unknown
            k = (key if var.assoc else self._index(key, node)) if key is not None else "0"
            if append:
                value = join([var.items.get(k, ""), value])
            var.items[k] = value
            return
        if append:
            value = join([var.value or "", value])
        var.value = value

    # -- assignments and declarations -------------------------------------------------------------------

    def assignment(self, node: Node) -> str:
        """``NAME=value``, ``NAME+=value``, ``NAME=(...)``, ``NAME[k]=v``: applies it, returns NAME."""
        target = part(node, "name")
        value_node = node.child_by_field_name("value")
        append = any(c.type == "+=" for c in node.children)
        key: str | None = None
        if target.type == "subscript":
            name = text(part(target, "name"))
            index_node = part(target, "index")
            kv = self.words.value(index_node)
            if isinstance(kv, Unknown):
                raise Unmodelled(f"array subscript known only at run time: {kv.reason}", line_of(node))
            key = kv
        else:
            name = text(target)
        if self.posix and (
            target.type == "subscript" or append or (value_node is not None and value_node.type == "array")
        ):
            raise Unmodelled("arrays or += in a /bin/sh script", line_of(node))
        if value_node is not None and value_node.type == "array":
            self.array_assignment(name, value_node, append, node)
            return name
        value: Value = "" if value_node is None else self.words.value(value_node, assignment=True)
        self.assign(name, value, node, key=key, append=append)
        return name

    def array_assignment(self, name: str, node: Node, append: bool, at: Node) -> None:
        self._tuning(name, at)
        var = self.m.st.vars.get(name)
        assoc = var is not None and var.assoc
        items: dict[str, Value] = {}
        if append and var is not None:
            if isinstance(var.items, Unknown) or (var.items is None and var.maybe_array):
                # appended to unknown elements (perhaps an unread file's array): still unknown
                if var.items is None:
                    var.items = Unknown(f"${{{name}[@]}}: {self.m.st.opaque or 'a sourced file'} may set it")
                var.origin = self.origin(at)
                return
            items = (
                dict(var.items) if var.items is not None else ({} if var.value is None else {"0": var.value})
            )
        after = max((int(k) for k in items), default=-1) + 1  # bash appends after the highest index
        for w in [c for c in node.children if c.type not in ("(", ")")]:
            raw = text(w)
            if w.type in ("concatenation", "word") and re.match(r"\[[^\]]*\]\+?=", raw):
                what = "associative array literal" if assoc else "keyed array element"
                raise Unmodelled(f"{what} {raw[:30]!r}", line_of(w))
            if assoc:
                raise Unmodelled(f"associative array {name} given a list", line_of(w))
            fs = self.words.fields(w)
            if isinstance(fs, Unknown):
                self.m.st.vars[name] = Var(
                    items=fs, exported=var.exported if var else False, origin=self.origin(at)
                )
                return
            for f in fs:  # one by one: the highest index, once per word, made a long list quadratic
                items[str(after)] = join(f)
                after += 1
        new = var if var is not None else Var()
        if var is None:
            self.m.st.vars[name] = new
        new.items, new.value, new.origin, new.maybe_array = items, None, self.origin(at), False
        if "allexport" in self.m.st.opts:
            new.exported = True

    def declaration(self, node: Node) -> int | None:
        keyword = text(node.children[0])
        if keyword == "local" and not self.m.in_function:
            return 1  # bash: "local: can only be used in a function"
        flags: dict[str, bool] = {}
        status: int | None = 0
        names: list[str] = []
        for kid in node.children[1:]:
            if kid.type == "variable_assignment":
                name = text(part(kid, "name")).split("[")[0]
                names.append(name)
                if not NAME.fullmatch(name):  # export 1bad=2: bash says "not a valid identifier"
                    status = 1
                    continue
                self.declare(name, keyword, flags, kid, assignment=kid)
                continue
            fs = self.words.fields(kid)
            if isinstance(fs, Unknown):
                raise Unmodelled(f"{keyword} argument known only at run time: {fs.reason}", line_of(kid))
            words = [join(f) for f in fs]
            names += [w.partition("=")[0] for w in words if isinstance(w, str) and not declaration_option(w)]
            status = self.declare_words(keyword, flags, words, kid) or status
        status = self.listing(keyword, flags, names, status)
        if self.posix and status:  # a special builtin that fails ends dash
            raise ShellExit(status, line_of(node), f"{keyword} failed: dash stops")
        return status

    def listing(
        self, keyword: str, flags: dict[str, bool], names: list[str], status: int | None
    ) -> int | None:
        """A declaration that prints (``declare -p``, ``export -p``, ``export`` or ``declare`` with no
        name, ``declare -f``): what it prints is the shell's listing, known only at run time; ``-p NAME``
        fails (1) for a name not declared, as bash's does."""
        if keyword == "unset" or (names and not flags.get("p") and not flags.get("f")):
            return status
        self.m.output_unknown(f"{keyword} (a listing)")
        if flags.get("p") and any(n not in self.m.st.vars for n in names):
            return 1
        return status

    def declare_words(self, keyword: str, flags: dict[str, bool], words: list[Value], node: Node) -> int:
        """Declaration arguments as words (``export "X=1"``, ``builtin export X=1``): options, then
        ``NAME=value`` or ``NAME``; 1 when a name is not a valid identifier, as bash reports it."""
        status = 0
        for word in words:
            if isinstance(word, Unknown):
                raise Unmodelled(f"{keyword} argument known only at run time: {word.reason}", line_of(node))
            if declaration_option(word):
                for letter in word[1:]:
                    flags[letter] = word[0] == "-"
                continue
            name, eq, rest = word.partition("=")
            if not NAME.fullmatch(name.removesuffix("+")):
                status = 1  # bash: not a valid identifier
                continue
            if eq:
                self.declare(
                    name.removesuffix("+"), keyword, flags, node, value=rest, append=name.endswith("+")
                )
            else:
                self.declare(name, keyword, flags, node)
        return status

    def declare(
        self,
        name: str,
        keyword: str,
        flags: dict[str, bool],
        node: Node,
        *,
        assignment: Node | None = None,
        value: str | None = None,
        append: bool = False,
    ) -> None:
        line = line_of(node)
        self._tuning(name, node)
        for letter in flags:
            if letter not in "xaAgrnpf" or (keyword == "export" and letter not in "nfp"):
                raise Unmodelled(f"{keyword} -{letter}", line)
        if flags.get("n") and keyword != "export":
            raise Unmodelled(f"{keyword} -n (a name reference)", line)
        if "f" in flags:
            raise Unmodelled(f"{keyword} -f (functions)", line)
        if flags.get("p"):
            return
        local = keyword == "local" or (
            keyword in ("declare", "typeset") and self.m.in_function and not flags.get("g")
        )
        if local:
            frame = self.m.st.frames[-1]
            if name in self.m.st.vars and self.m.st.vars[name].readonly:
                raise Unmodelled(f"local {name}: {name} is readonly", line)
            if name not in frame:
                prior = frame[name] = self.m.st.vars.pop(name, None)
                # a local starts unset, keeping only the export attribute of the variable it hides (bash)
                self.m.st.vars[name] = Var(
                    value=None,
                    exported=prior.exported if prior is not None else False,
                    origin=self.origin(node),
                )
        var = self.m.st.vars.get(name)
        if var is None:
            var = self.fresh(name)
            var.origin = self.origin(node)
            self.m.st.vars[name] = var
        if flags.get("A") or flags.get("a"):
            if var.items is None and var.value is None:
                var.assoc = bool(flags.get("A"))
                var.items = {}
            elif bool(flags.get("A")) != var.assoc:
                raise Unmodelled(f"{name} changes between indexed and associative", line)
        if assignment is not None:
            self.assignment(assignment)
            var = self.m.st.vars[name]
        elif value is not None:
            self.assign(name, value, node, append=append)
            var = self.m.st.vars[name]
        if keyword == "export":
            var.exported = not flags.get("n", False)
        elif "x" in flags:
            var.exported = flags["x"]
        elif keyword == "readonly" or flags.get("r"):
            var.readonly = True
        if "allexport" in self.m.st.opts and (assignment is not None or value is not None):
            var.exported = True

    def unset(self, node: Node) -> int:
        mode = "v"
        for child in node.children[1:]:
            fs = self.words.fields(child)
            if isinstance(fs, Unknown):
                raise Unmodelled(f"unset of a name known only at run time: {fs.reason}", line_of(child))
            for f in fs:
                word = join(f)
                if isinstance(word, Unknown):
                    raise Unmodelled(f"unset of a name known only at run time: {word.reason}", line_of(child))
                if word in ("-v", "-f", "-n"):
                    mode = word[1]
                    if mode == "n":
                        raise Unmodelled("unset -n", line_of(child))
                    continue
                if mode == "f":
                    self.m.st.funcs.pop(word, None)
                    continue
                m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\[(.+)\]", word)
                if m is not None:
                    raise Unmodelled(f"unset of an array element {word!r}", line_of(child))
                if not NAME.fullmatch(word):  # bash 5.2 says nothing, older ones 1; dash stops
                    raise Unmodelled(f"unset of {word!r}, not a name", line_of(child))
                if any(word in fr for fr in self.m.st.frames):
                    raise Unmodelled(f"unset of the function-local {word}", line_of(child))
                var = self.m.st.vars.get(word)
                if var is not None and var.readonly:
                    raise Unmodelled(f"unset of the readonly {word}", line_of(child))
                if word in BASH_VARS or word == "PWD":
                    raise Unmodelled(f"unset of bash's {word}", line_of(child))
                self._tuning(word, child)
                if mode == "v" and var is None and word in self.m.st.funcs:
                    self.m.st.funcs.pop(word)  # bash: unset NAME falls back to the function
                if self.posix and word == "OPTIND":
                    raise Unmodelled("unset OPTIND in a /bin/sh script (dash stops)", line_of(child))
                self.m.st.vars.pop(word, None)
                if self.m.st.opaque is not None or word in BASH_DEFAULTS:
                    # known unset now, whatever the unread file did, and not the shell's default
                    self.m.st.vars[word] = Var(value=None, exported=False, origin=self.origin(child))
        return 0
