"""Launch command -> ``Launcher`` (read) -> ``LaunchFacts`` (parsed): which entry point, which interpreter,
which server args, which env.

Normalises a command string, args file or unit; recognises ``python -m sglang.launch_server`` and ``sglang
serve`` (as ``sglang/cli/serve.py``: ``--model-type`` dropped, a positional model is ``--model-path``); the
arguments are parsed with SGLang's own flag table (``sglang.cli``).
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from validator.bounded_files import TEXT_CAP, lexists, open_regular, read_text_bounded
from validator.errors import InputError, UnavailableError, UnresolvedLaunch
from validator.facts import LaunchFacts
from validator.sources.container import ContainerSpec, config_on_host
from validator.sources.host.program import PathUnreadable, which
from validator.sources.host.server_command import SGLANG_COMMAND, classify, python_module
from validator.sources.launch.shell.command_line import BINPRM_BUF_SIZE, shebang_line, split_command_line
from validator.sources.launch.wrappers import WRAPPERS, unwrap
from validator.sources.sglang.cli import ArgparseRefusal, ArgumentsRefused, parse_argv
from validator.sources.sglang.cli_table import chosen, load_table
from validator.trusted_files import read_as

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?\Z")
_SHELL_OPERATORS = {";", "&&", "||", "|", "&", ">", ">>", "<", "2>", "2>&1", "$(", "`"}
_SERVE_LLM_BACKENDS = {"auto", "llm"}


def _split_env_prefix(
    argv: list[str], origin: str, env: dict[str, str], env_origin: dict[str, str], unknown: dict[str, str]
) -> list[str]:
    """Consume leading ``env [-i] [-u NAME] VAR=val ...`` and bare ``VAR=val`` words into ``env``, and the
    wrappers that exec their command (``wrappers.WRAPPERS``: nohup, setsid, timeout...) with what they set
    (``unknown``: variables set to what is not known here, with why)."""
    i, wrapped = 0, False  # after a wrapper, a word NAME=V is the program it runs, not an assignment
    while i < len(argv):
        word = argv[i]
        if word == "exec" and i == 0:
            i += 1
            continue
        if Path(word).name in WRAPPERS and "=" not in word:
            done = unwrap(Path(word).name, argv[i + 1 :], origin)
            for name, text in done.env.items():
                env[name], env_origin[name] = text, origin
                unknown.pop(name, None)
            for name, why in done.unknown.items():
                env.pop(name, None)
                unknown[name] = why
            i, wrapped = i + 1 + done.skip, True
            if i == len(argv):
                raise InputError(origin, f"{Path(word).name} with no program after it")
            continue
        if Path(word).name == "env" and "=" not in word:
            i, wrapped = i + 1, False
            while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
                opt = argv[i]
                if opt == "--":
                    i += 1
                    break
                if opt in ("-i", "--ignore-environment"):
                    env.clear()
                    env_origin.clear()
                    unknown.clear()
                    i += 1
                elif opt in ("-u", "--unset") and i + 1 < len(argv):
                    env.pop(argv[i + 1], None)
                    env_origin.pop(argv[i + 1], None)
                    unknown.pop(argv[i + 1], None)
                    i += 2
                elif opt.startswith("--unset="):
                    env.pop(opt.split("=", 1)[1], None)
                    unknown.pop(opt.split("=", 1)[1], None)
                    i += 1
                else:
                    raise InputError(origin, f"env option {opt!r} is not understood by spark-validate")
            continue
        m = _ASSIGNMENT.match(word)
        if m is None or wrapped:
            break
        env[m.group(1)] = m.group(2)
        env_origin[m.group(1)] = origin
        unknown.pop(m.group(1), None)
        i += 1
    return argv[i:]


def shebang(script: Path) -> tuple[str, list[str]] | None:
    """A script's ``#!`` interpreter and its options (``#!/venv/bin/python3 -I``), as Linux reads the line."""
    try:
        fd = open_regular(script, "program")  # a FIFO on PATH must not block the read of a shebang
    except InputError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(BINPRM_BUF_SIZE)
    except OSError:
        return None
    line = shebang_line(head)
    if line is None:
        return None
    parts = line.split()
    if not parts:
        return None
    if Path(parts[0]).name == "env" and len(parts) > 1:
        rest = parts[2:] if parts[1] != "-S" else parts[3:]
        return (parts[1] if parts[1] != "-S" else parts[2] if len(parts) > 2 else parts[1]), rest
    return parts[0], parts[1:]


def _sglang_interpreter(program: str, env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The python behind ``sglang`` and its options: its shebang if readable, else the sibling python."""
    try:
        script = Path(program) if "/" in program else which(program, env)
    except PathUnreadable:
        return None, []
    if script is None:
        return None, []
    found = shebang(script)
    if found:
        return found
    for sibling in ("python", "python3"):
        candidate = script.parent / sibling
        try:  # looked for as the launch's owners could look: a python beside it where they cannot look
            there = lexists(candidate, "the python beside it")  # is not theirs to learn about
        except InputError:
            return None, []
        if there:  # an unreadable directory: no sibling known, never a traceback
            return str(candidate), []
    return None, []


def _serve_argv(args: list[str], origin: str) -> list[str]:
    """What ``sglang serve`` hands to ``prepare_server_args`` (sglang/cli/serve.py)."""
    backend = "auto"
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--model-type":
            if i + 1 >= len(args):
                raise InputError(origin, "Error: --model-type requires a value.")
            backend = args[i + 1]
            i += 2
            continue
        if arg.startswith("--model-type="):
            backend = arg.split("=", 1)[1]
        else:
            kept.append(arg)
        i += 1
    if not backend:
        raise InputError(origin, "Error: --model-type requires a non-empty value.")
    if backend not in _SERVE_LLM_BACKENDS:
        raise InputError(origin, f"sglang serve --model-type {backend} does not start the LLM server")
    if any(a in ("-h", "--help") for a in kept):
        raise InputError(origin, "sglang serve --help prints usage and exits; the server would not start")
    if kept and not kept[0].startswith("-"):
        kept = ["--model-path", kept[0], *kept[1:]]
    return kept


def unwrap_launch(argv: list[str], where: str) -> tuple[list[str], list[str]] | None:
    """``spark-validate launch [opts] -- CMD...`` -> (CMD, opts): the server the wrapper will exec, for a
    launch command and a unit's ExecStart alike; None when ``argv`` is not that wrapper."""
    if len(argv) < 2 or Path(argv[0]).name != "spark-validate" or argv[1] != "launch":
        return None
    if "--" not in argv:
        raise InputError(where, "'spark-validate launch' needs '-- CMD...' to name the server")
    cut = argv.index("--")
    if cut == len(argv) - 1:
        raise InputError(where, "'spark-validate launch --' names no server command")
    return argv[cut + 1 :], argv[2:cut]


# a program that is a shell, and how the script reader reads its -c string (sh: as a #!/bin/sh script, only
# what POSIX sh and bash do alike: which shell /bin/sh is, in an image or on a host, is not looked at)
SHELLS = {"bash": "bash", "sh": "sh", "dash": "sh"}


class ProgramReader(Protocol):
    """``script.launch_from_program``: reads a launch whose program is a shell given ``-c``, a container
    runtime's ``run``/``exec`` or a shell script; given by the callers that may load the shell reader (it
    reads through this module)."""

    def __call__(
        self,
        argv: list[str],
        *,
        origin: str,
        env: Mapping[str, str],
        env_origin: Mapping[str, str],
        working_directory: Path | None,
    ) -> Launcher | None: ...


_SHELL_WORDS = {"export", "source", ".", "set", "cd", "if", "for", "while", "case", "unset", "declare", "#!"}


def _other_input_hint(name: str) -> str:
    """Where the program says which input the operator meant: a shell script, or a container."""
    if name in _SHELL_WORDS or name.startswith("#!"):
        return " (this is a shell script: give it with --script FILE)"
    if name in ("docker", "podman", "nvidia-docker"):
        return " (a container: give the command line with --docker-cmd, or a Compose file with --compose)"
    if name in ("docker-compose",):
        return " (give the Compose file with --compose)"
    return ""


@dataclass
class Launcher:
    """A launch command as its input gives it, read but not parsed: what the readers took from disk (the
    server's words, environment and its origins, working directory, what is unresolved, their warnings,
    the container), independent of the flag table. A preflight reads its inputs once into this and parses
    it with each table it needs, so that no fact is assembled from two versions of a file."""

    facts: LaunchFacts  # all but the parse's argv, args, explicit and config_file; warnings: the reader's
    server_args: list[str]  # the words SGLang's parser is given
    base_dir: Path | None = None  # where a relative --config is found
    container: ContainerSpec | None = None  # the container the launch runs in, as its input describes it
    placeholders: bool = False  # a script's: a required value known only at run time stands as a word
    # a script's other run-time paths: their server words, where they differ from ``server_args``
    alternatives: list[list[str]] = field(default_factory=list)
    alternatives_why: str = ""  # the run-time conditions that choose between the paths
    alternatives_at: str = ""  # where the paths launch (file:line)
    paths_at: list[str] = field(default_factory=list)  # where ``server_args``, then each alternative, launch

    def parsed(self) -> LaunchFacts:
        """The launch parsed with the table ``parsing_with`` chose (outside it, the shipped one). A path
        whose words SGLang refuses starts no server (its parser exits first), so it is not the launch, as a
        path that exits before it is not: the paths that parse are judged, and a warning names it; where
        every path is refused, the launch is malformed."""
        with read_as(self.facts.named_by) as namers:  # a --config file is named by the launch...
            config_at: Callable[[str], Path] | None = None
            if self.container is not None:
                config_at = functools.partial(config_on_host, spec=self.container)
            elif self.base_dir is None and "working_directory" in self.facts.unresolved:
                why = f"{self.facts.origin}: {self.facts.unresolved['working_directory']}"
                config_at = functools.partial(_config_where_unknown, why=why)
            parses, refused = [], []
            origin, base_dir = self.facts.origin, self.base_dir
            for k, words in enumerate([self.server_args, *self.alternatives]):
                try:
                    parses.append(parse_argv(words, origin=origin, base_dir=base_dir, config_at=config_at))
                except ArgumentsRefused as exc:
                    if not self.alternatives:
                        raise
                    at = self.paths_at[k] if k < len(self.paths_at) else self.alternatives_at
                    table = chosen()
                    unread = table is not None and table.unread
                    if (self.container is not None or unread) and isinstance(exc, ArgparseRefusal):
                        # the SGLang in an image, of a version not read here (or a host build with no
                        # table of its own), may accept what the shipped table refuses: whether that
                        # path starts a server is not known
                        whose = "the build's" if self.container is None else "the image's"
                        raise UnresolvedLaunch(
                            f"{at or self.facts.origin}: the shipped flag table refuses the server's "
                            f"arguments there ({exc.reason}); {whose} SGLang may not"
                        ) from None
                    refused.append((at or self.facts.origin, exc))
        if not parses:
            raise refused[0][1]
        parsed, others = parses[0], parses[1:]
        facts = copy.deepcopy(self.facts)
        facts.named_by = dict(namers)  # ... and names, in turn, as its owner could (its model path)
        facts.argv, facts.args, facts.explicit = parsed.argv, parsed.args, parsed.explicit
        facts.config_file = parsed.config_file
        facts.warnings[:0] = parsed.warnings
        facts.table_warnings = list(parsed.warnings)
        facts.warnings.extend(
            f"{at}: SGLang refuses the server's arguments there ({exc.reason}) and exits before it serves: "
            "that path starts no server, so the paths that do are the ones judged"
            for at, exc in refused
        )
        for other in others:
            self._differing(facts, other.args, other.explicit)
        for dest in facts.unresolved if self.placeholders else ():
            if facts.args.get(dest) == placeholder(dest):  # the word stood for nothing known: unset
                facts.args[dest] = None
        return facts

    def _differing(self, facts: LaunchFacts, args: Mapping[str, object], explicit: set[str]) -> None:
        """What another path gives differently is unresolved, the argument's presence included: a flag
        one path gives and another leaves out is neither that path's value nor the default."""
        for dest in sorted(set(facts.args) | set(args)):
            given = (dest in facts.explicit, dest in explicit)
            if given[0] == given[1] and facts.args.get(dest) == args.get(dest):
                continue
            what = "given on some paths only" if given[0] != given[1] else "differs between paths"
            facts.unresolved.setdefault(
                dest, f"{what}: depends on a run-time condition ({self.alternatives_why})"
            )
            facts.unresolved_at.setdefault(dest, self.alternatives_at or facts.origin)
            facts.explicit.add(dest)


def placeholder(dest: str) -> str:
    """The word standing for a required option's value that is known only at run time (the option is
    listed in ``unresolved``; ``Launcher.parsed`` takes the word out of the parsed settings again)."""
    return f"<{dest}: known only at run time>"


def required(flag: str) -> bool:
    """The server flag is required and takes a string: a value known only at run time stands as a word
    (``placeholder``), so that SGLang's parser does not refuse the command for it."""
    action = load_table().by_option.get(flag)
    return action is not None and action.required and action.type in (None, "str")


def takes_value(flag: str) -> str | None:
    """The argparse dest of a server flag that takes a value, else None."""
    action = load_table().by_option.get(flag)
    if action is None or action.kind not in ("store", "lora_paths"):
        return None
    return action.dest


def many_values(flag: str) -> bool:
    """The server flag takes one or more values (argparse ``nargs='+'``): it takes every word after it up to
    the next that looks like an option (``--cuda-graph-bs-decode 1 2 4``)."""
    action = load_table().by_option.get(flag)
    return action is not None and action.nargs == "+"


def looks_like_option(word: str) -> bool | None:
    """Whether argparse's ``_parse_optional`` takes ``word`` for an option in SGLang's parser (which has no
    option that looks like a negative number), so that it is no value: ``-1``, ``-.5``, ``-`` and words
    without a leading dash are values. None for a dashed word with a blank in it: an option's ``=`` form
    or abbreviation (``--chat-te=a b``) is one, any other is a value."""
    if not word.startswith("-") or word == "-" or re.fullmatch(r"-\d+|-\d*\.\d+", word):
        return False
    return None if " " in word else True


def optional_value(flag: str) -> bool:
    """The server flag's value is optional or may be empty (argparse ``nargs`` ``?`` or ``*``): argparse gives
    it a following word only when that word is not an option, so a word known only at run time after it
    may be an option of its own (``--model-checksum "$X"`` with X=``--enable-fp32-lm-head``)."""
    action = load_table().by_option.get(flag)
    return action is not None and action.nargs in ("?", "*")


def _config_where_unknown(name: str, why: str) -> Path:
    """``--config NAME`` of a launch whose working directory is known only at run time (``why``): a
    relative NAME is SGLang's working directory's, never this process's own (a second user's script that
    cds to a computed place had the operator's own c.yaml there read as the server's settings)."""
    if not name.startswith("/"):
        raise UnresolvedLaunch(
            f"--config {name} is relative to the server's working directory, known only at run time ({why})"
        )
    return Path(name)


def launch_from_argv(
    argv: list[str],
    *,
    origin: str,
    env: Mapping[str, str] | None = None,
    env_origin: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    working_directory: Path | None = None,
    program_reader: ProgramReader | None = None,
) -> Launcher:
    """A full launch command as a word list (``env`` is the environment it is started with;
    ``working_directory`` the server's cwd, when known; ``program_reader`` reads a program that is not
    SGLang's: a shell, a container runtime, a script; else such a program is refused)."""
    environ = dict(env or {})
    where = {k: (env_origin or {}).get(k, "environment") for k in environ}
    unknown: dict[str, str] = {}
    words, layer = list(argv), 0
    while True:  # `spark-validate launch -- CMD` execs CMD: one layer at a time, never a call per layer
        words = _split_env_prefix(words, origin, environ, where, unknown)
        if not words:
            raise InputError(origin, "no command after the environment assignments")
        for w in words if layer == 0 else ():  # each later layer's words are the end of these
            if w in _SHELL_OPERATORS:
                raise InputError(origin, f"shell operator {w!r}: give the server command alone")
        wrapped = unwrap_launch(words, origin)
        if wrapped is None:
            break
        words, layer = wrapped[0], layer + 1
    program = words[0]
    name = Path(program).name
    interpreter: str | None
    options: list[str] = []
    stood_in: list[str] | None = None
    if _PYTHON.match(name) and (stood_in := _stand_in(words, origin)) is not None:
        server_args, interpreter, entry = stood_in, program, "launch_server"
    elif _PYTHON.match(name):
        found = python_module(words)
        if isinstance(found, str):
            raise InputError(origin, found)
        module, server_args, options = found
        if module != "sglang.launch_server":
            raise InputError(origin, f"python -m {module} is not the SGLang server (sglang.launch_server)")
        entry, interpreter = "launch_server", program
    elif name == "sglang":
        if len(words) < 2 or words[1] != "serve":
            sub = words[1] if len(words) > 1 else "(nothing)"
            raise InputError(origin, f"sglang {sub} does not start the server (expected 'sglang serve')")
        server_args = _serve_argv(words[2:], origin)
        interpreter, options = _sglang_interpreter(program, environ)
        entry = "serve"
    elif (stood_in := _stand_in(words, origin)) is not None:
        server_args, interpreter, entry = stood_in, None, "launch_server"
    else:
        through = None
        if program_reader is not None:
            through = program_reader(
                words, origin=origin, env=environ, env_origin=where, working_directory=working_directory
            )
        if through is None:
            raise InputError(
                origin,
                f"unrecognised program {program!r}: expected 'python -m sglang.launch_server' or 'sglang "
                "serve'" + _other_input_hint(name),
            )
        if unknown:  # a wrapper's variable known only at run time, then read by what it runs
            raise UnresolvedLaunch(f"{origin}: {'; '.join(unknown.values())}")
        return through
    facts = LaunchFacts(
        origin=origin,
        argv=[],
        entry=entry,
        interpreter=interpreter,
        args={},
        explicit=set(),
        env=environ,
        env_origin=where,
        program=program,
        command=words,
        consumed_env=consumed_by_command(environ, words),
        interpreter_options=options,
        working_directory=working_directory,
    )
    facts.unresolved.update(unknown)
    return Launcher(facts, server_args, base_dir)


def _stand_in(words: list[str], origin: str) -> list[str] | None:
    """The SGLang arguments a registered stand-in's command line (``server_command.StandIn``) stands in
    for; None when ``words`` is not one."""

    try:
        found = classify(words)
    except UnavailableError as exc:
        raise InputError(origin, str(exc)) from None
    if found is None or found[0] != "stand-in":
        return None
    return found[1][len(SGLANG_COMMAND) :]


def consumed_by_command(env: Mapping[str, str], words: list[str]) -> set[str]:
    """Variables the command line itself was built from: a value of two or more words, options among
    them, that appears as a run of the command's words. systemd splits an unbraced ``$SGLANG_ARGS`` in
    ExecStart= into the server's arguments (the shipped unit does this); the variable then reaches the
    server too, where SGLang ignores it, harmlessly: it did its job before the server started."""
    consumed: set[str] = set()
    for name, value in env.items():
        parts = value.split()
        if len(parts) < 2 or not any(p.startswith("--") for p in parts):
            continue
        n = len(parts)
        if any(words[i : i + n] == parts for i in range(1, len(words) - n + 1)):
            consumed.add(name)
    return consumed


def launch_from_string(
    cmd: str,
    *,
    origin: str,
    env: Mapping[str, str] | None = None,
    program_reader: ProgramReader | None = None,
) -> Launcher:
    """A launch command as one shell-quoted string (``--launch-cmd``)."""
    words = split_command_line(cmd, origin, os.environ if env is None else env, comments=False)
    return launch_from_argv(words, origin=origin, env=env, program_reader=program_reader)


def launch_from_args_file(path: Path | str, *, env: Mapping[str, str] | None = None) -> Launcher:
    """``--launch-args-file``: a full command, or only the server args (many per line, ``#`` comments).
    Args only: the entry point is taken to be ``python -m sglang.launch_server`` with no known interpreter."""
    p = Path(path)
    origin = str(p)
    text = read_text_bounded(p, TEXT_CAP, "launch args file", names=True)
    words = split_command_line(text, origin, os.environ if env is None else env, comments=True)
    if not words:
        raise InputError(origin, "launch args file holds no arguments")
    if words[0].startswith("-"):
        environ = dict(env or {})
        where = dict.fromkeys(environ, "environment")
        return Launcher(LaunchFacts(origin, [], "launch_server", None, {}, set(), environ, where), words)
    return launch_from_argv(words, origin=origin, env=env)
