"""Helpers for the deploy/ tests: the real tools (systemd-analyze, promtool, prometheus) and the schemas.

The tools come from Debian's `prometheus` and `systemd` packages, which `.ci/run` installs. In CI a missing
tool fails the test; on a developer machine without them the test is skipped with the reason shown.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import yaml

from tests.support import web
from tests.support.loopback import free_port
from tests.support.prerequisite import missing

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "deploy"


def require_tool(name: str) -> str:
    """The tool's path; fail in CI (it must be installed there), skip elsewhere."""
    found = shutil.which(name)
    if found is None:
        missing(f"{name} not found on PATH (Debian packages prometheus/systemd provide it)")
    return found


def run_tool(
    argv: Sequence[str], timeout: float = 60.0, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)


def install_shims(bin_dir: Path, names: Sequence[str]) -> dict[str, Path]:
    """Executable stand-ins for the programs a unit names, so `systemd-analyze verify` finds them."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shims: dict[str, Path] = {}
    for name in names:
        shim = bin_dir / Path(name).name
        shim.write_text("#!/bin/sh\nexit 0\n")
        shim.chmod(0o755)
        shims[name] = shim
    return shims


def rewrite_paths(text: str, mapping: dict[str, Path]) -> str:
    """Replace each absolute path in `text` by its shim; every path must occur (else the rewrite is stale)."""
    for original, shim in mapping.items():
        if original not in text:
            raise AssertionError(f"{original} does not occur in the unit: update the test's path list")
        text = text.replace(original, str(shim))
    return text


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def crd_schema(filename: str) -> dict[str, Any]:
    schema: dict[str, Any] = load_yaml(SCHEMAS / filename)
    return schema


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy where every object with listed `properties` rejects unknown fields, so a typo fails.

    Kubernetes' OpenAPI extensions are dropped (jsonschema ignores them anyway), and a Go regex flag group
    after `^` (`^(?i)...`, valid in RE2, an error in Python's re) is moved to the front, same meaning.
    """
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in [k for k in node if k.startswith("x-kubernetes-")]:
                del node[key]
            pattern = node.get("pattern")
            if isinstance(pattern, str) and pattern.startswith("^(?i)"):
                node["pattern"] = "(?i)^" + pattern[len("^(?i)") :]
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def with_short_for(rules: dict[str, Any], duration: str) -> dict[str, Any]:
    """A copy of a rules document with every alert's `for:` set to `duration` (for end-to-end tests)."""
    out = copy.deepcopy(rules)
    for group in out["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = duration
    return out


@dataclass
class RunningPrometheus:
    """A real Prometheus on a loopback port; query it through its HTTP API."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        reply = web.get(f"{self.url}/api/v1/{path}", params=params, timeout=5.0)
        reply.raise_for_status()
        body = reply.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self, state: str | None = None) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return [a for a in alerts if state is None or a["state"] == state]

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Poll `predicate` until true; fail after `timeout` seconds with Prometheus's log tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited ({self.process.returncode}): {self._log_tail()}")
            if predicate():
                return
            time.sleep(0.25)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; log: {self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


@contextmanager
def running_prometheus(
    workdir: Path,
    scrape_configs: list[dict[str, Any]],
    rule_files: Sequence[Path] = (),
    interval: str = "1s",
    port: int | None = None,
    start_timeout: float = 30.0,
) -> Iterator[RunningPrometheus]:
    """Start Debian's `prometheus` with this config on 127.0.0.1, wait until ready, stop it on exit.

    Use `port` (e.g. from `free_port()`) when a scrape target must name Prometheus itself.
    """
    binary = require_tool("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": scrape_configs,
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    log = workdir / "prometheus.log"
    argv = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h",
    ]
    with log.open("wb") as log_file:
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = RunningPrometheus(url=f"http://127.0.0.1:{port}", process=process, log=log)
    try:

        def ready() -> bool:
            try:
                return web.get(f"{server.url}/-/ready", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False

        server.wait_for("prometheus /-/ready", ready, timeout=start_timeout)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def parse_cli(argv: Sequence[str]) -> argparse.Namespace:
    """spark-validate's real parser on `argv` (no program name); an option it rejects fails the test."""
    from validator.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(list(argv))
    except SystemExit as exc:
        raise AssertionError(
            f"spark-validate rejects `{shlex.join(argv)}` (exit {exc.code}): {err.getvalue().strip()}"
        ) from None


def serve_config(argv: Sequence[str]) -> Any:
    """The `ServeConfig` (listen address, schedule) that `spark-validate serve ...` would run with.

    Runs the real command's option handling (parser, --listen, interval checks, rule pack, live inputs) and
    stops where the daemon would start.
    """
    from validator.commands import serve as serve_command

    args = parse_cli(argv)
    assert args.command == "serve", argv
    captured: list[Any] = []

    def fake_serve(inputs: Any, loaded: Any, config: Any, **_: Any) -> int:
        captured.append(config)
        return 0

    with mock.patch("validator.daemon.service.serve", fake_serve):
        assert serve_command.run(args) == 0
    return captured[0]


def systemd_seconds(value: str) -> float:
    """A systemd time span (`60s`, `20min`, `1h 30min`, `90`) in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit or "s"]
    return total
