"""`spark-validate serve`: the sidecar daemon (placeholder until validator/daemon lands)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("serve", help="the sidecar daemon: /readyz, /livez, /metrics, /report")


def run(args: argparse.Namespace) -> int:
    from validator.errors import UsageError

    raise UsageError("serve is not available in this build yet")
