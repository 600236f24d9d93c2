"""Facts from an SGLang server log (a file, or ``journalctl -u ... > file``).

The log is the only outside evidence for some things (the ``Online FP8 quantization enabled for
lm_head.`` line, which MoE kernels were prepared, draft CUDA-graph capture), and the resolved
``server_args={...}`` line repeats what ``/server_info`` says, so checks can catch disagreement.

A log file often holds several server starts; only the last one describes the running server. A start
is marked by the launcher's ``server_args=`` line; the few resolution-time lines logged just before it
(the silent ``moe_runner_backend=flashinfer_mxfp4`` override) are carried into that run when no
running-server line separates them from it. The file is streamed line by line with a cap on line length
and on the samples kept, so a multi-gigabyte journal costs bounded memory.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validator.errors import UnavailableError
from validator.redact import collect_secrets, redact, redact_text

MAX_LINE_BYTES = 1 << 20  # longer lines are truncated (a server_args line is ~30 KB)
MAX_SAMPLES = 1000
MAX_ERRORS = 20

FP8_HEAD_LINE = "Online FP8 quantization enabled for lm_head."
READY_LINE = "The server is fired up and ready to roll!"
OVERRIDE_LINE = "moe_runner_backend=flashinfer_mxfp4"

_SERVER_ARGS = "server_args={"
_DECODE_RE = re.compile(r"accept len: ([0-9.]+), accept rate: ([0-9.]+)")
_THROUGHPUT_RE = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
_LOAD_END_RE = re.compile(r"Load weight end\..*?type=([A-Za-z_][\w.]*)")
_ERROR_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): |\bScheduler hit an exception\b|\bTraceback \(most")
_HOOKS_RE = re.compile(r"Applied \d+ hook")
_HOOKS_RE = re.compile(r"Applied \d+ hook")
_SIMPLE_PAIR_RE = re.compile(
    r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
    r"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None)(?=[,}])"
)


@dataclass
class DecodeSample:
    """One ``Decode batch ... accept len: X, accept rate: Y ... gen throughput (token/s): Z`` line."""

    accept_len: float
    accept_rate: float
    gen_throughput: float | None
    line: int


@dataclass
class LogFacts:
    path: str
    runs: int = 0  # server starts (``server_args=`` lines) in the whole file
    run_start_line: int | None = None  # line of the last start's ``server_args=``; None: no marker found
    lines_total: int = 0
    server_args: dict[str, Any] | None = None  # the last start's resolved args, redacted
    server_args_note: str | None = None  # why server_args is missing or only partly parsed
    fp8_lm_head_lines: int = 0
    humming_prepare_lines: int = 0
    humming_indexed_gemm_lines: int = 0
    flashinfer_expert_lines: int = 0
    trtllm_expert_lines: int = 0
    marlin_expert_lines: int = 0
    flashinfer_override: bool = False
    loaded_models: list[str] = field(default_factory=list)  # ``Load weight end ... type=`` in order
    draft_graph_begin: int = 0
    draft_graph_end: int = 0
    decode_samples: list[DecodeSample] = field(default_factory=list)  # the last MAX_SAMPLES
    decode_sample_count: int = 0
    ready: bool = False
    ready_line: int | None = None
    errors: list[str] = field(default_factory=list)  # first MAX_ERRORS error lines, redacted
    error_count: int = 0
    plugin_lines: list[str] = field(default_factory=list)

    @property
    def draft_model_loaded(self) -> bool:
        return any(m.endswith("NextN") for m in self.loaded_models)

    @property
    def mean_accept_len(self) -> float | None:
        s = self.decode_samples
        return sum(x.accept_len for x in s) / len(s) if s else None


class _Run:
    """Accumulates one start's facts; ``samples`` is a bounded deque until finished."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self.samples: deque[DecodeSample] = deque(maxlen=MAX_SAMPLES)

    def copy_prelude(self, path: str) -> _Run:
        new = _Run(path)
        new.facts.flashinfer_override = self.facts.flashinfer_override
        return new


def read_server_log(path: str | Path) -> LogFacts:
    """Parse the last server start in ``path``. Raises UnavailableError when the file cannot be read."""
    p = Path(path)
    where = str(p)
    run = _Run(where)
    prelude = _Run(where)  # resolution-time lines since the last running-server line
    runs = 0
    lineno = 0
    raw_args: str | None = None
    try:
        with p.open("rb") as fh:
            while True:
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    break
                if not raw.endswith(b"\n"):
                    _skip_rest_of_line(fh)
                lineno += 1
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                idx = line.find(_SERVER_ARGS)
                if idx >= 0:
                    runs += 1
                    run = prelude.copy_prelude(where)
                    run.facts.run_start_line = lineno
                    prelude = _Run(where)
                    raw_args = line[idx + len("server_args=") :]
                    continue
                _feed(run, prelude, line, lineno)
    except OSError as exc:
        raise UnavailableError(
            f"{where}: cannot read server log: {exc.strerror or type(exc).__name__}"
        ) from None
    facts = run.facts
    facts.runs = runs
    facts.lines_total = lineno
    facts.decode_samples = list(run.samples)
    if raw_args is not None:
        facts.server_args, facts.server_args_note = _parse_server_args(raw_args)
    else:
        facts.server_args_note = "no server_args= line in the log"
    secrets = collect_secrets(facts.server_args or {})
    if facts.server_args is not None:
        facts.server_args = redact(facts.server_args)
    facts.errors = [redact_text(e, secrets) for e in facts.errors]
    facts.plugin_lines = [redact_text(e, secrets) for e in facts.plugin_lines]
    return facts


def _skip_rest_of_line(fh: Any) -> None:
    while True:
        chunk = fh.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _feed(run: _Run, prelude: _Run, line: str, lineno: int) -> None:
    f = run.facts
    if OVERRIDE_LINE in line:
        f.flashinfer_override = True
        prelude.facts.flashinfer_override = True
        return
    if _ERROR_RE.search(line):  # never carried forward: a crash belongs to the start before it
        f.error_count += 1
        if len(f.errors) < MAX_ERRORS:
            f.errors.append(f"line {lineno}: {line.strip()[:300]}")
        return
    runtime = True
    if FP8_HEAD_LINE in line:
        f.fp8_lm_head_lines += 1
    elif "for Humming backend" in line:
        f.humming_prepare_lines += 1
    elif "Using indexed gemm for humming moe" in line:
        f.humming_indexed_gemm_lines += 1
    elif "experts for FlashInfer" in line:
        f.flashinfer_expert_lines += 1
    elif "for TRT-LLM MxFP4 kernel" in line:
        f.trtllm_expert_lines += 1
    elif "experts for Marlin backend" in line:
        f.marlin_expert_lines += 1
    elif "Capture draft " in line and "CUDA graph begin" in line:
        f.draft_graph_begin += 1
    elif "Capture draft " in line and "CUDA graph end" in line:
        f.draft_graph_end += 1
    elif READY_LINE in line:
        f.ready = True
        f.ready_line = lineno
    elif (m := _LOAD_END_RE.search(line)) is not None:
        f.loaded_models.append(m.group(1))
    elif (m := _DECODE_RE.search(line)) is not None:
        t = _THROUGHPUT_RE.search(line)
        try:
            sample = DecodeSample(
                float(m.group(1)), float(m.group(2)), float(t.group(1)) if t else None, lineno
            )
        except ValueError:  # "1.2.3" matches the character class but is no number
            return
        run.samples.append(sample)
        f.decode_sample_count += 1
    elif "Loaded plugin" in line or "Executed general plugin" in line or _HOOKS_RE.search(line):
        if len(f.plugin_lines) < MAX_ERRORS:
            f.plugin_lines.append(line.strip()[:300])
    else:
        runtime = False
    if runtime:  # a running server logged this: earlier resolution lines belong to this run, not the next
        prelude.facts.flashinfer_override = False


def _parse_server_args(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The dict repr as Python literals; when it holds non-literals (an object repr), fall back to the
    top-level ``'key': scalar`` pairs and say so."""
    text = text.strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        value = None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value, None
    pairs: dict[str, Any] = {}
    for m in _SIMPLE_PAIR_RE.finditer(text):
        try:
            pairs.setdefault(m.group(1), ast.literal_eval(m.group(2)))
        except (ValueError, SyntaxError):
            continue
    if not pairs:
        return None, "server_args= line could not be parsed"
    return pairs, "server_args= line is not a plain literal; read its scalar fields only"
