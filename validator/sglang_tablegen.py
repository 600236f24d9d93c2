"""Dump SGLang's real server-argument parser as a JSON table.

Preflight must parse a launch command exactly as SGLang does without importing torch or sglang, so the
parser is captured once per release from ``ServerArgs.add_cli_args`` and ``sources/sglang/parser.py``
rebuilds it. Standard library only: it runs in any SGLang build's interpreter (``sglang-table --python``,
or ``scripts/gen_sglang_cli_table.py`` for the shipped table). Output is deterministic: registration
order kept, keys and set-valued choices sorted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# argparse / SGLang action classes -> the behaviour the validator's parser replays.
#   set_const:        stores ``const`` after consuming ``nargs`` values (store_true/false/const, deprecated)
#   store:            stores the converted value(s)
#   boolean_optional: --x stores True, --no-x stores False
#   lora_paths:       SGLang's LoRAPathAction (list of paths or {"lora_name","lora_path"} JSON objects)
#   help:             prints usage and exits 0 (the server never starts)
_KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "set_const",
    "_StoreFalseAction": "set_const",
    "_StoreConstAction": "set_const",
    "_HelpAction": "help",
    "BooleanOptionalAction": "boolean_optional",
    "DeprecatedStoreTrueAction": "set_const",
    "DeprecatedStoreConstAction": "set_const",
    "LoRAPathAction": "lora_paths",
}


def _jsonable(value: Any, where: str) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    try:
        json.dumps(value)
    except TypeError as exc:
        raise SystemExit(f"gen_sglang_cli_table: {where} is not JSON-serialisable: {value!r}") from exc
    return value


def _type_name(action: argparse.Action) -> tuple[str | None, str | None]:
    t = action.type
    if t is None:
        return None, None
    return getattr(t, "__qualname__", repr(t)), getattr(t, "__module__", None)


def dump_action(action: argparse.Action) -> dict[str, Any]:
    cls = type(action).__name__
    if cls not in _KINDS:
        raise SystemExit(f"gen_sglang_cli_table: unknown action class {cls} for {action.option_strings}")
    const = (
        getattr(action, "const_value", action.const) if cls == "DeprecatedStoreConstAction" else action.const
    )
    tname, tmod = _type_name(action)
    choices = action.choices
    return {
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "action": cls,
        "kind": _KINDS[cls],
        "nargs": action.nargs,
        "const": _jsonable(const, f"{action.dest}.const"),
        "default": _jsonable(action.default, f"{action.dest}.default"),
        "type": tname,
        "type_module": tmod,
        "choices": None if choices is None else _jsonable(choices, f"{action.dest}.choices"),
        "required": bool(action.required),
        "deprecated": cls.startswith("Deprecated"),
        "new_flag": getattr(action, "new_flag", None),
        "help": action.help if isinstance(action.help, str) else None,
    }


def build_table() -> dict[str, Any]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    if parser._mutually_exclusive_groups:
        raise SystemExit("gen_sglang_cli_table: mutually exclusive groups appeared; teach sglang_argparse.py")
    return {
        "format": 1,
        "sglang_version": sglang.__version__,
        "python_argparse": f"{sys.version_info.major}.{sys.version_info.minor}",
        "parser": {
            "prog": parser.prog,
            "allow_abbrev": parser.allow_abbrev,
            "prefix_chars": parser.prefix_chars,
            "fromfile_prefix_chars": parser.fromfile_prefix_chars,
            "defaults": _jsonable(dict(parser._defaults), "parser defaults"),
        },
        "n_actions": len(parser._actions),
        "actions": [dump_action(a) for a in parser._actions],
    }


def render(table: dict[str, Any]) -> str:
    """One action per line: compact, diff-friendly, deterministic."""
    head = {k: v for k, v in table.items() if k != "actions"}
    lines = [
        json.dumps(a, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for a in table["actions"]
    ]
    body = json.dumps(head, sort_keys=True, separators=(",", ":"))[:-1]
    return body + ',"actions":[\n' + ",\n".join(lines) + "\n]}\n"


def main(argv: list[str] | None = None, default_output: Path | None = None) -> int:
    ap = argparse.ArgumentParser(description="Dump SGLang's server-argument parser as a JSON table.")
    ap.add_argument("--output", type=Path, default=default_output)
    ap.add_argument("--stdout", action="store_true", help="print instead of writing --output")
    opts = ap.parse_args(argv)
    text = render(build_table())
    if opts.stdout or opts.output is None:
        sys.stdout.write(text)
    else:
        opts.output.parent.mkdir(parents=True, exist_ok=True)
        opts.output.write_text(text, encoding="utf-8")
        print(f"wrote {opts.output} ({len(text)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
