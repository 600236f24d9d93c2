"""Exit codes and the few exceptions that map onto them.

The codes are a contract (sysexits.h values): systemd units use `RestartPreventExitStatus=78`, CI jobs
branch on 65/69. Every anticipated failure is raised as one of these exceptions, carrying a one-line
message that names the file or endpoint, so the CLI can print it without a traceback.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


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

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its message and attributes, not by calling ``__init__`` again: subclasses take other
        arguments (``InputError(where, reason, line)``), and an error raised in a child process (a reader
        run as another user, a worker) must come back to the parent as itself, not as a TypeError."""
        return (_restore, (type(self), self.message, dict(self.__dict__)))


def _restore(cls: type[ValidatorError], message: str, state: dict[str, Any]) -> ValidatorError:
    """The unpickled error: an instance of ``cls`` carrying ``message`` and the attributes it had."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class UsageError(ValidatorError):
    exit_code = ExitCode.USAGE


class InputError(ValidatorError):
    """Malformed input; the message starts with the file (or endpoint) it came from, then ``field`` (a
    location inside it, ``recipe.api_key``) when given. The parts are kept apart so that the CLI redacts
    each alone: a field named like a secret followed by the reason reads as ``api_key: VALUE``."""

    exit_code = ExitCode.DATAERR

    def __init__(self, where: str, reason: str, line: int | None = None, *, field: str | None = None) -> None:
        self.where = where
        self.reason = reason
        self.line = line
        self.field = field
        super().__init__(": ".join(self.parts()))

    def parts(self) -> tuple[str, ...]:
        """The message's pieces, in order (each may be redacted on its own), joined by ``": "``."""
        loc = f"{self.where}:{self.line}" if self.line is not None else self.where
        return (loc, self.reason) if self.field is None else (loc, self.field, self.reason)


class UnresolvedLaunch(ValidatorError):
    """The server command itself depends on what a launcher script computes at run time. Here, not in
    ``sources/launch/script``, so that preflight can catch it without importing the script reader."""


class UnavailableError(ValidatorError):
    exit_code = ExitCode.UNAVAILABLE
