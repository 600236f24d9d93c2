"""Run ``python -m validator check`` as a real subprocess against a simulator on loopback, for the
end-to-end tests of the live pipeline (tests/test_check_live.py, tests/test_check_secrets.py).

The check's own report is parsed from stdout; stderr is kept whole so a test can assert that no
traceback (and no secret) ever reaches the operator's terminal or journal.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from tests.support.cli import run_cli

# Far below any real server's start-up, far above what a loaded 2-core CI box needs to answer /health.
CHECK_TIMEOUT_S = 60.0


@dataclass
class CheckRun:
    """One finished ``check`` process: exit code, raw streams, and the JSON report when there is one."""

    rc: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None

    def status(self, check_id: str) -> str:
        assert self.report is not None, f"no JSON report; stderr: {self.stderr[-400:]}"
        for c in self.report["checks"]:
            if c["id"] == check_id:
                return str(c["status"])
        raise KeyError(check_id)

    def check(self, check_id: str) -> dict[str, Any]:
        assert self.report is not None, f"no JSON report; stderr: {self.stderr[-400:]}"
        for c in self.report["checks"]:
            if c["id"] == check_id:
                return dict(c)
        raise KeyError(check_id)

    def with_status(self, status: str) -> set[str]:
        assert self.report is not None, f"no JSON report; stderr: {self.stderr[-400:]}"
        return {str(c["id"]) for c in self.report["checks"] if c["status"] == status}

    def inconclusive(self) -> None:
        """What a server that cannot be read must give: exit 69 and the verdict ``inconclusive``."""
        assert self.rc == 69, self.explain()
        assert self.report is not None and self.report["verdict"] == "inconclusive", self.explain()

    def not_ready(self) -> str:
        """Inconclusive because ``server.ready`` could not be established (``error``); its message, for the
        test to hold the reason to."""
        self.inconclusive()
        ready = self.check("server.ready")
        assert ready["status"] == "error", self.explain()
        return str(ready["message"])

    def explain(self) -> str:
        """A compact account of what went wrong, for assertion messages."""
        if self.report is None:
            return f"rc={self.rc} stdout={self.stdout[-300:]!r} stderr={self.stderr[-600:]!r}"
        lines = [f"rc={self.rc} verdict={self.report['verdict']}"]
        lines += [f"  {c['id']}: {c['status']}: {c['message']}" for c in self.report["checks"]]
        return "\n".join(lines)


def run_check(
    url: str,
    *args: str,
    fmt: str = "json",
    env: dict[str, str] | None = None,
    timeout: float = CHECK_TIMEOUT_S,
) -> CheckRun:
    """``python -m validator check --url URL --format FMT ARGS...``; the report is parsed for json."""
    full_env = {k: v for k, v in os.environ.items() if k != "SPARK_VALIDATE_API_KEY"}
    full_env.update({"NO_COLOR": "1", **(env or {})})
    proc = run_cli("check", "--url", url, "--format", fmt, *args, env=full_env, timeout=timeout)
    report = None
    if fmt == "json" and proc.stdout.strip():
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            report = None
    return CheckRun(proc.returncode, proc.stdout, proc.stderr, report)


def evidence_files(sim: Any) -> tuple[str, ...]:
    """``--attestation FILE --log FILE`` for a simulator process from tests.support.sim_process."""
    return ("--attestation", str(sim.attestation), "--log", str(sim.log))
