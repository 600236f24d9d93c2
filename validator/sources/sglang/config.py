"""SGLang's ``--config FILE`` merge, replayed (``sglang/srt/utils/server_args_config_parser.py``): a YAML
file's options turned into argv words placed before the command line's, so the command line wins.

Why apart from the parser: the merge runs before argparse and on its own rules (which keys a YAML file may
set, how a bool, a list or a mapping becomes words, one ``--config`` only), and it reads a file, bounded
and with YAML aliases refused; the parser then parses the merged argv as it parses any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from validator.bounded_files import TEXT_CAP, read_text_bounded
from validator.errors import InputError
from validator.sources.sglang.cli_table import CliAction, CliTable, load_table
from validator.trusted_files import UnsafeLocation, look_unplanted


def _config_keys(action: CliAction) -> set[str]:
    return {action.dest} | {o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")}


def _config_support(table: CliTable) -> tuple[set[str], dict[str, CliAction]]:
    """(keys of store_true flags, unsupported key -> action), as ConfigArgumentMerger computes them."""
    store_true = {k for a in table.actions if a.action == "_StoreTrueAction" for k in _config_keys(a)}
    supported = [
        a for a in table.actions if a.action in ("_StoreTrueAction", "_StoreAction") or a.nargs is None
    ]
    supported_keys = {k for a in supported for k in _config_keys(a)}
    unsupported: dict[str, CliAction] = {}
    for action in table.actions:
        if not action.option_strings or action in supported:
            continue
        if {"--config", "--help", "-h"} & set(action.option_strings):
            continue
        for key in _config_keys(action):
            if key not in supported_keys:
                unsupported[key] = action
    return store_true, unsupported


def _yaml_to_argv(data: dict[Any, Any], table: CliTable, where: str) -> list[str]:
    store_true, unsupported = _config_support(table)
    out: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise InputError(where, f"config key {key!r} is not a string (SGLang would crash on it)")
        norm = key.replace("-", "_")
        if norm in unsupported:
            raise InputError(
                where, f"Unsupported config option '{norm}' with action '{unsupported[norm].action}'"
            )
        if isinstance(value, bool):
            if norm in store_true:
                if value:
                    out.append(f"--{key}")
            else:
                out.extend([f"--{key}", str(value).lower()])
        elif isinstance(value, list):
            if value:
                out.append(f"--{key}")
                out.extend(str(item) for item in value)
        elif isinstance(value, dict):
            out.extend([f"--{key}", json.dumps(value)])
        else:
            out.extend([f"--{key}", str(value)])
    return out


def merge_config(
    argv: list[str],
    *,
    origin: str,
    base_dir: Path | None = None,
    table: CliTable | None = None,
    config_at: Callable[[str], Path] | None = None,
) -> tuple[list[str], Path | None]:
    """Apply ``--config FILE`` as SGLang does: the file first, so the command line wins. Only the exact token
    ``--config`` triggers it; a relative path is read against ``base_dir``, else the CWD."""
    table = table or load_table()
    indices = [i for i, arg in enumerate(argv) if arg == "--config"]
    if not indices:
        return list(argv), None
    if len(indices) > 1:
        raise InputError(origin, "Multiple config files specified! Only one allowed.")
    index = indices[0]
    if index == len(argv) - 1:
        raise InputError(origin, "No config file specified after --config flag!")
    name = argv[index + 1]
    if not name:  # SGLang merges nothing for an empty name; argparse then stores '' as --config
        return list(argv), None
    path = Path(name) if config_at is None else config_at(name)  # config_at: a container's, on the host
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(origin, f"Config file must be YAML format, got: {path.suffix}")
    try:  # walked, never looked at by name: where the launch's owner could not look, the read says why
        exists = look_unplanted(str(path)) is not None
    except UnsafeLocation:
        exists = True
    except OSError as exc:  # a name over the kernel's limit: SGLang's Path.exists raises the same
        raise InputError(origin, str(exc).replace(str(path), name)) from None
    if not exists:
        raise InputError(origin, f"Config file not found: {name}")
    import yaml  # lazy: only a --config command pays for it

    from validator.yaml_safe import safe_load

    text = read_text_bounded(path, TEXT_CAP, "--config file", names=True)  # regular file, size-capped
    try:
        # A server config has no use for anchors and aliases; refusing them keeps a small file from
        # expanding into gigabytes of argv words (a "billion laughs").
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                raise InputError(
                    str(path),
                    "YAML aliases are not accepted in a --config file",
                    mark.line + 1 if mark else None,
                )
        data = safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        line = None
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = int(mark.line) + 1
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(str(path), f"cannot read --config file: {reason}", line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(str(path), "Config file must contain a dictionary at root level")
    merged = _yaml_to_argv(data, table, str(path)) + argv[:index] + argv[index + 2 :]
    return merged, path
