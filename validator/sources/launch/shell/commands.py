"""Simple commands: a command's words, its assignments and redirections, then the lookup bash makes
(a function, a builtin, a program found on ``PATH``), ``VAR=x cmd`` and the POSIX special builtins,
function calls with their positional parameters, and the command that starts the server (``Launched``,
with the environment bash exports to it).

The only part of the executor that imports the builtins' table: this is where a command name meets it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from tree_sitter import Node

from validator.sources.launch.shell.api import Shell
from validator.sources.launch.shell.builtins import BUILTINS, POSIX_BUILTINS, PROGRAMS
from validator.sources.launch.shell.compound import no_op
from validator.sources.launch.shell.effects import definition_bytes, function_redirects, is_pure
from validator.sources.launch.shell.machine import heredoc_text
from validator.sources.launch.shell.paths import Forks, explore
from validator.sources.launch.shell.programs import MAKERS, is_server_command, reads_only, script_run
from validator.sources.launch.shell.state import (
    MAX_DEPTH,
    Launch,
    Launched,
    LoopJump,
    Outcomes,
    ShellExit,
    ShellReturn,
)
from validator.sources.launch.shell.syntax import field_of, inner, line_of, node_bytes, snippet, text
from validator.sources.launch.shell.values import Field, Unbound, Unknown, Unmodelled, Unsplit, Value, join
from validator.trusted_files import UnsafeLocation, look_unplanted

# POSIX's special builtins: the assignments before them persist in a POSIX shell
_SPECIAL = {":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set"}
_SPECIAL |= {"shift", "times", "trap", "unset"}
_REDIRECT_OPS = {">", ">>", ">|", "&>", "&>>", ">&", "<", "<>", "<&", ">&-", "<&-"}
_REDIRECT_NODES = ("file_redirect", "heredoc_redirect", "herestring_redirect")
_MAX_SUMMARY_PATHS = 64  # paths through one function summarised at its call
_MAX_NAME = 200  # the longest name of another script a message shows (a word may be megabytes)


class Commands:
    """Simple commands and function calls on one path (``sh``: the executor)."""

    def __init__(self, sh: Shell) -> None:
        self.sh, self.m, self.vars, self.words = sh, sh.m, sh.vars, sh.words
        # the descriptors a statement's redirections set, for its simple command to apply after its words
        self.outer_fds: tuple[Node, dict[int, bool | None]] | None = None

    def redirected(self, node: Node) -> int | None:
        body = node.child_by_field_name("body")
        if body is not None and body.type == "function_definition":
            return self.sh.stmt(body)  # its redirections are the function's, made at each call
        redirects = [c for c in node.children if field_of(node, c) == "redirect"]
        if body is not None and body.type == "command":
            _no_named_descriptor(body.children, redirects)
        chain = _heredoc_chain(redirects)
        if chain:  # ``cmd <<EOF || true``: the grammar puts what follows the start in the redirection
            with self.m.ignoring():
                status = self.redirected_body(body, redirects)
            return self.and_or_chain(status, node, chain)
        return self.redirected_body(body, redirects)

    def and_or_chain(self, status: int | None, node: Node, chain: list[tuple[str, Node]]) -> int | None:
        """The rest of an and-or list after its first command's ``status``, as ``Compound.and_or`` runs
        one: left to right, only the last command run subject to ``set -e``."""
        for k, (op, nxt) in enumerate(chain):
            if status is None and op == "||" and no_op(nxt, self.m.st.funcs):
                status = 0
                continue
            if (op == "&&") == self.m.known_status(status, snippet(node), node):
                with nullcontext() if k == len(chain) - 1 else self.m.ignoring():
                    status = self.sh.stmt(nxt)
            else:
                status = status if status is not None else (1 if op == "&&" else 0)
        self.m.st.status = status
        return status

    def redirected_body(self, body: Node | None, redirects: list[Node]) -> int | None:
        opened, fds = self.opens_all(redirects, body)
        if opened is False:  # bash runs nothing: a redirection it cannot open makes the status 1
            return self.m.errexit(1, body or redirects[0], "a redirection")
        for r in redirects:
            self.redirect(r)
        if self.m.capturing is not None and any(_stderr_to_stdout(r) for r in redirects):
            # bash's and the commands' diagnostics (cd: no such file...) reach the $( ): not modelled
            self.m.output_unknown(f"{snippet(body or redirects[0])} (its errors, 2>&1)")
        if body is None:
            return self.m.st.status
        scope: AbstractContextManager[None] = self.descriptors(fds, body)
        if body.type == "command":  # a simple command's words are expanded before it redirects
            self.outer_fds, scope = (body, fds), nullcontext()
        with scope:
            if opened is None:  # an output-only command where the open may fail: it ran, or failed with 1
                self.sh.stmt(body)
                return self.m.errexit(None, body, snippet(body))
            if any(_redirects_stdout(r) for r in redirects):
                with self.m.stdout_elsewhere():
                    status = self.sh.stmt(body)
                self.record_written(body, redirects)
                return status
            return self.sh.stmt(body)

    @contextmanager
    def descriptors(self, fds: dict[int, bool | None], node: Node) -> Iterator[None]:
        """The descriptors a command's redirections set, for the command only: bash puts back those it
        saved when the command ends, except for an ``exec`` with no command (``exec 3>f``: they stay)."""
        saved = {d: self.m.st.fds.get(d, _UNSET) for d in fds}
        self.m.st.fds.update(fds)
        self.m.bare_exec = None
        try:
            yield
        finally:
            if self.m.bare_exec != node:  # the command was no ``exec`` (a function of that name included)
                for d, old in saved.items():
                    if old is _UNSET:
                        self.m.st.fds.pop(d, None)
                    else:
                        self.m.st.fds[d] = old  # type: ignore[assignment]

    def fd(self, n: int, fds: dict[int, bool | None]) -> bool | None:
        """Whether descriptor ``n`` is open (None: known only at run time): as this command's redirections
        so far (``fds``) or the script left it; else as the shell started, 0, 1 and 2 open and any other
        inherited from whatever started the script, which the reading cannot see."""
        if n in fds:
            return fds[n]
        return self.m.st.fds.get(n, True if n <= 2 else None)

    def record_written(self, body: Node, redirects: list[Node]) -> None:
        """``cat > FILE <<'EOF' ... EOF``: FILE now holds the here-document's text (when it is static),
        for what reads FILE later (a container's entrypoint script, ``source FILE``)."""
        if body.type != "command" or [c.type for c in body.children] != ["command_name"]:
            return
        if text(body.children[0]) != "cat" or "cat" in self.m.st.funcs:
            return
        flat = [s for r in redirects for s in ([r, *r.children] if r.type == "heredoc_redirect" else [r])]
        docs = [r for r in flat if r.type == "heredoc_redirect"]
        outs = [r for r in flat if r.type == "file_redirect"]
        if (
            len(docs) != 1
            or len(outs) != 1
            or any(c.type == "file_descriptor" for r in flat for c in r.children)
        ):
            return
        if [c.type for c in outs[0].children if c.type in (">", ">|", ">>", "&>", ">&")] not in (
            [">"],
            [">|"],
        ):
            return
        dest = outs[0].child_by_field_name("destination")
        content = heredoc_text(docs[0])
        target = None if dest is None else self.words.value(dest)
        if isinstance(content, str) and isinstance(target, str) and isinstance(self.m.st.cwd, str):
            self.m.uses_cwd(target)
            self.m.st.written[os.path.normpath(os.path.join(self.m.st.cwd, target))] = content

    def opens_all(
        self, redirects: list[Node], body: Node | None
    ) -> tuple[bool | None, dict[int, bool | None]]:
        """Whether bash can open every file the redirections name, left to right (before it runs the
        command, as the script's owner), and the descriptors they leave open or closed: False where one
        cannot be (the command does not run, its status is 1), None where that is known only at run time
        and ``body`` only writes output (it ran, or did not and failed), True otherwise; where it is known
        only at run time and ``body`` may do more, a fork."""
        fds: dict[int, bool | None] = {}
        for r in _all_redirects(redirects):
            if r.type != "file_redirect":  # a here-document or here-string: its descriptor reads it
                fds[_descriptor(r, "<")] = True
                continue
            dest = r.child_by_field_name("destination")
            target = "" if dest is None else self.words.value(dest)  # once: it may run a $(...)
            ok = self.opens(r, fds, target)
            if ok is None and not _output_only(body, self.m.st.funcs):
                ok = self.m.known_status(None, f"the redirection {snippet(r)!r} opens", r)
            if ok is False and self.m.posix:  # dash: status 2, and no assignment of a command with no name
                raise Unmodelled(
                    f"the redirection {snippet(r)!r} fails, where dash and bash differ", line_of(r)
                )
            if ok is not True:
                return ok, fds
            self.opened(r, fds, target)
        if any(d in fds and fds[d] is not True for d in (0, 1, 2)):
            # what reads or writes a closed standard descriptor fails, or not, as each command does
            if not _output_only(body, self.m.st.funcs):
                raise Unmodelled(
                    "a command run with its standard input, output or error closed", line_of(redirects[0])
                )
            return None, fds
        return True, fds

    def opened(self, node: Node, fds: dict[int, bool | None], target: Value) -> None:
        """The descriptors a redirection bash opened (to ``target``) leaves: ``N>&-`` closes N, ``N>&M-``
        moves M to N (M closed), ``&>f`` (or ``>&f``) opens 1 and 2, any other opens its descriptor."""
        op = next((text(c) for c in node.children if c.type in _REDIRECT_OPS), "")
        if op in (">&-", "<&-"):
            fds[_descriptor(node, op)] = False
            return
        if isinstance(target, Unknown) and op in (">&", "<&"):
            # a descriptor, one moved (``M-``: M closed), ``-`` (closed) or a file: known only at run time
            fds.update({d: None for d in (*self.m.st.fds, *fds) if d > 2})
            fds[_descriptor(node, op)] = None
            if op == ">&" and all(c.type != "file_descriptor" for c in node.children):
                fds[2] = None
            return
        move = _duplicated(target) if op in (">&", "<&") and isinstance(target, str) else None
        if move is not None:
            fds[_descriptor(node, op)] = move[0] != "-"
            if move[1] and move[0] != "-":
                fds[int(move[0])] = False
            return
        bare = all(c.type != "file_descriptor" for c in node.children)
        if op in ("&>", "&>>") or (op == ">&" and bare):  # ``>&FILE`` is ``&>FILE``
            fds[1] = fds[2] = True
            return
        fds[_descriptor(node, op)] = True

    def opens(self, node: Node, fds: dict[int, bool | None], target: Value) -> bool | None:
        """Whether bash can open the file of one redirection: known from a walked look as the script's
        owner (never by name), None where only the run can tell (a path the script may have made, a
        descriptor whose state the reading cannot know, a look refused). ``N>&M`` needs M open
        (``fds``: this command's redirections so far): bash says "Bad file descriptor" otherwise."""
        op = next((text(c) for c in node.children if c.type in _REDIRECT_OPS), "")
        if node.child_by_field_name("destination") is None or op in (">&-", "<&-"):
            return True
        if isinstance(target, Unknown):
            return None
        move = _duplicated(target) if op in (">&", "<&") else None
        if move is not None and move[1] and self.m.posix:
            raise Unmodelled(f"{snippet(node)!r}: a moved descriptor, which dash refuses", line_of(node))
        if move is not None:
            return True if move[0] == "-" else self.fd(int(move[0]), fds)
        if target in ("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"):
            return True
        if not target or target.startswith(("/dev/", "/proc/")) or self.m.changed(target):
            return None
        if isinstance(self.m.st.cwd, Unknown) and not target.startswith("/"):
            return None
        self.m.uses_cwd(target)
        path = os.path.normpath(os.path.join(str(self.m.st.cwd), target))
        try:  # walked, never looked at by name: whether it is there may be the script owner's to know
            there = look_unplanted(path, os.F_OK)
            if op == "<":
                return there is not None and look_unplanted(path, os.R_OK, theirs=True) is not None
            if there is not None:
                if stat.S_ISDIR(there.st_mode):
                    return False
                if op == ">" and "noclobber" in self.m.st.opts and stat.S_ISREG(there.st_mode):
                    return False
                need = os.W_OK | (os.R_OK if op == "<>" else 0)
                return look_unplanted(path, need, theirs=True) is not None
            if look_unplanted(path, os.F_OK, follow_last=False) is not None:
                return None  # a link to nothing: bash creates its target, if it can
            parent = look_unplanted(os.path.dirname(path) or "/", os.W_OK | os.X_OK, theirs=True)
            return parent is not None and stat.S_ISDIR(parent.st_mode)
        except UnsafeLocation:
            return None
        except OSError:  # a name over the kernel's limits: bash cannot open it either
            return False

    def redirect(self, node: Node) -> None:
        """A redirection: a file it writes is a path the script changed; input is not modelled."""
        if node.type == "heredoc_redirect":
            for sub in node.children:
                if sub.type in ("file_redirect", "heredoc_redirect"):
                    self.redirect(sub)
            return
        if node.type == "herestring_redirect":
            return
        op = next((text(c) for c in node.children if c.type in _REDIRECT_OPS), "")
        dest = node.child_by_field_name("destination")
        if op in ("<", "<&") or dest is None:
            return
        if op in (">&", "<&") and dest.type == "number":
            return
        target = self.words.value(dest)
        if op == ">&" and isinstance(target, str) and _duplicated(target) is not None:
            return
        self.m.touch(target)

    def command(self, node: Node) -> int | None:
        outer, self.outer_fds = self.outer_fds, None
        kids = list(node.children)
        name_node = node.child_by_field_name("name")
        assigns = [c for c in kids if c.type == "variable_assignment"]
        if name_node is not None and assigns:
            # tree-sitter reads `A=1 B=2<newline>C=3 cmd` as one command: bash runs the first line alone
            cut = 0
            for k, a in enumerate(assigns):
                after = assigns[k + 1] if k + 1 < len(assigns) else name_node
                gap = node_bytes(node)[a.end_byte - node.start_byte : after.start_byte - node.start_byte]
                if b"\n" in gap.replace(b"\\\n", b""):
                    cut = k + 1
            if cut and text(name_node) in ("export", "declare", "typeset", "local", "readonly", "unset"):
                # the grammar read a declaration as a plain command: its words' splitting is unknown
                raise Unmodelled(
                    f"the grammar misreads the {text(name_node)} after assignments", line_of(node)
                )
            line_end = (assigns[cut] if cut < len(assigns) else name_node).start_byte
            if cut and any(c.type in _REDIRECT_NODES and c.start_byte < line_end for c in kids):
                # a redirection of the first line, which bash runs alone: the grammar gave it to the command
                raise Unmodelled("the grammar misreads a redirection of assignments", line_of(node))
            if cut:
                ran = self.m.substitutions
                for a in assigns[:cut]:
                    self.vars.assignment(a)
                self.m.errexit(self.m.st.status if self.m.substitutions != ran else 0, node, "assignment")
                assigns = assigns[cut:]
        # $? in the words is the last command's status, or the last $(...)'s once one ran
        ran = self.m.substitutions
        redirects = [c for c in kids if c.type in _REDIRECT_NODES]
        _no_named_descriptor(kids, redirects)
        opened, fds = self.opens_all(redirects, node) if redirects else (True, {})
        if outer is not None and outer[0] == node:
            fds = {**fds, **outer[1]}
        for c in redirects:
            self.redirect(c)
        words = self.command_words(node, kids)
        with self.descriptors(fds, node):  # bash expands the words first, then redirects
            return self.named(node, words, assigns, opened, ran)

    def command_words(self, node: Node, kids: list[Node]) -> list[Field]:
        """A simple command's words, expanded."""
        words: list[Field] = []
        last: Node | None = None
        for c in kids:
            if c.type == "command_name" or field_of(node, c) == "argument":
                if last is not None and last.end_byte == c.start_byte:
                    # 'a`echo b`c': tree-sitter-bash gives 'a' and '`echo b`c' as two arguments; bash has
                    # one word, 'abc' (no blank or operator between them)
                    raise Unmodelled(f"the grammar splits the word {snippet(last)}{snippet(c)}", line_of(c))
                last = c
                fs = self.words.fields(c.children[0] if c.type == "command_name" else c)
                if isinstance(fs, Unknown):
                    if not words:
                        raise Unmodelled(
                            f"the command name is known only at run time: {fs.reason}", line_of(node)
                        )
                    words.append([fs])
                    continue
                words += fs
        return words

    def named(
        self, node: Node, words: list[Field], assigns: list[Node], opened: bool | None, ran: int
    ) -> int | None:
        """A simple command after its redirections: what its words name, with its assignments."""
        if opened is not True:  # a redirection bash cannot open (False) or may not (None): see opens_all
            for a in assigns if not words else ():
                self.vars.assignment(a)  # bash keeps the assignments of a command with no name
            if opened is None:
                self.invoke(words, [], node) if words else None
            return self.m.errexit(None if opened is None else 1, node, snippet(node))
        if not words:
            for a in assigns:
                self.vars.assignment(a)
            # no command name: the status is the last $(...)'s, or 0 (bash)
            return self.m.errexit(self.m.st.status if self.m.substitutions != ran else 0, node, snippet(node))
        prefix: list[tuple[str, Value]] = []
        for a in assigns:
            scratch = self.m.st.copy()
            saved, self.m.st = self.m.st, scratch
            try:
                name = self.vars.assignment(a)
                value = (
                    self.m.st.vars[name].value
                    if self.m.st.vars[name].items is None
                    else Unknown("an array prefix")
                )
            finally:
                self.m.st = saved
            prefix.append((name, value if value is not None else ""))
        return self.invoke(words, prefix, node)

    def invoke(
        self,
        words: list[Field],
        prefix: list[tuple[str, Value]],
        node: Node,
        *,
        execs: bool = False,
        skip_functions: bool = False,
        only_builtins: bool = False,
    ) -> int | None:
        head = join(words[0])
        if isinstance(head, Unknown):
            raise Unmodelled(f"the command name is known only at run time: {head.reason}", line_of(node))
        args = words[1:]
        if not skip_functions and head in self.m.st.funcs:
            return self.m.errexit(self.call_function(head, args, prefix, node), node, head)
        if self.m.posix and head in BUILTINS and head not in POSIX_BUILTINS:
            raise Unmodelled(f"{head} in a /bin/sh script (a bash builtin)", line_of(node))
        if self.m.posix and head in ("shift", "export", "unset", "set", "trap"):
            # a special builtin that fails ends a non-interactive POSIX shell (dash: shift past the end)
            for n, v in prefix:
                self.vars.assign(n, v, node)
            with self.m.ignoring():
                status = BUILTINS[head](self.sh, args, [], node)
            if status != 0:
                raise ShellExit(status, line_of(node), f"{head} failed: dash stops")
            self.m.st.status = 0
            return 0
        if head in BUILTINS and not (execs and head != "exec"):
            if head in ("exec", "command", "builtin") or not prefix:
                return BUILTINS[head](self.sh, args, prefix, node)
            if self.m.posix and head in _SPECIAL:  # POSIX: assignments before a special builtin stay
                for n, v in prefix:
                    self.vars.assign(n, v, node)
                return BUILTINS[head](self.sh, args, [], node)
            with self.temporary(prefix, node):
                return BUILTINS[head](self.sh, args, prefix, node)
        if only_builtins:
            return self.m.errexit(1, node, f"builtin {head}")
        # an external program
        values = [join(f) for f in words]
        if is_server_command(values):
            self.launch(words, prefix, node, execs)
        if (other := script_run(values)) is not None:
            named = (
                f"{other} (line {line_of(node)})"
                if len(other) <= _MAX_NAME
                else f"{other[:_MAX_NAME]}... (line {line_of(node)})"
            )
            if named not in self.m.scripts_run and len(self.m.scripts_run) < 4:  # the message names three
                self.m.scripts_run.append(named)
        if head == "time" and len(words) > 1:
            return self.invoke(words[1:], prefix, node, execs=execs)
        if execs:
            raise ShellExit(None, line_of(node), f"exec {head}: the script becomes that program")
        if head in PROGRAMS:
            return PROGRAMS[head](self.sh, args, prefix, node)
        self.m.output_unknown(head)
        name = os.path.basename(head)
        if name in MAKERS:
            for a in values[1:]:
                if isinstance(a, Unknown):
                    self.m.st.dirty = None
                elif not a.startswith("-"):
                    self.m.touch(a, content=name not in ("mkdir", "chmod", "chown", "touch"))
        elif not reads_only(name, values[1:]):
            self.m.st.dirty = None  # an unknown program may change anything on the disk
        return self.m.errexit(None, node, head)

    @contextmanager
    def temporary(self, prefix: list[tuple[str, Value]], node: Node) -> Iterator[None]:
        saved = {n: (self.m.st.vars[n].copy() if n in self.m.st.vars else None) for n, _ in prefix}
        for n, v in prefix:
            self.vars.assign(n, v, node)
            self.m.st.vars[n].exported = True
        try:
            yield
        finally:
            self.m.restore(saved)

    def launch(self, words: list[Field], prefix: list[tuple[str, Value]], node: Node, execs: bool) -> None:
        env: dict[str, Value] = {}
        origin: dict[str, str] = {}
        unexported: set[str] = set()
        for name, var in self.m.st.vars.items():
            if var.items is not None or var.value is None:
                continue  # bash exports no arrays, nor a variable declared but unset
            if var.exported is None:
                env[name] = Unknown(f"whether {name} is exported is decided at run time")
            elif var.exported:
                env[name] = var.value
            else:
                unexported.add(name)
                continue
            origin[name] = var.origin
        for name, value in prefix:
            env[name], origin[name] = value, self.vars.origin(node)
            unexported.discard(name)
        if "PWD" not in env:
            env["PWD"], origin["PWD"] = self.m.st.cwd, "bash"
        path = self.vars.scalar("PATH")
        for name, value in prefix:
            if name == "PATH":
                path = value
        raise Launched(
            Launch(
                words=words,
                env=env,
                origin=origin,
                unexported=unexported,
                cwd=self.m.st.cwd,
                path=path if path is not None else Unknown("PATH is unset: bash's default search path"),
                line=line_of(node),
                where=self.m.file,
                execs=execs,
                assumed=list(self.m.forks.taken),
                others=self.m.st.opaque,
                written=dict(self.m.st.written) if self.m.st.dirty is not None else {},
                cwd_given=self.m.st.cwd_given,
                cwd_read=self.m.cwd_read,
            )
        )

    def call_function(
        self, name: str, args: list[Field], prefix: list[tuple[str, Value]], node: Node
    ) -> int | None:
        if not prefix and is_pure(name, self.m.st.funcs, memo=self.m.memo.pure):
            summary = self.summarized(name, args, node)
            if summary is not None:
                return summary[0]
        return self.run_function(name, args, prefix, node)

    def summarized(self, name: str, args: list[Field], node: Node) -> tuple[int | None] | None:
        """A call of a function that changes nothing its caller sees (``effects.is_pure``: a cache probe
        such as ``model_is_fully_cached``) as one fork over the distinct (status, output) pairs of its
        paths, walked here on copies of the state, instead of a fork per condition inside it. None where a
        path stops the shell or there are too many: the call is then walked as any other."""
        # the same call in the same state gives the same outcomes: each path of the reading replays it
        key = (
            definition_bytes(self.m.st.funcs[name]),
            repr(args),
            self.m.st.fingerprint(),
            self.m.ignore_errexit > 0,
            self.m.in_function,
            self.m.depth,
            self.m.file,
        )
        known = self.m.memo.calls.get(key)
        if known is None:
            known = self.m.memo.calls[key] = self._outcomes(name, args, node)
        found, survived = known
        self.m.survived += [s for s in survived if s not in self.m.survived]
        if found is None:
            return None
        outcomes = found
        pick = 0
        if len(outcomes) > 1:
            labels = [f"{name} returned {s if s is not None else '?'}" for s, _ in outcomes]
            pick = self.m.decide(len(outcomes), labels, node)
        status, output = outcomes[pick]
        if output != "":
            self.m.emit(output)
        self.m.st.status = status
        return (status,)

    def _outcomes(self, name: str, args: list[Field], node: Node) -> Outcomes:
        """Every path through the call, walked on copies of the state: its distinct (status, output)
        outcomes (None when one stops the shell or there are too many), and what they assumed."""
        saved_forks, saved_st, saved_capture = self.m.forks, self.m.st, self.m.capturing
        saved_survived, self.m.survived = self.m.survived, []
        outcomes: list[tuple[int | None, Value]] = []

        def walk(forks: Forks) -> None:
            self.m.forks, self.m.st, self.m.capturing = forks, saved_st.copy(), []
            outcome = (self.run_function(name, args, [], node), join(self.m.capturing))
            if outcome not in outcomes:
                outcomes.append(outcome)

        try:
            if not explore(walk, _MAX_SUMMARY_PATHS):
                return None, []
            return outcomes, list(self.m.survived)
        except (ShellExit, Launched, LoopJump, Unbound, Unmodelled):
            return None, []
        finally:
            self.m.forks, self.m.st, self.m.capturing = saved_forks, saved_st, saved_capture
            self.m.survived = saved_survived

    def run_function(
        self, name: str, args: list[Field], prefix: list[tuple[str, Value]], node: Node
    ) -> int | None:
        self.m.depth += 1
        if self.m.depth > MAX_DEPTH:
            raise Unmodelled(f"functions or sourced files nested deeper than {MAX_DEPTH}", line_of(node))
        if prefix:
            raise Unmodelled(f"assignments before the function call {name}", line_of(node))
        saved_pos = self.m.st.positional
        self.m.st.positional = self.positional_from(args, node)
        self.m.st.frames.append({})
        self.m.in_function += 1
        body = self.m.st.funcs[name]
        status: int | None
        try:
            redirects = function_redirects(body)
            opened, fds = self.opens_all(redirects, None) if redirects else (True, {})
            for r in redirects if opened else ():
                self.redirect(r)
            elsewhere = any(_redirects_stdout(r) for r in redirects)
            with (
                self.descriptors(fds, body) if opened else nullcontext(),
                self.m.stdout_elsewhere() if elsewhere else nullcontext(),
                self.m.loops_apart(subshell=False),  # bash and dash: the caller's loops are not its own
            ):
                if opened is False:  # bash runs nothing of it: status 1
                    status = 1
                elif body.type == "subshell":
                    status = self.sh.subshell(inner(body, "(", ")"))
                elif body.type == "compound_statement":
                    status = self.sh.block(inner(body, "{", "}"))
                else:
                    status = self.sh.stmt(body)
        except ShellReturn as r:
            status = r.status
        finally:
            self.m.in_function -= 1
            self.m.restore(self.m.st.frames.pop())
            self.m.st.positional = saved_pos
            self.m.depth -= 1
        self.m.st.status = status
        return status

    def positional_from(self, args: list[Field], node: Node) -> list[Value] | Unknown:
        out: list[Value] = []
        for f in args:
            if len(f) == 1 and isinstance(f[0], Unsplit):
                return Unknown(f"the arguments at line {line_of(node)} are split at run time")
            out.append(join(f))
        return out


def _stderr_to_stdout(node: Node) -> bool:
    """``2>&1`` (or ``2>&1`` nested in a here-document's redirection): errors go where output goes."""
    if node.type == "heredoc_redirect":
        return any(_stderr_to_stdout(c) for c in node.children if c.type == "file_redirect")
    fd = node.child_by_field_name("descriptor")
    dest = node.child_by_field_name("destination")
    ops = [c.type for c in node.children]
    return fd is not None and text(fd) == "2" and ">&" in ops and dest is not None and text(dest) == "1"


def _redirects_stdout(node: Node) -> bool:
    """``> f``, ``>> f``, ``&> f``, ``1> f``, ``>&2``: the command's output does not reach ``$(...)``."""
    if node.type == "heredoc_redirect":
        return any(_redirects_stdout(c) for c in node.children if c.type == "file_redirect")
    if node.type != "file_redirect":
        return False
    fd = node.child_by_field_name("descriptor")
    ops = [c.type for c in node.children]
    if fd is not None and text(fd) != "1":
        return False
    return any(o in (">", ">>", ">|", "&>", "&>>", ">&") for o in ops)


# ``descriptors``: a descriptor the script never set
_UNSET = object()


def _descriptor(node: Node, op: str) -> int:
    """The descriptor a redirection sets: the number written before it, else 0 for input, 1 for output."""
    fd = next((c for c in node.children if c.type == "file_descriptor"), None)
    if fd is not None and text(fd).isascii() and text(fd).isdigit():
        return int(text(fd))
    return 0 if op.startswith("<") or node.type != "file_redirect" else 1


def _no_named_descriptor(words: list[Node], redirects: list[Node]) -> None:
    """``exec {fd}>file``: bash picks a free descriptor (10 or more) and puts its number in ``fd``; the
    grammar reads ``{fd}`` as a word. Not modelled, never read as a command word."""
    starts = {r.start_byte for r in redirects}
    for w in words:
        if w.end_byte in starts and _NAMED_FD.fullmatch(text(w)):
            raise Unmodelled(f"{text(w)}: a descriptor bash allocates for a redirection", line_of(w))


_NAMED_FD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _duplicated(target: str) -> tuple[str, bool] | None:
    """``>&M``, ``>&M-`` (moved) and ``>&-`` (closed): (M or "-", moved); None for a file (``>&f``)."""
    if target == "-":
        return "-", False
    digits = target[:-1] if target.endswith("-") else target
    if digits and digits.isascii() and digits.isdigit():
        return digits, digits != target
    return None


def _all_redirects(redirects: list[Node]) -> list[Node]:
    """Every redirection in order, those nested in a here-document's included, here-documents too."""
    out: list[Node] = []
    for r in redirects:
        out.append(r)
        if r.type == "heredoc_redirect":
            out += _all_redirects([c for c in r.children if c.type in ("file_redirect", "heredoc_redirect")])
    return out


# commands whose only effect is their output (and status): run or not, a path differs in nothing else
_OUTPUT_ONLY = {"echo", "printf", "cat", "true", ":", "date", "tee"}


def _output_only(body: Node | None, funcs: object) -> bool:
    if body is None or body.type != "command":
        return False
    name = body.child_by_field_name("name")
    if name is None or any(c.type == "variable_assignment" for c in body.children):
        return False
    word = text(name)
    return word in _OUTPUT_ONLY and word not in funcs  # type: ignore[operator]


# what the grammar may put after a here-document's start word, besides the and-or list that follows it
_HEREDOC_PARTS = {
    "<<",
    "<<-",
    "heredoc_start",
    "heredoc_body",
    "heredoc_end",
    "file_redirect",
    "heredoc_redirect",
}


def _heredoc_chain(redirects: list[Node]) -> list[tuple[str, Node]]:
    """``cmd <<EOF && a || b``: tree-sitter-bash gives ``&& a || b`` to the here-document's redirection,
    right-nested; bash runs it as the and-or list it is (left to right, equal precedence). The operators
    and their commands, flattened in order; anything else there (a pipe, ``;``) is not modelled."""
    chain: list[tuple[str, Node]] = []
    for r in redirects:
        if r.type != "heredoc_redirect":
            continue
        kids = list(r.children)
        k = 0
        while k < len(kids):
            c = kids[k]
            if c.type in ("&&", "||") and k + 1 < len(kids):
                first, *rest = _flat(kids[k + 1])
                chain += [(c.type, first[1]), *rest]
                k += 2
                continue
            if c.type not in _HEREDOC_PARTS:
                raise Unmodelled(f"{c.type!r} after a here-document's start on its line", line_of(c))
            k += 1
    return chain


def _flat(node: Node) -> list[tuple[str, Node]]:
    """An and-or list as (operator, command) pairs in order (the first one's operator empty)."""
    if node.type == "list" and len(node.children) == 3 and node.children[1].type in ("&&", "||"):
        left, right = _flat(node.children[0]), _flat(node.children[2])
        return [*left, (node.children[1].type, right[0][1]), *right[1:]]
    return [("", node)]
