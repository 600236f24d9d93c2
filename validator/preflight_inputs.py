"""What preflight reads, stated once: each ``PreflightInputs`` field given on the command line carries its
option (flag, metavar, help, group) as field metadata (``validator.cli_options``, shared with ``LiveInputs``).

The parser is built from these fields and read back into them by name, so an input cannot be added to one
and dropped on the way to the other (``tests/test_preflight_inputs.py``). Standard library only: the CLI
builds every sub-parser at start-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from validator.cli_options import CliOption, cli_options, read_back
from validator.cli_options import option as _option

if TYPE_CHECKING:
    from validator.selection import Selection
    from validator.sources.host.server_processes import ServerProcess

Group = Literal["command", "env", "host"]  # the server's command, its environment, the host's files


@dataclass
class PreflightInputs:
    """Everything preflight may be given. The command sources come first (exactly one of them, or
    ``argv``, or ``running``, names the server's command); the rest add what the command does not show."""

    launch_cmd: str | None = _option(
        "--launch-cmd", "STRING", "the server's launch command, as one string", "command"
    )
    launch_args_file: Path | None = _option(
        "--launch-args-file",
        "FILE",
        "a file holding the launch command or only its arguments",
        "command",
        Path,
    )
    unit: Path | None = _option(
        "--unit", "FILE", "a systemd unit: ExecStart, Environment=, EnvironmentFile=", "command", Path
    )
    script: Path | None = _option(
        "--script", "FILE", "a launcher shell script (start.sh), read statically, never run", "command", Path
    )
    docker_cmd: str | None = _option(
        "--docker-cmd",
        "STRING",
        "a `docker run ...` (or podman run) command line: its command, -e, --env-file, -v",
        "command",
    )
    compose: Path | None = _option(
        "--compose",
        "FILE",
        "a Compose file: the server's service (command, environment, env_file, volumes)",
        "command",
        Path,
    )
    service: str | None = _option("--service", "NAME", "the Compose service that runs the server", "command")
    script_args: list[str] = _option(
        "--script-arg",
        "ARG",
        "an argument the --script is run with, as the operator runs it (repeatable, in order; without it "
        "the script is read as run with no arguments); one that starts with '-' is given as "
        "--script-arg=-ARG",
        "command",
        repeat=True,
    )
    env_files: list[Path] = _option(
        "--env-file",
        "FILE",
        "systemd EnvironmentFile syntax; repeatable (the process environment counts too); with --unit, "
        "read in place of the unit's EnvironmentFile= (to check a unit before installing its file)",
        "env",
        Path,
        repeat=True,
    )
    model_dir: Path | None = _option("--model-dir", "DIR", "the checkpoint directory", "host", Path)
    sglang_root: Path | None = _option(
        "--sglang-root",
        "DIR",
        "read this sglang package directory when the launch command's interpreter cannot be asked; one "
        "that interpreter does not import is no evidence (launch.program fails)",
        "host",
        Path,
    )
    service_user: str | None = _option(
        "--service-user", "USER", "the user the server runs as (cache writability)", "host"
    )
    kube_manifest: Path | None = _option(
        "--kube-manifest",
        "FILE",
        "a Kubernetes manifest whose startupProbe bounds the server's start (host.start_budget)",
        "host",
        Path,
    )
    kube_container: str | None = _option(
        "--kube-container", "NAME", "the SGLang container in --kube-manifest", "host"
    )
    # Not options: given by the front door or filled in by the job.
    argv: Sequence[str] | None = None  # `launch -- CMD...`: exactly the command that will be exec'd
    base_env: Mapping[str, str] | None = None  # default: this process's environment
    # a running server: its real argv, environment and working directory are the launch command
    running: ServerProcess | None = None
    selection: Selection | None = None  # --check / --skip


def options(*groups: Group) -> Iterator[tuple[str, CliOption]]:
    """(field name, option) of every command-line input, in declaration order (the order of --help),
    limited to ``groups`` when given."""
    return cli_options(PreflightInputs, *groups)


def given(args: argparse.Namespace, *groups: Group) -> list[str]:
    """The flags of ``groups`` the command line gave (for messages about inputs that do not apply)."""
    return [opt.flag for name, opt in options(*groups) if getattr(args, name, None) not in (None, [])]


def inputs_from(args: argparse.Namespace, argv: Sequence[str] | None = None, **extra: Any) -> PreflightInputs:
    """The parsed command line as preflight's inputs: every option field by name."""
    return PreflightInputs(argv=argv, **extra, **read_back(PreflightInputs, args))
