"""Exit codes and the few exceptions that map onto them.

The codes are a contract (sysexits.h values): systemd units use `RestartPreventExitStatus=78`, CI jobs
branch on 65/69. Every anticipated failure is raised as one of these exceptions, carrying a one-line
message that names the file or endpoint, so the CLI can print it without a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    INTERNAL = 1
    USAGE = 2
    DATAERR = 65  # malformed input: rule pack, unit file, env file, config.json, safetensors header, argv
    UNAVAILABLE = 69  # server not ready in time, or required evidence unreadable
    CONFIG = 78  # a critical check failed: the deployment is misconfigured


class ValidatorError(Exception):
    """Base for errors that end a command with a defined exit code and a one-line message."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(ValidatorError):
    exit_code = ExitCode.USAGE


class InputError(ValidatorError):
    """Malformed input; the message starts with the file (or endpoint) it came from."""

    exit_code = ExitCode.DATAERR

    def __init__(self, where: str, reason: str, line: int | None = None) -> None:
        loc = f"{where}:{line}" if line is not None else where
        super().__init__(f"{loc}: {reason}")
        self.where = where
        self.reason = reason
        self.line = line


class UnresolvedLaunch(ValidatorError):
    """The server command itself depends on what a launcher script computes at run time. Here, not in
    ``sources/launch_script``, so that preflight can catch it without importing the script reader."""


class UnavailableError(ValidatorError):
    exit_code = ExitCode.UNAVAILABLE
