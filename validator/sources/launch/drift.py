"""What differs between a declared launch (a unit, script, Compose file, command) and a running server.

Compared as SGLang parsed both (order and ``--flag=value`` spellings do not count): the arguments, the
program, every variable the declaration sets and every recipe variable the process has. A credential's
values never reach a message: it is named only.
"""

from __future__ import annotations

from validator.facts import LaunchFacts
from validator.redact import is_secret_key
from validator.sources.sglang.cli_table import load_table

# Variables that configure the recipe, NCCL or the caches: a running server that has one its declaration
# does not set was started some other way (by hand, or from an edited file).
RECIPE_ENV_PREFIXES = ("SGLANG_", "SPARK_VALIDATE_", "NCCL_", "GLOO_", "CUDA_", "FLASHINFER_", "HUMMING_")


# What a shell or supervisor sets by itself (bash's PWD for a script's working directory, SHLVL): not
# something the declaration's author declared, and the running process's own value differs by design.
SHELL_MAINTAINED = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PPID", "SHELLOPTS", "BASHOPTS", "UID", "EUID"})


def _differs(label: str, key: str, want: object, have: object) -> str:
    """One difference; a credential's values never reach a report, it is named only."""
    if is_secret_key(key, want or have or ""):
        return f"{label}: differs (a credential: values not shown)"
    shown = ["(unset)" if v is None else repr(v) for v in (want, have)]
    return f"{label}: declared {shown[0]}, running {shown[1]}"


def _same_program(declared: str, running: str) -> bool:
    """Two paths are compared as written; a bare name (found on PATH) only by its name, since the
    running argv[0] may be either spelling of the same program."""
    if "/" in declared and "/" in running:
        return declared == running
    return declared.rsplit("/", 1)[-1] == running.rsplit("/", 1)[-1]


def drift_items(declared: LaunchFacts, running: LaunchFacts, env_known: bool) -> list[str]:
    """What differs between a declaration and the running server: arguments (as SGLang parsed them, so
    order and ``--flag=value`` spellings do not count), the program, and the recipe's environment."""
    items: list[str] = []
    table = load_table()
    for dest in sorted(declared.explicit | running.explicit):
        want, have = declared.args.get(dest), running.args.get(dest)
        if want != have:
            action = table.action_for_dest(dest)
            flag = action.option_strings[0] if action is not None and action.option_strings else dest
            items.append(_differs(flag, dest, want, have))
    if declared.program and running.program and not _same_program(declared.program, running.program):
        items.append(f"program: declared {declared.program}, running {running.program}")
    if env_known:
        names = set(declared.env) | {k for k in running.env if k.startswith(RECIPE_ENV_PREFIXES)}
        names -= SHELL_MAINTAINED
        for name in sorted(names):
            want, have = declared.env.get(name), running.env.get(name)
            if want != have and not (want is None and name in running.consumed_env):
                items.append(_differs(f"${name}", name, want, have))
    return items
