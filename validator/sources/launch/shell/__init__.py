"""The static shell reader: a launcher script read as bash 5 (or dash, for ``#!/bin/sh``) would run it,
never run; also one command line split as a shell would (``command_line``).

Scope: what real launchers do. The corpus (``tests/corpus/scripts/``: 0xBakeer's ``start.sh`` and its
``.env``, ly01325's two launchers, pocharlies' ``head.sh``; MiaAI-Lab's ``start.sh``, by its shape, in
``tests/test_script_completeness.py``) runs under ``set -euo pipefail``; assigns and exports variables with
``${V:-default}``; sources a ``.env`` (under ``set -a``) and a venv's ``activate``; builds the argv in
arrays (``FLAGS+=(...)``, ``"${FLAGS[@]}"``, an associative array, ``${!v}``, ``printf -v``); branches with
``case``, ``[[ ]]``, ``[ ]``, ``(( ))`` and ``&&``/``||``; defines small functions; ``cd``s to
``$(dirname ...)``; loops over words or a glob; writes a here-document to a file; and ends in ``exec``,
``env`` or ``docker run`` of ``python3 -m sglang.launch_server``. These are modelled as bash and dash do
them, and ``tests/test_shell_differential.py`` holds them to the real shells.

The rule: anything else is unknown, never guessed and never searched for in the text. A value known only
at run time is ``values.Unknown`` (with why), a condition on one forks the path, what a run-time construct
can change (an unread sourced file, a loop over unknown words) is made unknown, and a construct outside
the scope raises ``values.Unmodelled``: that path's launch is unresolved.

The parts, each a plain object holding the parts it uses (``layers`` in ``pyproject.toml`` keeps the
imports downward):

- parse: ``syntax`` (tree-sitter-bash, confirmed by ``bash -n``; nodes are ``tree_sitter.Node``).
- expand: ``expand.Expander`` (words, parameters; ``arith``, ``patterns``, ``fields`` under it), over the
  variables as ``state.Names``.
- execute: ``reader.read_script`` walks every path (``paths``) with an ``evaluator.Evaluator``, which owns
  the path's ``machine.Machine`` (state, forks, ``set -e``, the disk, output), ``variables.Variables``
  (which owns the expander), ``conditions.Conditions``, ``commands.Commands`` and ``compound.Compound``.
  The builtins (``builtins`` and its three groups) are functions over ``api.Shell``, the executor's
  interface; ``effects`` bounds what a loop or a function can change; ``programs`` is what the reader
  knows of programs outside the shell.
- adapt: ``validator.sources.launch.script`` turns the endings (``state.Reading``) into launch facts.

This package imports nothing itself, so that a module needing one part (``command_line``) does not load
the rest.
"""
