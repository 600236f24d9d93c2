"""What a piece of script can change, read from its syntax alone: the variables it may assign, and
whether it may change the directory, the positional parameters or the disk.

Why: a loop over words known only at run time (``for s in "$dir"/*/``) runs its body an unknown number of
times; its effects are what its body can change and nothing else (``Compound.for_unknown``), known before
it runs only from the syntax. Where the syntax cannot bound them (``eval``, ``source``, a function
defined in the body, a computed command name) the answer is a reason, and the construct stays
unmodelled. It reads syntax nodes and the functions defined so far, never the state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from validator.sources.launch.shell.programs import READ_ONLY
from validator.sources.launch.shell.syntax import field_of, node_bytes, part, text

# simple commands that assign no variable and leave the directory, the arguments and the disk alone
# (beyond their redirections, counted apart)
_PURE = {
    ":", "true", "false", "echo", "printf", "test", "[", "return", "break", "continue", "exit", "wait",
    "compgen", "type", "caller", "umask", "times", "jobs", "help", "dirs", "history", "bind", "complete",
    "disown",
}  # fmt: skip
_NOT_BOUNDED = {
    "eval", "source", ".", "exec", "trap", "alias", "unalias", "shopt", "enable", "hash", "mapfile",
    "readarray", "builtin", "command", "set", "pushd", "popd", "kill", "fc", "suspend", "logout",
    "fg", "bg", "ulimit",
}  # fmt: skip
_ARITH_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\])?\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)")
_ARITH_STEP = re.compile(r"(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*)\s*(?:\+\+|--)")
_MAX_FUNCTIONS = 32  # distinct functions followed from one body


@dataclass
class Effects:
    """What a body may change."""

    names: set[str] = field(default_factory=set)  # variables it may assign or unset
    exports: set[str] = field(default_factory=set)  # variables whose export attribute it may change
    cwd: bool = False
    positional: bool = False
    disk: bool = False
    exits: bool = False  # it may end the shell (exit)
    locals: set[str] = field(default_factory=set)  # names it declares local
    calls: set[str] = field(default_factory=set)  # the script's functions it calls (when not followed)


def effects_of(nodes: list[Node], funcs: dict[str, Node], *, follow: bool = True) -> Effects | str:
    """The effects of running ``nodes`` (with the functions ``funcs`` defined), or why they cannot be
    bounded from the syntax. ``follow``: the functions it calls count with their effects; else they are
    listed in ``calls``."""
    out = Effects()
    seen: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        why = _one(node, out, funcs, seen, stack, follow)
        if why is not None:
            return why
    return out


def function_redirects(body: Node) -> list[Node]:
    """The redirections of the function whose body is ``body`` (``f() { ...; } >&2``), which bash makes
    at each call: the definition's own, and those the grammar gives to a statement around it."""
    definition = body.parent
    if definition is None or definition.type != "function_definition":
        return []
    out = [
        c
        for c in definition.children
        if c.type in ("file_redirect", "heredoc_redirect", "herestring_redirect")
    ]
    around = definition.parent
    if (
        around is not None
        and around.type == "redirected_statement"
        and around.child_by_field_name("body") == definition
    ):
        out += [c for c in around.children if field_of(around, c) == "redirect"]
    return out


def definition_bytes(body: Node) -> bytes:
    """A function's text as it acts: its body and its redirections."""
    return node_bytes(body) + b"".join(node_bytes(r) for r in function_redirects(body))


def is_pure(
    name: str,
    funcs: dict[str, Node],
    depth: int = 0,
    within: frozenset[str] = frozenset(),
    memo: dict[tuple[object, ...], bool] | None = None,
) -> bool:
    """The function ``name`` changes nothing its caller can see: it assigns only its own locals, leaves
    the directory, the disk and the shell alone, never exits, and calls only functions like it (no
    recursion). Its call then yields a status and an output, nothing else."""
    if name in within or depth > 8:
        return False
    key = (
        name,
        *sorted((n, definition_bytes(b)) for n, b in funcs.items()),
    )  # the same text, the same answer
    if memo is not None and key in memo and not within:
        known: bool = memo[key]
        return known
    fx = effects_of([funcs[name], *function_redirects(funcs[name])], funcs, follow=False)
    pure = not (isinstance(fx, str) or fx.cwd or fx.disk or fx.exits or fx.names - fx.locals) and all(
        is_pure(c, funcs, depth + 1, within | {name}, memo) for c in fx.calls
    )
    if memo is not None and not within:
        memo[key] = pure
    return pure


def _one(
    node: Node, out: Effects, funcs: dict[str, Node], seen: set[str], stack: list[Node], follow: bool
) -> str | None:
    t = node.type
    if t == "function_definition":
        return "a function defined inside it"
    if t == "variable_assignment":
        target = node.child_by_field_name("name")
        if target is not None:
            out.names.add(text(part(target, "name") if target.type == "subscript" else target))
    elif t == "for_statement":
        var = node.child_by_field_name("variable")
        if var is not None:
            out.names.add(text(var))
    elif t == "declaration_command":
        keyword = text(node.children[0])
        declared: set[str] = set()
        for arg in node.children[1:]:
            if arg.type == "variable_assignment":
                name = arg.child_by_field_name("name")
                if name is not None:
                    declared.add(text(name).split("[")[0])
                continue
            raw = text(arg)
            if raw.startswith(("-", "+")):
                if "n" in raw or "f" in raw:
                    return f"{keyword} {raw}"
                continue
            if arg.type not in ("word", "variable_name") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
                return f"{keyword} of a name known only at run time"
            declared.add(raw)
        out.names |= declared
        if keyword in ("local", "declare", "typeset") and "-g" not in [text(a) for a in node.children]:
            out.locals |= declared
        if keyword != "local":
            out.exports |= declared
    elif t == "unset_command":
        for arg in node.children[1:]:
            raw = text(arg)
            if raw.startswith("-"):
                if raw != "-v":
                    return f"unset {raw}"
                continue
            if arg.type not in ("word", "variable_name") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
                return "unset of a name known only at run time"
            out.names.add(raw)
    elif t == "expansion":
        raw = text(node)
        m = re.match(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=", raw)
        if m is not None:  # ${name:=d} assigns; ${!name} and the rest only read
            out.names.add(m.group(1))
    elif t in ("arithmetic_expansion", "c_style_for_statement") or (
        t == "compound_statement" and node.children and node.children[0].type == "(("
    ):
        _arith(text(node), out)
    elif t == "file_redirect":
        dest = node.child_by_field_name("destination")
        ops = {c.type for c in node.children}
        if ops & {">", ">>", ">|", "&>", "&>>", "<>"} and (dest is None or text(dest) != "/dev/null"):
            out.disk = True
    elif t == "command":
        why = _command(node, out, funcs, seen, stack, follow)
        if why is not None:
            return why
    stack.extend(node.children)
    return None


def _arith(raw: str, out: Effects) -> None:
    for m in _ARITH_ASSIGN.finditer(raw):
        out.names.add(m.group(1))
    for m in _ARITH_STEP.finditer(raw):
        out.names.add(m.group(1) or m.group(2))


def _command(
    node: Node, out: Effects, funcs: dict[str, Node], seen: set[str], stack: list[Node], follow: bool
) -> str | None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return None  # assignments alone: their own nodes
    word = name_node.children[0] if name_node.children else name_node
    if word.type != "word":
        return "a command whose name is computed"
    name = text(word)
    args = [c for c in node.children if c.type not in ("command_name", "variable_assignment")]
    words = [text(a) for a in args if a.type in ("word", "raw_string", "string", "number")]
    if name in funcs:
        out.calls.add(name)
        if follow and name not in seen:
            if len(seen) >= _MAX_FUNCTIONS:
                return "too many functions called"
            seen.add(name)
            stack += [funcs[name], *function_redirects(funcs[name])]
        return None
    if name == "command" and words[:1] in (["-v"], ["-V"]):
        return None
    if name in _NOT_BOUNDED:
        return f"{name}, whose effects the syntax does not bound"
    if name == "exit":
        out.exits = True
    elif name == "cd":
        out.cwd = True
        out.names |= {"OLDPWD"}
    elif name == "shift":
        out.positional = True
    elif name == "printf":
        if "-v" in words:
            k = words.index("-v")
            if k + 1 >= len(words) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[k + 1]):
                return "printf -v of a name known only at run time"
            out.names.add(words[k + 1])
    elif name == "read":
        names = [w for w in words if not w.startswith("-")]
        if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w) for w in names) or len(names) != len(
            [a for a in args if not text(a).startswith("-")]
        ):
            return "read into names known only at run time"
        out.names |= set(names) or {"REPLY"}
    elif name == "getopts":
        if len(words) < 2 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[1]):
            return "getopts into a name known only at run time"
        out.names |= {words[1], "OPTIND", "OPTARG"}
    elif name == "let":
        for w in words:
            _arith(w, out)
    elif name in ("export", "declare", "typeset", "local", "readonly", "unset"):
        return f"{name} as a command word"
    elif name not in _PURE and name not in READ_ONLY:
        out.disk = True  # a program that may write (mkdir, cp, tee), or one the reader does not know
    return None


__all__ = ["Effects", "effects_of"]
