"""The last ``spark-validate launch`` verdict as a small JSON file, written by ``launch`` each time it
decides, read by the sidecar (``serve --launch-state``) for Prometheus.

A refused start leaves nothing running to scrape; the sidecar outlives it, so the refusal reaches its own
alert (``SparkValidateLaunchRefused``). A report, not evidence: no check reads it, a malformed one is
ignored; replaced atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field

from validator.validation import ValidationError, dump, format_loc, load_json, problems

SCHEMA = "spark-validate.launch-state/v1"
STATE_ENV = "SPARK_VALIDATE_LAUNCH_STATE"  # where launch writes it when --state-file is not given
CAP = 64 * 1024
MAX_BLOCKING = 32  # check IDs kept (a pack has about thirty checks)
MAX_REASON = 1000
CheckId = Annotated[str, Field(pattern=r"^[a-z0-9_]+(?:\.[a-z0-9_]+)+$")]


@dataclass(frozen=True)
class LaunchState:
    """Read strictly: only launch writes the file, and each blocking check ID becomes a Prometheus label
    (a bool is no exit code, a check ID is nothing else)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(strict=True)

    time: float  # when launch decided (Unix seconds)
    # error: launch never judged (malformed input, usage)
    verdict: Annotated[str, Field(pattern=r"^(pass|fail|inconclusive|error)$")]
    exit_code: Annotated[int, Field(ge=0, le=255)]  # what launch exited with; 0 when it exec'd the server
    started: bool  # launch exec'd the server
    # the critical checks that failed or could not be proven
    blocking: Annotated[tuple[CheckId, ...], Field(max_length=MAX_BLOCKING)] = ()
    pack: str | None = None
    reason: Annotated[str, Field(max_length=MAX_REASON)] = ""  # one line: why it refused

    def to_json(self) -> str:
        kept = replace(self, blocking=self.blocking[:MAX_BLOCKING], reason=self.reason[:MAX_REASON])
        return json.dumps({"schema": SCHEMA, **dump(kept)}, indent=1)


def state_path(explicit: str | None) -> Path | None:
    """``--state-file``, else ``$SPARK_VALIDATE_LAUNCH_STATE``; None: launch keeps no state."""
    value = explicit or os.environ.get(STATE_ENV)
    return Path(value) if value else None


def write_state(path: Path, state: LaunchState) -> str | None:
    """Replace the state file atomically; the problem as one line when it cannot (never raises: a state
    file that cannot be written must not stop the server, nor hide a refusal)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".launch-state-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(state.to_json() + "\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):  # the write failed already: the leftover is all there is
                os.unlink(tmp)
            raise
    except OSError as exc:
        return f"cannot write the launch state {path}: {exc.strerror or exc}"
    return None


def read_state(path: Path) -> tuple[LaunchState | None, str | None]:
    """The state, or why it cannot be used (missing is (None, None): no launch has written one)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(CAP + 1)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    if len(data) > CAP:
        return None, f"{path}: larger than {CAP} bytes: not a launch state"
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, f"{path}: not JSON"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None, f"{path}: not a {SCHEMA} document"
    try:
        return load_json(LaunchState, data, strict=True), None
    except ValidationError as exc:
        loc, msg = problems(exc)[0]
        return None, f"{path}: malformed launch state ({format_loc(loc)}: {msg})"
