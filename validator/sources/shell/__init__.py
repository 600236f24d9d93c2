"""The static shell reader: a launcher script read as bash 5 (or dash, for ``#!/bin/sh``) would run it,
never run; also one command line split as a shell would (``command_line``).

The modules, from the top (the ``layers`` contract in ``pyproject.toml`` holds the order: a module imports
only modules below it, and ``launch_script``, the adapter to ``LaunchFacts``, sits above them all):

- ``reader``: ``read_script``: refuses what is not a bash or sh script, parses it once, walks every path.
- ``evaluator``: the statement dispatch, blocks, how a path starts from the environment.
- ``commands`` (simple commands, function calls, the server's start) and ``compound`` (``if``, ``case``,
  loops, lists, pipelines, subshells).
- ``builtins`` (the table and command lookup: ``exec``, ``command``, ``builtin``) over ``builtins_vars``,
  ``builtins_flow`` and ``builtins_output``, grouped by what they do.
- ``conditions``: ``[ ]``, ``[[ ]]``, file tests, ``(( ))``, over one path's machine.
- ``machine``: one path's bookkeeping: forks, ``set -e``, what the script changed on the disk, ``$(...)``.
- ``variables``: lookups, assignments, declarations.
- ``expand``: word expansion (a word's syntax to runs of text, parameters, ``$(( ))``), over the variables.
- ``arith``: bash integer arithmetic over the variables.
- ``fields`` (field splitting, quote removal) and ``patterns`` (bash patterns as regular expressions).
- ``state`` (a variable, a path's state, how a path ends), ``programs`` (what the reader knows of programs
  outside the shell), ``paths`` (the path-forking machinery, which knows nothing of bash) and ``effects``
  (what a loop body or a function can change, from its syntax alone).
- ``syntax`` (the tree-sitter-bash parse, checked against ``bash -n``) and ``values`` (``Unknown``,
  ``Unmodelled``).
- ``command_line``: one command line (``--launch-cmd``, ``ExecStart``) split into words, without a script.

Each module holds one job. The expander (``expand.Expander``) and the conditions (``conditions.Conditions``)
are components the path holds; the statements (``Machine`` <- ``Variables``, ``Commands``/``Compound`` <-
``Evaluator``) still share one object per path. This package imports nothing itself, so that a module
needing one part (``command_line``) does not load the rest.
"""
