"""One path through a launcher script, as bash 5 would run it on this host: how it ends (an exit, a
construct not modelled, or the first command that starts the SGLang server, ``Launch``).

``Evaluator`` is the executor: it owns the path's parts (see the package docstring), dispatches each
statement to the one that holds its rule (``stmt``), starts the path from the environment bash inherits
(and what bash ignores of it), and refuses what a ``#!/bin/sh`` script cannot use (``posix_check``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from tree_sitter import Node, Tree

from validator.redact import environment_credentials, is_secret_key, may_be_secret
from validator.sources.launch.shell.commands import Commands
from validator.sources.launch.shell.compound import Compound
from validator.sources.launch.shell.conditions import Conditions
from validator.sources.launch.shell.machine import Machine
from validator.sources.launch.shell.state import (
    BASH_VARS,
    MAX_STEPS,
    TUNING_FROM_ENV,
    TUNING_FROM_ENV_BASH,
    Ending,
    Launched,
    LoopJump,
    ShellExit,
    ShellReturn,
    State,
    Var,
)
from validator.sources.launch.shell.syntax import inner, line_of, node_bytes, part, snippet, text
from validator.sources.launch.shell.values import MAX_WORK, Unbound, Unknown, Unmodelled, Value, charge, join
from validator.sources.launch.shell.variables import Variables
from validator.trusted_files import in_namers_scope

# a credential shorter than this is not hunted in other variables' values (it would be in many by chance):
# the redactor's own floor
_MIN_SECRET = 4


class Evaluator:
    """One path through the script (``api.Shell``): the statements, dispatched to the component that
    holds the rules of their kind. ``m``: the path's machine, made by the reader with its forks and
    options."""

    def __init__(self, m: Machine) -> None:
        self.m = m
        self.vars = Variables(m, self.command_output)
        self.words = self.vars.words
        self.tests = Conditions(m, self.vars)
        self.commands = Commands(self)
        self.compound = Compound(self)
        # api.Shell's ways back in that are a part's own rules
        self.invoke = self.commands.invoke
        self.subshell = self.compound.subshell

    def command_output(self, node: Node) -> Value:
        """``$(...)``: the output of the few commands whose output is known statically (``dirname``,
        ``basename``, ``pwd``, ``cd``, ``echo``, ``printf '%s'``, ``uname``); anything else is Unknown. The
        substitution's exit status becomes ``$?`` (an assignment's status, for ``set -e``)."""
        body = [c for c in node.children if c.type not in ("$(", ")", "`")]
        outer_capture = self.m.capturing
        captured: list[Value] = []
        with self.m.in_copy():
            self.m.capturing = captured
            if (
                not self.m.posix
            ):  # bash clears -e in $( ) (posix mode and dash keep it); a set -e there counts
                self.m.st.opts.discard("errexit")
            try:
                status = self.block(body)
            except (ShellExit, ShellReturn) as ex:  # a return there (in a function) ends the substitution
                status = ex.status
            except Unbound:  # bash reports it and the substitution's subshell exits
                status = 1
            except LoopJump:  # it keeps the loops around it (bash and dash): a break there ends it
                status = 0
            except Launched:
                raise Unmodelled("the server starts inside a command substitution", line_of(node)) from None
            finally:
                self.m.capturing = outer_capture
        out = join(captured)
        self.m.st.status = status
        self.m.substitutions += 1
        if status is None:
            return Unknown(f"$({snippet(node)[2:-1]}) runs at run time")
        return out.rstrip("\n") if isinstance(out, str) else out

    def run(
        self,
        tree: Tree,
        env: Mapping[str, str],
        args: list[str],
        *,
        inside: str | None = None,
        cwd: Value | None = None,
        unknown: Mapping[str, str] | None = None,
        own: Collection[str] = (),
    ) -> Ending:
        """The path's ending. ``inside``: the script runs where this host cannot see (a container): the
        variables not in ``env`` and every file there are unknown (why: ``inside``). ``cwd``: the directory it
        is started in; None: the script's own (an assumption ``--script`` names). ``unknown``: exported
        variables whose values only the runtime gives (name -> why); ``own``: the variables of ``env`` the
        script's writers set themselves (the rest are the reader's)."""
        m = self.m
        st = m.st = State(
            vars={k: Var(value=v, exported=True) for k, v in env.items()},
            funcs={},
            positional=list(args),
            opts=set(m.initial_opts),
            cwd=str(m.script.parent) if cwd is None else cwd,
            sources=[] if m.command_string else [str(m.script)],
            cwd_given=cwd is not None,
        )
        if inside is not None:
            st.opaque = inside
            st.dirty = None
        if any(uid != os.geteuid() for uid in m.script_owner) or in_namers_scope():
            # (in_namers_scope: a container's shell string another user's Compose file or unit gives,
            # whose environment may copy the reader's: `environment: [HF_TOKEN]`, `bash -c '${HF_TOKEN:3}'`)
            # another user's script could carry a credential of this process's environment into the
            # report (``--tool-call-parser "${HF_TOKEN:3}"`` in an argparse error, past the redactor's
            # patterns): to them it is unknown, as it is until the server's real environment is known; so
            # is any variable of the reader's (not set by ``own``) but plain settings, since a credential
            # under another name (MYSQL_PWD) cannot be told from its value; and any variable, theirs too,
            # whose value holds one ('env A=${HF_TOKEN} their.sh' in their unit)
            credentials = set(environment_credentials(env))  # by name, or by shape (HFTOKEN=hf_...)
            secrets = [
                v
                for k, v in env.items()
                if (is_secret_key(k, v) or (k in credentials and k not in own)) and len(v) >= _MIN_SECRET
            ]
            for name, v in env.items():
                if is_secret_key(name, v) or (name in credentials and name not in own):
                    why = f"${name}: a credential of the reader's environment"
                elif any(c in v for c in secrets):
                    why = f"${name}: it holds a credential of the reader's environment"
                elif name not in own and may_be_secret(name, v):
                    why = f"${name}: a variable of the reader's environment (it may hold a credential)"
                else:
                    continue
                st.vars[name] = Var(value=Unknown(why), exported=True)
            # and an argument holding one ('--launch-cmd "their.sh ${HF_TOKEN}"', --script-arg)
            st.positional = [
                Unknown(f"${k + 1}: a credential of the reader's environment")
                if isinstance(a, str) and any(c in a for c in secrets)
                else a
                for k, a in enumerate(args)
            ]
        for name, why in (unknown or {}).items():
            st.vars[name] = Var(value=Unknown(f"${name}: {why}"), exported=True)
        st.vars.pop("PWD", None)
        st.vars.pop("IFS", None)  # bash ignores an inherited IFS
        if inside is not None:  # and sets its own, whatever the image's environment holds (dash alike)
            st.vars["IFS"] = Var(value=" \t\n", origin="the shell's default")
        for name in [k for k in st.vars if not m.posix and (k in BASH_VARS or k.startswith("BASH_FUNC_"))]:
            if name.startswith("BASH_FUNC_"):
                return Ending("unresolved", 1, m.file, f"{name} in the environment: an exported function")
            del st.vars[name]
        if env.get("BASH_ENV") and not m.posix:
            return Ending("unresolved", 1, m.file, "BASH_ENV is set: bash sources that file first")
        if env.get("SHELLOPTS") or env.get("BASHOPTS"):  # bash as sh takes them too (dash does not)
            return Ending("unresolved", 1, m.file, "SHELLOPTS/BASHOPTS in the environment")
        if m.posix and (funcs := [k for k in env if k.startswith("BASH_FUNC_")]):
            return Ending("unresolved", 1, m.file, f"{funcs[0]} in the environment: bash as sh imports it")
        # POSIXLY_CORRECT (even empty) starts bash in POSIX mode, FUNCNEST and BASH_COMPAT change how it runs
        tuning = sorted(k for k in env if k in (TUNING_FROM_ENV if m.posix else TUNING_FROM_ENV_BASH))
        if tuning:
            return Ending("unresolved", 1, m.file, f"{tuning[0]} in the environment changes how bash runs")
        for name in ("OPTIND", "OPTERR"):
            # bash sets both to 1 at start, whatever the environment held (dash OPTIND alike, OPTERR it
            # keeps): still exported, as they came
            if name in st.vars and not (m.posix and name == "OPTERR"):
                st.vars[name] = Var(value="1", exported=True, origin="the shell's start")
            elif name in st.vars:
                st.vars[name] = Var(
                    value=Unknown("$OPTERR: dash keeps the environment's, bash as sh sets 1"), exported=True
                )
        ending = self._walk(tree)
        trap = m.st.traps.get("EXIT")
        if ending.kind == "exit" and trap and not ending.reason.startswith("exec "):
            # a path that ends without starting the server may still start it from its EXIT trap
            return Ending("unresolved", ending.line, ending.where, trap, assumed=ending.assumed)
        return ending

    def _walk(self, tree: Tree) -> Ending:
        m = self.m
        taken = m.forks.taken
        try:
            self.block(list(tree.root_node.children))
        except Launched as hit:
            return Ending("launch", hit.launch.line, hit.launch.where, launch=hit.launch, assumed=taken)
        except ShellExit as ex:
            return Ending("exit", ex.line, m.file, ex.why or f"exit {ex.status}", assumed=taken)
        except Unmodelled as um:
            return Ending("unresolved", um.line or m.line, um.where or m.file, um.reason, assumed=taken)
        except ShellReturn:
            return Ending("exit", 0, m.file, "return outside a function", assumed=taken)
        except LoopJump:
            return Ending("exit", 0, m.file, "break outside a loop", assumed=taken)
        except Unbound as ub:
            return Ending("exit", 0, m.file, f"unbound variable {ub}", assumed=taken)
        return Ending("exit", 0, m.file, "the script ends", assumed=taken)

    def block(self, nodes: list[Node]) -> int | None:
        status: int | None = 0
        k = 0
        while k < len(nodes):
            node = nodes[k]
            background = k + 1 < len(nodes) and nodes[k + 1].type == "&"
            if background:
                status = self.compound.background(node)
                k += 2
                continue
            status = self.stmt(node)
            k += 1
        return status

    def posix_check(self, node: Node) -> None:
        """A ``#!/bin/sh`` script runs under dash (Ubuntu, Debian): what is bash's alone is not modelled
        there (dash refuses it, or reads it otherwise: ``&>`` is ``&`` then ``>``)."""
        t = node.type
        line = line_of(node)
        if t == "declaration_command" and text(node.children[0]) != "export":
            raise Unmodelled(f"{text(node.children[0])} in a /bin/sh script", line)
        if t == "declaration_command" and any(text(c).startswith(("-", "+")) for c in node.children[1:]):
            raise Unmodelled("export with an option in a /bin/sh script", line)
        if t == "test_command" and node.children[0].type == "[[":
            raise Unmodelled("[[ ]] in a /bin/sh script", line)
        if t in ("c_style_for_statement",) or (t == "compound_statement" and node.children[0].type == "(("):
            raise Unmodelled("(( )) in a /bin/sh script", line)
        if t == "function_definition" and node.children[0].type == "function":
            raise Unmodelled("the function keyword in a /bin/sh script", line)
        raw = node_bytes(node)
        if t in ("redirected_statement", "command", "pipeline", "list") and (
            b"&>" in raw or b"|&" in raw or b"<<<" in raw or b"<(" in raw or b">(" in raw
        ):
            raise Unmodelled("&>, |&, <<< or a process substitution in a /bin/sh script", line)
        if t == "case_statement" and (b";&" in raw):
            raise Unmodelled(";& or ;;& in a /bin/sh script", line)

    def stmt(self, node: Node) -> int | None:
        self.m.line = line_of(node)  # for what is found where no node is at hand
        if self.m.capturing is None:  # inside $(...), the statement that ran it is the one that counts
            self.m.statement_substitutions = self.m.substitutions
        self.m.steps += 1
        if self.m.steps > MAX_STEPS:
            raise Unmodelled(f"more than {MAX_STEPS} statements on one path", line_of(node))
        if not charge(1):
            raise Unmodelled(f"more than {MAX_WORK} statements' work on all its paths", line_of(node))
        t = node.type
        if self.m.posix:
            self.posix_check(node)
        if "xtrace" in self.m.st.opts:
            ps4 = self.vars.scalar("PS4")
            if not isinstance(ps4, str) or "$" in ps4 or "`" in ps4:
                # under set -x the shell expands PS4 before each command it traces: a $(...) there runs
                # (red team 22: PS4='$(exec SERVER ...)' started that server); bash started by another user
                # takes PS4 from its environment
                raise Unmodelled("set -x with a PS4 that expands (or is not known)", line_of(node))
        if t in ("comment", ";", "\n", "heredoc_body"):
            return self.m.st.status
        if t in ("variable_assignment", "variable_assignments"):
            # $? in the values is the last command's status; the assignment's own is the last $(...)'s, or 0
            ran = self.m.substitutions
            for child in [node] if t == "variable_assignment" else node.children:
                if child.type == "variable_assignment":
                    self.vars.assignment(child)
            return self.m.errexit(self.m.st.status if self.m.substitutions != ran else 0, node, snippet(node))
        if t in ("declaration_command", "unset_command", "test_command"):
            keyword = text(node.children[0])
            if keyword in self.m.st.funcs:
                raise Unmodelled(f"a function named {keyword} shadows the builtin", line_of(node))
        if t == "declaration_command":
            return self.m.errexit(self.vars.declaration(node), node, snippet(node))
        if t == "unset_command":
            return self.m.errexit(self.vars.unset(node), node, snippet(node))
        if t == "command":
            return self.commands.command(node)
        if t == "redirected_statement":
            return self.commands.redirected(node)
        if t == "list":
            return self.compound.and_or(node)
        if t == "pipeline":
            return self.compound.pipeline(node)
        if t == "negated_command":
            with self.m.ignoring():
                status = self.stmt(node.children[-1])
            self.m.st.status = None if status is None else int(status == 0)
            return self.m.st.status
        if t == "subshell":
            return self.m.errexit(self.compound.subshell(inner(node, "(", ")")), node, "( ... )")
        if t == "compound_statement":
            kids = inner(node, "{", "}")
            if node.children and node.children[0].type == "((":
                return self.m.errexit(self.tests.arith_command(node), node, snippet(node))
            return self.block(kids)
        if t == "function_definition":
            name = text(part(node, "name"))
            if name == "command_not_found_handle":
                # bash (as sh too) runs it, in a child, for a command it cannot find: its exec is then the
                # process that runs (red team 22), where the reader read "not found" and went on
                raise Unmodelled(
                    "a command_not_found_handle function (bash runs it for a missing command)", line_of(node)
                )
            self.m.st.funcs[name] = part(node, "body")
            self.m.st.status = 0
            return 0
        if t == "test_command":
            return self.m.errexit(self.tests.test_command(node), node, snippet(node))
        if t == "if_statement":
            return self.compound.if_statement(node)
        if t == "case_statement":
            return self.compound.case_statement(node)
        if t == "c_style_for_statement":
            return self.compound.c_for_statement(node)
        if t == "for_statement":
            return self.compound.for_statement(node)
        if t in ("while_statement",):
            return self.compound.while_statement(node)
        raise Unmodelled(f"{t.replace('_', ' ')}: {snippet(node)}", line_of(node))
