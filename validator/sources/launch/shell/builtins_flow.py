"""The builtins that steer control flow or run other code: ``false``, ``test``/``[``,
``exit``, ``return``, ``break``/``continue`` (raised as ``ShellExit``, ``ShellReturn``, ``LoopJump`` for
the statements to catch), ``eval`` and ``source`` (parsed and run in place, ``source`` found on ``PATH``
as bash finds it), ``cd`` (against the disk, unless the script may have made the directory) and ``trap``
(an ``EXIT`` trap is noted: the path's end is then unresolved; ``DEBUG``/``RETURN``/``ERR`` are not
modelled).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tree_sitter import Node, Tree

from validator.bounded_files import read_bounded
from validator.sources.launch.shell.api import Builtin, Shell
from validator.sources.launch.shell.conditions import test_words
from validator.sources.launch.shell.machine import Prefix, heredoc_text, known_words, others_could_write
from validator.sources.launch.shell.state import MAX_DEPTH, LoopJump, ShellExit, ShellReturn, Var
from validator.sources.launch.shell.syntax import MAX_SCRIPT_BYTES, line_of, parse, text
from validator.sources.launch.shell.values import (
    Field,
    Unknown,
    Unmodelled,
    Value,
    count,
    join,
    join_with,
    process_file,
)
from validator.trusted_files import UnsafeLocation, look_unplanted, walk_unplanted


def b_false(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    return ev.m.errexit(1, node, "false")


def b_test(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    return ev.m.errexit(test_words(ev.tests, words, node), node, "test")


def b_bracket(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    if not words or words[-1] != "]":
        return ev.m.errexit(2, node, "[")
    return ev.m.errexit(test_words(ev.tests, words[:-1], node), node, "[")


def _status_given(ev: Shell, args: list[Field]) -> int | None:
    """``exit N``/``return N``: N modulo 256 (None: known only at run time); without N, ``$?``."""
    if not args:
        return ev.m.st.status
    w = join(args[0])
    n = count(w) if isinstance(w, str) else None
    return None if n is None else n & 255


def b_exit(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    status = _status_given(ev, args)
    raise ShellExit(status, line_of(node), f"exit {status if status is not None else '?'}")


def b_return(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    if not ev.m.in_function and ev.m.depth == 0:
        if ev.m.posix:  # dash ends the shell (or the subshell) with the status
            raise Unmodelled("return outside a function, where dash and bash differ", line_of(node))
        return ev.m.errexit(2, node, "return")  # bash: "can only `return' from a function", status 2
    raise ShellReturn(_status_given(ev, args))


def b_loop(kind: str) -> Builtin:
    def run(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
        words = known_words(args, node, kind)
        # bash: a count that is no number ends the shell (128), 0 or two words fail; dash stops on each
        n = count(words[0]) if len(words) == 1 else (1 if not words else None)
        if not n:
            raise Unmodelled(f"{kind} {' '.join(words)!r}", line_of(node))
        if ev.m.loops == 0:  # in no loop of its own (a function's body, bash's subshell, the top level)
            if ev.m.posix and ev.m.hidden_loops:
                raise Unmodelled(
                    f"{kind} in a subshell inside a loop, where dash and bash differ", line_of(node)
                )
            return ev.m.errexit(0, node, kind)  # bash and dash: nothing happens, status 0
        raise LoopJump(kind, n)

    return run


def b_eval(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    joined = join_with(words, " ")
    if isinstance(joined, Unknown):
        raise Unmodelled(f"eval of text known only at run time: {joined.reason}", line_of(node))
    if not joined.strip():
        return ev.m.errexit(0, node, "eval")
    tree = _parsed(ev, joined.encode(), f"{ev.m.file}:{line_of(node)} (eval)")
    return ev.block(list(tree.root_node.children))


def b_source(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        return ev.m.errexit(2, node, "source")
    target = words[0]
    if isinstance(target, Unknown):
        return _unread(ev, f"the file sourced at line {line_of(node)} ({target.reason})", node)
    if target in STDIN_FILES:
        body = stdin_text(ev, node)
        if isinstance(body, Unknown):
            why = f"{target} sourced at line {line_of(node)} ({body.reason})"
            return _unread(ev, why, node, may_be_missing=False)
        name = f"{ev.m.file}:{line_of(node)} (here-document)"
        return _run_sourced(ev, _parsed(ev, body.encode("utf-8", "surrogateescape"), name), name, words, node)
    if target.startswith(("/dev/fd/", "/proc/")):
        return _unread(ev, f"{target} sourced at line {line_of(node)} (a descriptor or process file)", node)
    path = _find_source(ev, target, node)
    if isinstance(path, Unknown):
        return _unread(ev, f"{target} (sourced at line {line_of(node)}: {path.reason})", node)
    if path is None and ev.m.posix:  # dash: a special builtin's failure ends a non-interactive shell
        raise ShellExit(2, line_of(node), f". {target}: no such file (dash stops)")
    if path is None:
        return _unread(ev, f"{target} (sourced at line {line_of(node)}, no such file here)", node)
    written = ev.m.file_text(path)
    if written is not None:
        data = written.encode("utf-8", "surrogateescape")
    else:
        others = others_could_write(path, ev.m.script_owner)
        if others:  # what bash reads at the start may be another user's: not what is here now
            why = f"{target} (sourced at line {line_of(node)}: another user could change it: {others[0]})"
            return _unread(ev, why, node, may_be_missing=False)
        data = read_bounded(Path(path), MAX_SCRIPT_BYTES, "sourced file", names=True)
    return _run_sourced(ev, _parsed(ev, data, path), path, words, node)


# the most text whose trees one reading keeps (900 evals of 280 KB each kept 5.8 GB of trees)
MAX_KEPT_TREES_BYTES = 2 * 1024 * 1024
# the most text one reading parses for ``source`` and ``eval`` (each distinct text once): past it, minutes
MAX_PARSED_BYTES = 4 * 1024 * 1024


def _parsed(ev: Shell, data: bytes, name: str) -> Tree:
    """``parse`` once per reading for the same text and name (a failure is not kept: it raises again),
    within ``MAX_PARSED_BYTES`` of new text in all (past it, the path is unresolved)."""
    memo = ev.m.memo
    tree = memo.trees.get((data, name))
    if tree is None:
        memo.parsed_bytes += len(data)
        if memo.parsed_bytes > MAX_PARSED_BYTES:
            raise Unmodelled(
                f"the texts sourced or eval'd are over {MAX_PARSED_BYTES} bytes in all", ev.m.line
            )
        tree = parse(data, name)
        if memo.tree_bytes + len(data) <= MAX_KEPT_TREES_BYTES:  # kept within a bound: an eval in a loop
            memo.trees[(data, name)] = tree  # of a text that differs each time would keep every tree
            memo.tree_bytes += len(data)
    return tree


# the names of the script's own standard input: sourcing one reads the command's here-document
STDIN_FILES = ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _unread(ev: Shell, why: str, node: Node, *, may_be_missing: bool = True) -> int | None:
    """A sourced file whose text is not known here: bash reads it at run time. Where it may be missing
    then too, that is one path (``source`` fails, nothing is set, as here); the other is the file there
    at run time, setting anything: every variable is unknown from here on, and so is the status of
    ``source``."""
    if may_be_missing:
        labels = [f"{why} is there at run time", f"{why} is missing at run time too"]
        if ev.m.decide(2, labels, node) == 1:
            return ev.m.errexit(1, node, f"source {why}")
    ev.m.notes.append(f"{ev.m.file}:{line_of(node)}: source {why}: every variable is unknown from here on")
    ev.m.missing_source.append(why)
    ev.m.opaque_from(why)
    return ev.m.errexit(None, node, f"source {why}")


def stdin_text(ev: Shell, node: Node) -> Value:
    """What a command reads on its standard input when that is a here-document or here-string given to
    it: the text, when it is static (a quoted delimiter, or no expansion in it) or a known here-string;
    Unknown otherwise, and for input from anywhere else (the script's own stdin, a file, a pipe)."""
    holders = [node]
    if node.parent is not None and node.parent.type == "redirected_statement":
        holders.append(node.parent)
    kinds = ("herestring_redirect", "heredoc_redirect", "file_redirect")
    redirects = [c for h in holders for c in h.children if c.type in kinds]
    found: Value = Unknown("the script's own standard input")
    for r in sorted(redirects, key=lambda c: c.start_byte):
        fd = next((c for c in r.children if c.type == "file_descriptor"), None)
        if fd is not None and text(fd) != "0":
            continue
        if r.type == "herestring_redirect":
            word = next(c for c in r.children if c.type != "<<<")
            value = ev.words.value(word)
            found = value + "\n" if isinstance(value, str) else value
        elif r.type == "heredoc_redirect":
            found = heredoc_text(r)
        elif any(c.type in ("<", "<&", "<>") for c in r.children):
            found = Unknown("input redirected from a file")
    return found


def _run_sourced(ev: Shell, tree: Tree, path: str, words: list[Value], node: Node) -> int | None:
    target = words[0]
    assert isinstance(target, str)
    ev.m.depth += 1
    if ev.m.depth > MAX_DEPTH:
        raise Unmodelled(f"sourced files nested deeper than {MAX_DEPTH}", line_of(node))
    saved_file, saved_pos = ev.m.file, ev.m.st.positional
    if len(words) > 1:
        ev.m.st.positional = words[1:]
    ev.m.file = path
    ev.m.st.sources.append(target)
    try:
        status = ev.block(list(tree.root_node.children))
    except ShellReturn as r:
        status = r.status
    except Unmodelled as um:
        um.where = um.where or path
        raise
    finally:
        ev.m.file = saved_file
        ev.m.st.sources.pop()
        if len(words) > 1:
            ev.m.st.positional = saved_pos
        ev.m.depth -= 1
    ev.m.st.status = status
    return status


def _find_source(ev: Shell, target: str, node: Node) -> str | Unknown | None:
    """The file ``source NAME`` reads: with a slash, relative to the directory; without, the first
    readable file on ``$PATH``, then the directory (bash outside POSIX mode). None: no such file here;
    Unknown: which file, or its text, is known only at run time (bash reads it then)."""
    candidates: list[str] = []
    cwd = ev.m.st.cwd
    if "/" not in target:
        path = ev.vars.scalar("PATH")
        if isinstance(path, Unknown):
            return _cannot_tell(ev, f"searched on a PATH known only at run time ({path.reason})", node)
        for d in (path or "").split(":"):
            if not d.startswith("/"):
                ev.m.uses_cwd(d)
                if isinstance(cwd, Unknown):
                    return _cannot_tell(ev, f"a relative PATH entry ({cwd.reason})", node)
                d = os.path.join(cwd, d or ".")
            candidates.append(os.path.join(d, target))
    if isinstance(cwd, Unknown) and not target.startswith("/"):
        return _cannot_tell(ev, cwd.reason, node)
    ev.m.uses_cwd(target)  # bash looks in the directory too (outside POSIX mode) or only there
    if "/" in target or not ev.m.posix:  # dash's . looks only on PATH for a name with no slash
        candidates.append(os.path.normpath(os.path.join(str(cwd), target)))
    for c in candidates:
        if ev.m.file_text(c) is not None:
            return c  # written by the script whole, with text known here
        if ev.m.changed(c):
            return _cannot_tell(ev, f"{c} may have been written by the script", node)
        try:  # a link another user could have planted on the way is not looked through (what it points
            # at would show in the words below): what bash reads there is theirs to choose
            st, readable = _walked(c)
        except UnsafeLocation as exc:
            return _cannot_tell(ev, f"another user could change it: {exc}", node)
        except OSError:
            continue  # absent, or a directory on the way cannot be searched: bash finds nothing there
        if stat.S_ISREG(st.st_mode) and readable:
            return c
        if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            return _cannot_tell(ev, f"{c} is not a regular file: bash reads what comes through it", node)
    return None


def _walked(c: str) -> tuple[os.stat_result, bool]:
    """What stands at ``c`` and whether this process may read it, judged where :func:`walk_unplanted`
    arrived. A second look by name would follow whatever link stands on the way by then: another user who
    swaps theirs in between would learn whether a file exists where they cannot look."""
    dfd, name, _planters = walk_unplanted(c)
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return st, os.access(name, os.R_OK, dir_fd=dfd, follow_symlinks=False)
    finally:
        os.close(dfd)


def _cannot_tell(ev: Shell, why: str, node: Node) -> Unknown:
    if ev.m.posix:  # dash stops where the file is missing: which of the two is not modelled
        raise Unmodelled(f". of a file known only at run time: {why}", line_of(node))
    return Unknown(why)


def b_cd(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    while words and isinstance(words[0], str) and words[0] in ("-L", "--"):
        words = words[1:]
    if words and isinstance(words[0], str) and words[0].startswith("-") and words[0] != "-":
        raise Unmodelled(f"cd {words[0]}", line_of(node))
    if len(words) > 1:
        return ev.m.errexit(1, node, "cd")  # bash: too many arguments
    if not words:
        target: Value | None = ev.vars.scalar("HOME")
        if target is None:
            return ev.m.errexit(1, node, "cd")
    else:
        target = words[0]
    if isinstance(target, Unknown):
        ev.m.st.cwd, ev.m.st.cwd_given = (
            Unknown(f"the directory is computed at run time ({target.reason})"),
            True,
        )
        return ev.m.errexit(None, node, "cd")
    if target in ("", "-"):
        raise Unmodelled(f"cd {target!r}", line_of(node))
    cdpath = ev.vars.scalar("CDPATH")
    if cdpath and not target.startswith(("/", "./", "../")) and target not in (".", ".."):
        raise Unmodelled("cd with CDPATH set", line_of(node))
    if isinstance(ev.m.st.cwd, Unknown) and not target.startswith("/"):
        return ev.m.errexit(None, node, "cd")
    ev.m.uses_cwd(target)
    given = ev.m.st.cwd_given or target.startswith("/")  # a relative cd keeps the assumed directory's part
    new = os.path.normpath(os.path.join(str(ev.m.st.cwd), target))
    if new.startswith("//"):
        new = "/" + new.lstrip("/")
    if ev.m.changed(new) or process_file(new):
        why = (
            "a process's files, known only at run time"
            if process_file(new)
            else "a directory the script may have created"
        )
        ev.m.st.cwd, ev.m.st.cwd_given = Unknown(f"cd {target}: {why}"), True
        return ev.m.errexit(None, node, "cd")
    try:  # walked, never looked at by name: whether it is there may be the script owner's to know
        found = look_unplanted(new, os.X_OK)
    except UnsafeLocation:
        ev.m.st.cwd, ev.m.st.cwd_given = (
            Unknown(f"cd {target}: not a place the script's owner could look"),
            True,
        )
        return ev.m.errexit(None, node, "cd")
    except OSError:
        found = None
    if found is None or not stat.S_ISDIR(found.st_mode):
        return ev.m.errexit(1, node, f"cd {target}")
    old = ev.m.st.cwd
    ev.m.st.cwd, ev.m.st.cwd_given = new, given
    var = ev.m.st.vars.get("OLDPWD")  # bash sets and exports OLDPWD at each cd
    if var is None:
        ev.m.st.vars["OLDPWD"] = Var(value=old, exported=True, origin="bash")
    else:
        var.value = old
    return ev.m.errexit(0, node, "cd")


def b_trap(ev: Shell, args: list[Field], prefix: Prefix, node: Node) -> int | None:
    words = [join(f) for f in args]
    sigs = words[1:]
    if any(isinstance(s, Unknown) for s in sigs) or not sigs:
        if not words or words in (["-l"], ["-p"]):
            ev.m.output_unknown("trap (a listing)")  # the traps set (bash lists its parent's in $( ))
            return ev.m.errexit(0, node, "trap")
        raise Unmodelled("trap on signals known only at run time", line_of(node))
    for s in sigs:
        assert isinstance(s, str)
        name = s.upper().removeprefix("SIG")
        if name in ("DEBUG", "RETURN", "ERR"):
            raise Unmodelled(f"trap on {name}: it runs code around every command", line_of(node))
        if name in ("EXIT", "0"):
            if words[0] in ("", "-"):  # ignored or reset: nothing runs at exit
                ev.m.st.traps.pop("EXIT", None)
            else:
                ev.m.st.traps["EXIT"] = f"the EXIT trap set at line {line_of(node)} runs at exit"
    return ev.m.errexit(0, node, "trap")
