"""A bash script as a syntax tree: tree-sitter-bash, checked and bounded, with the evaluator's node helpers.

Why tree-sitter-bash: it is a complete, maintained bash grammar with wheels for aarch64 (DGX Spark) and
x86-64, and its concrete tree keeps every quote and expansion, so the evaluator can apply bash's own rules
word by word (bashlex, the first candidate, stops at ``case`` and drops quoting). Where tree-sitter marks
an error, bash itself decides: ``bash -n`` (parse only, nothing runs) tells a real syntax error (the script
is broken: one line, exit 65) from a construct the grammar does not know (the reading is unresolved).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch.shell.command_line import shebang_line
from validator.sources.launch.shell.values import Unmodelled

MAX_SCRIPT_BYTES = 1 << 20  # launcher scripts are a few KB; a bigger file is not one
MAX_NESTING = 200  # syntax-tree depth; the evaluator recurses along it


def parse(source: bytes, where: str, shell: str = "bash") -> Tree:
    """The tree-sitter tree of ``source``.

    A NUL byte, an oversized file or a tree deeper than MAX_NESTING is InputError; a syntax error bash
    also reports is InputError naming the line; one only tree-sitter reports is UnresolvedLaunch."""
    if len(source) > MAX_SCRIPT_BYTES:
        raise InputError(where, f"larger than {MAX_SCRIPT_BYTES} bytes: not a launcher script")
    if b"\x00" in source:
        raise InputError(
            where, "NUL byte: not a shell script", source.count(b"\n", 0, source.index(b"\x00")) + 1
        )
    parser = Parser(Language(tree_sitter_bash.language()))
    tree = parser.parse(source)
    deep = _too_deep(tree)
    if deep is not None:
        raise InputError(where, f"nested deeper than {MAX_NESTING} levels: not a launcher script", deep)
    bad = _first_error(tree.root_node)
    if bad is None:
        bad = _misread(tree)
    complaint = _bash_syntax_error(source, shell)
    if bad is None:
        # the grammar also accepts what bash refuses (a here-document whose end word shares its line):
        # bash, which would stop there, has the last word
        if complaint is not None and not complaint.startswith("bash could not"):
            raise InputError(where, f"shell syntax error: {complaint}")
        return tree
    line = line_of(bad)
    if complaint is not None:
        raise InputError(where, f"shell syntax error: {complaint}", line)
    raise UnresolvedLaunch(
        f"{where}:{line}: the reader's bash grammar does not parse {text(bad)[:40]!r} (bash does)"
    )


_RESERVED = {"then", "else", "elif", "fi", "do", "done", "esac", "}", ";;", "in"}


def _misread(tree: Tree) -> Node | None:
    """A node where the grammar silently misreads bash: a reserved word such as ``else`` taken for a
    command name (it does so after assignments that end a line), which moves the statements around it."""
    return next((n for n, _ in _nodes(tree) if n.type == "command_name" and text(n) in _RESERVED), None)


def _bash_syntax_error(source: bytes, shell: str = "bash") -> str | None:
    """The shell's own complaint about ``source`` with ``-n`` (read commands, execute none), else None."""
    try:
        proc = subprocess.run(
            [shell, "-n", "/dev/stdin"], input=source, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "bash could not be asked to confirm it"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0].replace("/dev/stdin: ", "") if lines else f"{shell} -n exits {proc.returncode}"


def _too_deep(tree: Tree) -> int | None:
    """The line where the tree first gets deeper than MAX_NESTING, else None."""
    return next((line_of(n) for n, depth in _nodes(tree) if depth > MAX_NESTING), None)


def _nodes(tree: Tree) -> Iterator[tuple[Node, int]]:
    """Every node of ``tree`` with its depth, in source order, walked iteratively (no recursion limit)."""
    cursor = tree.walk()
    depth = 0
    while True:
        if cursor.node is not None:  # a cursor always stands on a node
            yield cursor.node, depth
        if cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            depth -= 1


def _first_error(node: Node) -> Node | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    if not node.has_error:
        return None
    for child in node.children:
        found = _first_error(child)
        if found is not None:
            return found
    return node


def node_bytes(node: Node) -> bytes:
    """The source bytes of ``node`` (a tree parsed here always keeps its source)."""
    return node.text or b""


def text(node: Node) -> str:
    """The source text of ``node``."""
    return node_bytes(node).decode("utf-8", "replace")


def part(node: Node, name: str) -> Node:
    """``node``'s child in the grammar's field ``name``, one the grammar gives every node of its type."""
    found = node.child_by_field_name(name)
    if found is None:
        raise Unmodelled(f"{node.type.replace('_', ' ')} without its {name}: {snippet(node)}", line_of(node))
    return found


def inner(node: Node, open_: str, close: str) -> list[Node]:
    return [c for c in node.children if c.type not in (open_, close)]


def line_of(node: Node) -> int:
    """``node``'s 1-based line."""
    return int(node.start_point[0]) + 1


def snippet(node: Node) -> str:
    """``node``'s text on one line, at most 60 characters (for messages)."""
    flat = " ".join(text(node).split())
    return flat if len(flat) <= 60 else flat[:57] + "..."


def field_of(parent: Node, child: Node) -> str | None:
    """The grammar's field name of ``child`` in ``parent`` (``argument``, ``name``, ...), read for all of the
    last parent's children at once (else a command of many words is quadratic). The cache holds the parent
    itself and compares with ``==`` (node and tree): a node id alone matched a node of another tree
    allocated where a freed one had been, and gave it the other's field names."""
    cached, names = _FIELDS_OF[0]  # one tuple, replaced whole: two threads reading never mix two entries
    if cached is None or cached != parent:
        names = {}
        for i, c in enumerate(parent.children):
            name = parent.field_name_for_child(i)
            names[c.id] = str(name) if name is not None else None
        _FIELDS_OF[0] = (parent, names)
    return names.get(child.id)


# the last parent asked about, and its children's field names by node id
_FIELDS_OF: list[tuple[Node | None, dict[int, str | None]]] = [(None, {})]


POSIX_SHELLS = {"sh", "dash", "ash", "posh"}


def interpreter(source: bytes) -> str:
    """The shell that runs the script as ``./start.sh``: ``bash`` (also with no ``#!`` line, as bash runs
    such a file itself), ``sh`` for a POSIX shell (dash on Ubuntu and Debian), or another program's name."""
    words = _shebang(source).split()
    if not words:
        return "bash"
    name = words[0].rsplit("/", 1)[-1]
    if name == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        name = rest[0].rsplit("/", 1)[-1] if rest else "env"
    return "sh" if name in POSIX_SHELLS else name


def _shebang(source: bytes) -> str:
    """The ``#!`` line after ``#!`` as Linux reads it (:func:`shebang_line`); empty where there is none."""
    return shebang_line(source) or ""


OPTION_LETTERS = {
    "e": "errexit",
    "u": "nounset",
    "a": "allexport",
    "f": "noglob",
    "x": "xtrace",
    "v": "verbose",
}


def interpreter_options(source: bytes) -> set[str] | None:
    """The shell options the ``#!`` line switches on (``#!/bin/bash -eu``, ``#!/usr/bin/env -S bash -e``), or
    None for options not modelled. Linux hands the rest of the line to the interpreter as one argument."""
    line = _shebang(source).strip()
    words = line.split()
    if not words:
        return set()
    if words[0].rsplit("/", 1)[-1] == "env":
        if len(words) > 1 and words[1] == "-S":
            args = words[3:]
        elif len(words) > 2:
            return None  # env is handed "bash -e" as one program name, and fails
        else:
            args = []
    else:
        rest = line[len(words[0]) :].strip()
        args = [rest] if rest else []
    opts: set[str] = set()
    for a in args:
        if not (a.startswith("-") and len(a) > 1 and all(c in OPTION_LETTERS for c in a[1:])):
            return None
        opts |= {OPTION_LETTERS[c] for c in a[1:]}
    return opts
