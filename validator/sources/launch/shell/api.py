"""What the builtins and the statements' components see of the executor (``evaluator.Evaluator``): the
parts it owns (the path's machine, variables, word expansion and conditions) and the three ways back into
it (a statement, a block, a command looked up as bash would). A Protocol, so that those modules sit below
the executor that holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tree_sitter import Node

from validator.sources.launch.shell.conditions import Conditions
from validator.sources.launch.shell.expand import Expander
from validator.sources.launch.shell.machine import Machine, Prefix
from validator.sources.launch.shell.values import Field
from validator.sources.launch.shell.variables import Variables


class Shell(Protocol):
    """One path's executor."""

    m: Machine
    vars: Variables
    words: Expander
    tests: Conditions

    def stmt(self, node: Node) -> int | None: ...

    def block(self, nodes: list[Node]) -> int | None: ...

    def subshell(self, nodes: list[Node]) -> int | None:
        """``nodes`` run in a copy of the state (``( ... )``): only what they do to the disk outlives it."""

    def invoke(
        self,
        words: list[Field],
        prefix: Prefix,
        node: Node,
        *,
        execs: bool = False,
        skip_functions: bool = False,
        only_builtins: bool = False,
    ) -> int | None:
        """The command ``words`` with the assignments ``prefix``, looked up as bash does."""


# a builtin: (executor, argument fields, prefix assignments, node) -> status (None: known only at run time)
Builtin = Callable[[Shell, list[Field], Prefix, Node], "int | None"]
