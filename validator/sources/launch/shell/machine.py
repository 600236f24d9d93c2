"""One path's machine: the state carried along a path and the rules every statement shares, running no
statement itself. The bookkeeping (state, call depth, the file being read, notes), the forks (``decide``,
``known_status``, over ``paths.Forks``), ``set -e`` (``errexit``; ``ignoring`` in conditions), what the
script may have changed on the disk (``touch``, ``changed``, ``file_text``), what a construct known only at
run time may have changed (``opaque_from``, ``unknown_effects``), and what commands print inside ``$(...)``
(``capturing``, ``emit``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tree_sitter import Node

from validator.sources.launch.shell.effects import Effects
from validator.sources.launch.shell.paths import Forks
from validator.sources.launch.shell.state import Memo, ShellExit, State, Var
from validator.sources.launch.shell.syntax import line_of, node_bytes, text
from validator.sources.launch.shell.values import Field, Unknown, Unmodelled, Value, join
from validator.trusted_files import UnsafeLocation, creatable_by_others, look_unplanted


class Machine:
    """One path through the script, the decisions at its forks given by ``forks``."""

    def __init__(
        self,
        script: Path,
        forks: Forks,
        *,
        posix: bool = False,
        opts: set[str] | None = None,
        owner: tuple[int, ...] = (),
        memo: Memo | None = None,
        zero: str | None = None,
    ) -> None:
        self.script = script
        self.command_string = zero is not None  # a -c string: $0 is the word after it, BASH_SOURCE unmodelled
        self.zero = str(script) if zero is None else zero
        self.forks = forks
        self.steps = 0
        self.depth = 0
        self.ignore_errexit = 0
        self.in_function = 0
        self.loops = 0  # the loops being run, enclosing this statement (break N past them: the outermost)
        # a bash subshell hides loops around it (dash's keeps them, and break ends the subshell)
        self.hidden_loops = False
        self.st: State
        self.file = str(script)  # the file whose statements run now
        self.notes: list[str] = []
        self.missing_source: list[str] = []
        # other scripts this one runs as programs (not followed): "X (line N)"
        self.scripts_run: list[str] = []
        self.cwd_read = False  # a relative path was read against the directory the reading assumed
        self.line = 0
        self.initial_opts = set(opts or ())  # what the #! line switches on (#!/bin/bash -e)
        self.posix = posix  # a #!/bin/sh script: only what POSIX sh and bash do alike is modelled
        self.survived: list[str] = []  # commands taken to succeed because set -e would exit otherwise
        self.capturing: list[Value] | None = None  # inside $(...): what the commands print
        self.substitutions = 0  # how many $(...) ran on this path: a command without a name takes $?'s
        self.statement_substitutions = 0  # how many had when this statement began (dash's $? lags)
        self.memo = Memo() if memo is None else memo  # shared by the paths of one reading
        self.script_owner = owner  # the script file's owner: files of theirs it sources add no writer
        self.bare_exec: Node | None = None  # the last ``exec`` run with no command: its redirections stay

    def uses_cwd(self, path: str) -> None:
        """``path`` is found from the working directory: where no cd set it, the reading relies on the
        directory it assumed the script starts in (``--script``: the script's own)."""
        if not path.startswith("/") and not self.st.cwd_given:
            self.cwd_read = True

    # -- forks ------------------------------------------------------------------------------------------

    def decide(self, n: int, labels: list[str], node: Node) -> int:
        return self.forks.decide(n, labels, f"{self.file}:{line_of(node)}")

    def known_status(self, status: int | None, what: str, node: Node) -> bool:
        """Whether a status counts as success; an unknown one is a fork."""
        if status is not None:
            return status == 0
        return self.decide(2, [f"{what} succeeded", f"{what} failed"], node) == 0

    # -- set -e ----------------------------------------------------------------------------------------

    def errexit(self, status: int | None, node: Node, what: str) -> int | None:
        """``set -e``: a failed simple command, pipeline or subshell outside a condition ends the script.
        An unknown status there is taken as success (the path where it failed launches nothing)."""
        self.st.status = status
        if "errexit" not in self.st.opts or self.ignore_errexit:
            return status
        if status is None:
            # with an EXIT trap the path where it failed runs the trap, which may start the server: a fork
            if self.st.traps.get("EXIT") and not self.known_status(None, what, node):
                raise ShellExit(1, line_of(node), f"set -e: {what} failed")
            if not self.st.traps.get("EXIT"):
                self.survived.append(f"{self.file}:{line_of(node)}: {what} succeeded")
            self.st.status = 0
            return 0
        if status != 0:
            raise ShellExit(status, line_of(node), f"set -e: {what} failed (status {status})")
        return status

    @contextmanager
    def ignoring(self) -> Iterator[None]:
        self.ignore_errexit += 1
        try:
            yield
        finally:
            self.ignore_errexit -= 1

    @contextmanager
    def loops_apart(self, subshell: bool) -> Iterator[None]:
        """A function's body (bash and dash) or a subshell's (``subshell``: bash; dash's keeps them, so a
        break there ends the subshell): the loops around it are not its own, and a ``break`` or
        ``continue`` with none of its own is no jump (bash: "only meaningful in a loop", status 0)."""
        saved, saved_hidden = self.loops, self.hidden_loops
        self.loops, self.hidden_loops = 0, subshell and (saved > 0 or saved_hidden)
        try:
            yield
        finally:
            self.loops, self.hidden_loops = saved, saved_hidden

    def restore(self, saved: dict[str, Var | None]) -> None:
        """Variables put back as they were (None: unset) when a function's locals or a command's
        ``VAR=x`` prefix end."""
        for name, old in saved.items():
            if old is None:
                self.st.vars.pop(name, None)
            else:
                self.st.vars[name] = old

    # -- what an unread file may have done -------------------------------------------------------------

    def opaque_from(self, why: str) -> None:
        """A sourced file whose text cannot be read (absent here, on stdin, computed at run time): from here
        every variable, set or not (its value, defaults included, and its export), the directory and the
        disk are unknown until the script sets them again. Arguments, functions and options are kept (a
        sourced ``set --`` is not modelled)."""
        self.st.opaque = why
        for name, var in self.st.vars.items():
            if var.readonly:
                continue
            if var.items is not None:
                var.items = Unknown(f"${{{name}[@]}}: {why} may set it")
            else:
                var.value = Unknown(f"${name}: {why} may set it")
            var.exported = None
        self.st.cwd = Unknown(f"the directory: {why} may change it")
        self.st.dirty = None
        # it may open or close a descriptor (``exec 3>&-``); 0, 1 and 2 are taken as open throughout
        self.st.fds = {d: (v if d <= 2 else None) for d, v in self.st.fds.items()}

    def unknown_effects(self, fx: Effects, why: str) -> None:
        """What a construct run an unknown number of times can change, made unknown: each variable it may
        assign (and, where it may export one, whether it is exported), the directory, the arguments and
        the disk where it may change them; nothing else."""
        for name in sorted(fx.names):
            var = self.st.vars.get(name)
            if var is not None and var.readonly:
                continue
            if var is None:
                var = Var(exported=False, origin=f"script:{self.file}:{self.line}")
                self.st.vars[name] = var
            if var.items is not None:
                var.items = Unknown(f"${{{name}[@]}}: {why}")
            else:
                var.value = Unknown(f"${name}: {why}")
            if name in fx.exports or "allexport" in self.st.opts:
                var.exported = None
        if fx.cwd:
            self.st.cwd = Unknown(f"the directory: {why}")
        if fx.positional:
            self.st.positional = Unknown(f"the arguments: {why}")
        if fx.disk:
            self.st.dirty = None

    # -- the disk ---------------------------------------------------------------------------------------

    def touch(self, path: Value, *, content: bool = True) -> None:
        """The script may change ``path`` (``content``: its text too, not only its mode or times)."""
        if self.st.dirty is None:
            return
        if isinstance(path, Unknown) or isinstance(self.st.cwd, Unknown):
            self.st.dirty = None
            self.st.written.clear()
            return
        if path in ("/dev/null", "/dev/stdout", "/dev/stderr"):
            return
        full = os.path.normpath(os.path.join(self.st.cwd, path))
        self.st.dirty.add(full)
        if content:
            for p in [p for p in self.st.written if p == full or p.startswith(full + "/")]:
                del self.st.written[p]

    @contextmanager
    def in_copy(self) -> Iterator[None]:
        """Run on a copy of the state (a subshell, a pipeline's part, ``$(...)``): only what it did to the
        disk outlives it."""
        saved = self.st
        self.st = saved.copy()
        try:
            yield
        finally:
            sub, self.st = self.st, saved
            self.merge_disk(sub)

    def merge_disk(self, sub: State) -> None:
        """What a subshell (``( )``, a pipeline's part, ``$( )``) did to the disk, which outlives it."""
        if sub.dirty is None:
            self.st.dirty = None
        elif self.st.dirty is not None:
            self.st.dirty |= sub.dirty
        self.st.written = {p: c for p, c in self.st.written.items() if sub.written.get(p) == c}

    def file_text(self, path: str) -> str | None:
        """The text of a file the script wrote whole with known text, if nothing may have changed it
        since: neither the script nor another user (``others_could_write``: a file in ``/tmp`` could be
        replaced between the write and the read)."""
        if self.st.dirty is None or isinstance(self.st.cwd, Unknown):
            return None
        full = os.path.normpath(os.path.join(self.st.cwd, path))
        text = self.st.written.get(full)
        if text is None or others_could_write(full, self.script_owner):
            return None
        return text

    def changed(self, path: str) -> bool:
        """The script may have changed ``path`` (or a directory above or below it)."""
        if self.st.dirty is None:
            return True
        if isinstance(self.st.cwd, Unknown) and not path.startswith("/"):
            return True
        full = os.path.normpath(os.path.join(str(self.st.cwd), path))
        return any(full == d or full.startswith(d + "/") or d.startswith(full + "/") for d in self.st.dirty)

    # -- output, for command substitution --------------------------------------------------------------

    def emit(self, value: Value) -> None:
        if self.capturing is not None:
            self.capturing.append(value)

    def output_unknown(self, what: str) -> None:
        self.emit(Unknown(f"the output of {what}"))

    @contextmanager
    def stdout_elsewhere(self) -> Iterator[None]:
        """Output that goes to a pipe or a file, not to an enclosing ``$(...)``."""
        saved, self.capturing = self.capturing, None
        try:
            yield
        finally:
            self.capturing = saved


def others_could_write(path: str, trusted: tuple[int, ...] = ()) -> list[str]:
    """Who other than root, this user and ``trusted`` (the script's own owner, who can make the script do
    anything anyway) could write or replace ``path`` (a file the script sources, or writes and then reads
    or hands to a container): each directory on its way and the file, when it is there. Empty when nobody
    else could."""
    try:
        problems = creatable_by_others(path, trusted)
    except OSError as exc:  # UnsafeLocation: a directory on the way that cannot be walked
        return [str(exc)]
    try:  # walked, never looked at by name: a link swapped in on the way since the walk above would send
        # an lstat by name where the script's owner could not look, and its words would say what is there
        st = look_unplanted(path, follow_last=False)
    except UnsafeLocation as exc:
        return [*problems, str(exc)]
    except OSError:
        return problems
    if st is None:
        return problems
    owners = (0, os.geteuid(), *trusted)
    if not stat.S_ISREG(st.st_mode) or st.st_uid not in owners or st.st_mode & 0o022:
        problems.append(f"{path} is there already, owned by UID {st.st_uid}, mode {st.st_mode & 0o7777:04o}")
    return problems


def _body_text(r: Node, body: Node) -> str:
    """A here-document's body from the line after its start: tree-sitter-bash begins the heredoc_body
    node after the first line's leading white space (``cat <<'EOF'`` then ``  x``: ``x``)."""
    whole = node_bytes(r)
    kids = list(r.children)
    before = kids[kids.index(body) - 1] if kids.index(body) > 0 else r
    start = whole.find(b"\n", before.end_byte - r.start_byte) + 1
    if start <= 0 or start > body.start_byte - r.start_byte:
        start = body.start_byte - r.start_byte
    return whole[start : body.end_byte - r.start_byte].decode("utf-8", "surrogateescape")


def heredoc_text(r: Node) -> Value:
    """A here-document's text when it is static (a quoted delimiter, or nothing to expand in it), with
    ``<<-``'s leading tabs removed; Unknown otherwise."""
    start = next((c for c in r.children if c.type == "heredoc_start"), None)
    body = next((c for c in r.children if c.type == "heredoc_body"), None)
    if start is None:
        return Unknown("a here-document the reader cannot delimit")
    raw = "" if body is None else _body_text(r, body)
    if body is not None and any(c.type != "heredoc_content" for c in body.children):
        return Unknown("a here-document with expansions")
    quoted = any(q in text(start) for q in ("'", '"', "\\"))
    if not quoted and any(c in raw for c in ("$", "`", "\\")):
        return Unknown("a here-document with expansions")
    if any(c.type == "<<-" for c in r.children):
        raw = "\n".join(line.lstrip("\t") for line in raw.split("\n"))
    return raw


Prefix = list[tuple[str, Value]]  # the assignments before a command word: ``VAR=x cmd``


def known_words(args: list[Field], node: Node, what: str) -> list[str]:
    """A builtin's arguments as text; one known only at run time is not modelled (``shift $n``)."""
    out: list[str] = []
    for f in args:
        v = join(f)
        if isinstance(v, Unknown):
            raise Unmodelled(f"{what} with an argument known only at run time: {v.reason}", line_of(node))
        out.append(v)
    return out
