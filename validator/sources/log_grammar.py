"""SGLang's server-log lines: the markers, patterns and the ``server_args=`` literal, shared by every
reader of the log (file or journal). Pure: text in, values out; nothing here opens a file.

The follower's fast path (``routine``, ``sample``) lives here too, beside the patterns it must agree with:
a region of routine traffic is skipped by C-speed scans only when nothing in it is a line the parser reacts
to, and ``NOTABLE`` is that list.
"""

from __future__ import annotations

import ast
import re

from validator.facts import FP8_HEAD_LINE, DecodeSample
from validator.redact import redact

READY_LINE = "The server is fired up and ready to roll!"
OVERRIDE_LINE = "moe_runner_backend=flashinfer_mxfp4"

SERVER_ARGS = "server_args={"
START_MARKER = SERVER_ARGS.encode()
DECODE_RE = re.compile(r"accept len: ([0-9.]+), accept rate: ([0-9.]+)")
THROUGHPUT_RE = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
LOAD_END_RE = re.compile(r"Load weight end\..*?type=([A-Za-z_][\w.]*)")
DSPARK_RUNNER_LINE = "Initialized DSpark draft runner."
DSPARK_RUNNER_RE = re.compile(r"model=([A-Za-z_][\w.]*), gamma=(\d{1,4}), verify_num_draft_tokens=(\d{1,4})")
ERROR_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): |\bScheduler hit an exception\b|\bTraceback \(most")
# A start that dies before it is ready: the scheduler's ``Scheduler hit an exception: <traceback>``
# (srt/managers/scheduler.py), then the launcher's SIGQUIT handler (srt/entrypoints/engine.py).
SCHEDULER_DIED = "Scheduler hit an exception"
CHILD_FAILED = "Received sigquit from a child process"
EXCEPTION_LINE_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception): .*)")
FAILURE_CAP = 300  # characters of the exception quoted
HOOKS_RE = re.compile(r"Applied \d+ hook")
_SIMPLE_PAIR_RE = re.compile(
    r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
    r"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None)(?=[,}])"
)

# Everything the parser reacts to except decode lines: a region holding none of these is routine traffic.
NOTABLE = tuple(
    m.encode()
    for m in (
        SERVER_ARGS, OVERRIDE_LINE, "Error: ", "Exception: ", SCHEDULER_DIED, CHILD_FAILED,
        "Traceback (most", FP8_HEAD_LINE, "for Humming backend", "Using indexed gemm for humming moe",
        "experts for FlashInfer", "for TRT-LLM MxFP4 kernel", "experts for Marlin backend",
        "Capture draft ", READY_LINE, "Load weight end.", "Loaded plugin", "Executed general plugin",
        DSPARK_RUNNER_LINE,
        "Applied ",
    )
)  # fmt: skip
DECODE_MARK = b"accept len: "

_SAMPLE_RE_B = re.compile(
    rb"accept len: ([0-9.]+), accept rate: ([0-9.]+)(?:.*?gen throughput \(token/s\): ([0-9.]+))?"
)


def routine(region: bytes) -> bool:
    """Whether ``region`` (whole lines) holds only routine traffic: decode lines and lines the parser
    ignores."""
    if region.count(b"\n") + 1 == region.count(DECODE_MARK):  # decode lines only: two C-speed counts
        return True
    return not any(m in region for m in NOTABLE)


def sample(line: bytes, pos: int) -> DecodeSample | None:
    """A routine decode line as the parser would record it, in one regex search."""
    m = _SAMPLE_RE_B.search(line)
    if m is None:
        return None
    try:
        tput = float(m.group(3)) if m.group(3) is not None else None
        return DecodeSample(float(m.group(1)), float(m.group(2)), tput, pos)
    except ValueError:
        return None


def parsed_args(raw: str | None) -> dict[str, object] | None:
    """The start's resolved args, redacted (None: no ``server_args=`` line, or one that does not parse)."""
    args = parse_server_args(raw) if raw is not None else None
    return redact(args) if args is not None else None


def parse_server_args(text: str) -> dict[str, object] | None:
    """The dict repr as Python literals; when it holds non-literals (an object repr), fall back to the
    top-level ``'key': scalar`` pairs."""
    text = text.strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        value = None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    pairs: dict[str, object] = {}
    for m in _SIMPLE_PAIR_RE.finditer(text):
        try:
            pairs.setdefault(m.group(1), ast.literal_eval(m.group(2)))
        except (ValueError, SyntaxError):
            continue
    return pairs or None
