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
- ``machine``: one path's bookkeeping: forks, ``set -e``, what the script changed on the disk, ``$(...)``.
- ``variables`` (lookups, assignments, declarations) and ``conditions`` (``[ ]``, ``[[ ]]``, file tests).
- ``words`` (a word's syntax to runs of text) and ``arith`` (``$(( ))``).
- ``params``: parameter expansion (``$v``, ``${v:-d}``, ``${v#p}``, arrays, ``$@``).
- ``fields`` (field splitting, quote removal) and ``patterns`` (bash patterns as regular expressions).
- ``state`` (a variable, a path's state, how a path ends), ``programs`` (what the reader knows of programs
  outside the shell), ``paths`` (the path-forking machinery, which knows nothing of bash) and ``effects``
  (what a loop body or a function can change, from its syntax alone).
- ``syntax`` (the tree-sitter-bash parse, checked against ``bash -n``) and ``values`` (``Unknown``,
  ``Unmodelled``).
- ``command_line``: one command line (``--launch-cmd``, ``ExecStart``) split into words, without a script.

Each module holds one job; the mixins (``Parameters`` <- ``Words`` <- ``Variables``/``Conditions`` <-
``Machine`` <- ``Commands``/``Compound`` <- ``Evaluator``) share one object per path, each naming what it
needs from the layers above as abstract methods. This package imports nothing itself, so that a module
needing one part (``command_line``) does not load the rest.
"""
