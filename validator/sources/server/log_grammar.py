"""SGLang's server-log lines: what one line says, as a typed event. Pure: text in, values out.

Only SGLang's own logger lines are evidence: the ``[%(asctime)s{prefix}]`` prefix (``configure_logger``,
srt/utils/common.py; rank tags, ``SGLANG_LOG_MS``, 2026 level/location, Ray actor) AND a message starting
with a known shape. Access lines, ``--log-requests`` echoes and progress bars never set a fact, whatever
they hold; a line without the prefix continues the record before it. Docker's wrappers (``SERVICE  | ``,
``--timestamps``) are taken off as Docker wrote them, fixed by the log's first SGLang line (``Stream``), so
another service's lines count for nothing. The follower's fast path sits beside the patterns it must match.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from validator.facts import FP8_HEAD_LINE, DecodeSample
from validator.redact import redact
from validator.sources.server.pyrepr import parse_repr

READY_LINE = "The server is fired up and ready to roll!"
# SGLang's own override message: ``_bailing_moe_v3_overrides`` (srt/arg_groups/model_overrides/
# bailing_moe_v3.py) turning ``auto`` into flashinfer_mxfp4
OVERRIDE_LINE = "Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4"
DSPARK_RUNNER_LINE = "Initialized DSpark draft runner."
CHILD_FAILED = "Received sigquit from a child process"
FAILURE_CAP = 300  # characters of the exception quoted

# ---- the logger's prefix ----

# What Docker puts before each line of a container's output, outside SGLang's own line: Compose's
# ``SERVICE  | `` (``docker compose logs``; the name padded to the longest service's), then the engine's
# RFC 3339 timestamp (``docker logs --timestamps``, ``docker compose logs -t``, ``kubectl logs
# --timestamps``). At most one of each, at the line's start only: a wrapper inside a line is text.
_CONTAINER = r"[A-Za-z0-9][\w.-]{0,127}"
_DOCKER_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d) "
_WRAP = rf"(?:({_CONTAINER}) {{1,128}}\| )?(?:{_DOCKER_TIME})?"  # group: the container
_WRAP_NC = rf"(?:{_CONTAINER} {{1,128}}\| )?(?:{_DOCKER_TIME})?"
_RAY = r"(?:\(\w+ pid=\d+(?:, ip=[0-9a-fA-F.:]+)?\) )?"
_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?"
_RANKS = r"(?: [A-Z][A-Z_]{0,15}\d{1,5})*"
_LEVELS = r"DEBUG|INFO|WARNING|ERROR|CRITICAL"
_LOCATION = r" [\w./-]{1,200}:\d{1,6}: "
_SGLANG = _RAY + rf"\[{_TIME}({_RANKS})\] (?:({_LEVELS}){_LOCATION})?"  # groups: ranks, level
_SGLANG_NC = _RAY + rf"\[{_TIME}{_RANKS}\] (?:(?:{_LEVELS}){_LOCATION})?"  # the same, capturing nothing
_PREFIX_RE = re.compile(_WRAP + _SGLANG)  # groups: container, ranks, level
_PREFIX_ONLY_B = re.compile((_WRAP_NC + _SGLANG_NC + r"\Z").encode())
_SGLANG_ONLY_B = re.compile((_SGLANG_NC + r"\Z").encode())


@dataclass(frozen=True, slots=True)
class Record:
    """One line of SGLang's logger: its rank tags (``("TP0", "EP0")``), level (when the build logs one)
    and message; ``container`` is the Compose service that Docker's wrapper names (None: no wrapper)."""

    ranks: tuple[str, ...]
    level: str | None
    message: str
    container: str | None = None


def split_line(line: str) -> Record | None:
    """The line as a logger record; None when it is not one of SGLang's logger lines."""
    m = _PREFIX_RE.match(line)
    if m is None:
        return None
    ranks = tuple(m.group(2).split()) if m.group(2) else ()
    return Record(ranks, m.group(3), line[m.end() :], m.group(1))


# ---- what a message says ----


@dataclass(frozen=True, slots=True)
class Start:
    """The launcher's ``server_args=`` line: a server start."""

    raw_args: str


@dataclass(frozen=True, slots=True)
class Override:
    """SGLang's silent ``auto`` -> flashinfer_mxfp4 override."""


@dataclass(frozen=True, slots=True)
class Counted:
    """A line the facts count: ``what`` names the ``LogFacts`` counter."""

    what: str


@dataclass(frozen=True, slots=True)
class LayerBackend:
    """A MoE layer's runner backend as a layer reports it (``moe_runner_backend=...`` in FlashInfer's
    deferred-finalize line): evidence of the backend in effect, not of how it was chosen."""

    backend: str


@dataclass(frozen=True, slots=True)
class Ready:
    """``The server is fired up and ready to roll!``"""


@dataclass(frozen=True, slots=True)
class Loaded:
    """``Load weight end. ... type=<class>``"""

    model_class: str


@dataclass(frozen=True, slots=True)
class DSparkRunner:
    gamma: int
    verify_tokens: int


@dataclass(frozen=True, slots=True)
class Decode:
    """A ``Decode batch`` line: the sample when it carries ``accept len``."""

    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float | None


@dataclass(frozen=True, slots=True)
class Prefill:
    """A ``Prefill batch`` line: the scheduler took requests in (its counts are read by ``batch_counts``,
    for the current start's last batch line only)."""


@dataclass(frozen=True, slots=True)
class Died:
    """A component's ``<Component> hit an exception: <traceback>``: the traceback's lines follow."""

    component: str
    text: str


@dataclass(frozen=True, slots=True)
class ChildFailed:
    """The launcher's SIGQUIT handler: a child process failed."""


@dataclass(frozen=True, slots=True)
class Running:
    """Another line only a running server writes (draft graph end, the plugin's lines)."""


@dataclass(frozen=True, slots=True)
class Continuation:
    """A line without the logger's prefix: the previous record's continuation (or foreign output)."""

    text: str


@dataclass(frozen=True, slots=True)
class Other:
    """A logger line whose message is none of the shapes read (access lines, request echoes, ...)."""


Event = (
    Start | Override | Counted | LayerBackend | Ready | Loaded | DSparkRunner | Decode | Prefill | Died
    | ChildFailed | Running | Continuation | Other
)  # fmt: skip

_OTHER = Other()
_PREFILL = Prefill()
_READY = Ready()
_RUNNING = Running()
_OVERRIDE = Override()
_CHILD_FAILED = ChildFailed()

_START_RE = re.compile(r"server_args=(?=\{|ServerArgs\()")
_DECODE_HEAD_RE = re.compile(r"Decode batch(?: \[\d+\])?[.,] ")
_PREFILL_HEAD_RE = re.compile(r"Prefill batch(?: \[\d+\])?, ")
# the scheduler's counts in a batch line (metrics_reporter.py: ``#running-req: N``, ``#queue-req: N``),
# each a field of its own: after the head or after ", ", up to "," or the line's end
_COUNT_RE = re.compile(r"(?:^|, )#(running-req|queue-req): (\d{1,9})(?=,|$)")
_FIELD_RE = re.compile(
    r"(?:^|, )(accept len|accept rate|gen throughput \(token/s\)): (-?\d+(?:\.\d+)?)(?=,|$)"
)
_LOAD_END_RE = re.compile(r"Load weight end\..*?\btype=([A-Za-z_][\w.]*)")
_DSPARK_RUNNER_RE = re.compile(r"model=([A-Za-z_][\w.]*), gamma=(\d{1,4}), verify_num_draft_tokens=(\d{1,4})")
_DIED_RE = re.compile(r"(\w{1,40}) hit an exception: ")
_DEFERRED_RE = re.compile(
    r"(?:FlashInfer )?TRTLLM MoE deferred finalize is (?:enabled|disabled) "
    r"\(moe_runner_backend=([\w.]{1,80}), quant_method=\w+\)"
)
_HOOKS_RE = re.compile(r"Applied \d+ hook\(s\) to ")
_EXCEPTION_LINE_RE = re.compile(r"([A-Z]\w*(?:\.\w+)*(?:Error|Exception|Interrupt|Exit)(?:: .*)?)$")

# message start -> counter, for the lines counted as they are
_COUNTED: tuple[tuple[str, str, str], ...] = (
    # (message starts with, and contains, LogFacts counter)
    (FP8_HEAD_LINE, "", "fp8_lm_head_lines"),
    ("Preparing ", " experts for Humming backend", "humming_prepare_lines"),
    ("Using indexed gemm for humming moe", "", "humming_indexed_gemm_lines"),
    ("Preparing ", " experts for FlashInfer", "flashinfer_expert_lines"),
    ("Shuffling FP4 expert weights for TRT-LLM MxFP4 kernel", "", "trtllm_expert_lines"),
    ("Preparing ", " experts for Marlin backend", "marlin_expert_lines"),
)


def read_line(line: str) -> Event:
    """What one log line says (see the module docstring for what counts), whoever wrote it: a log's
    reader (``log_state.LogParser``) also holds each line to the stream the log's first SGLang line set."""
    rec = split_line(line)
    if rec is None:
        return Continuation(line)
    return read_message(rec.message)


@dataclass(frozen=True, slots=True)
class Stream:
    """How a log's lines are wrapped, as its first SGLang line shows: ``wrapped`` by Docker (a Compose
    name, an engine timestamp or both), and the Compose service named (None: none). Every line Docker writes
    carries the same wrapper, so a line that does not is not this stream's (another service's output in a
    ``docker compose logs`` of several, or text that only looks like a wrapper) and is read for nothing."""

    wrapped: bool
    container: str | None


RAW = Stream(False, None)
_WRAP_RE = re.compile(_WRAP)
_SGLANG_RE = re.compile(_SGLANG)


def _unwrap(line: str) -> tuple[Stream, int]:
    """The stream ``line``'s wrapper says (``RAW``: none) and where SGLang's own line begins."""
    m = _WRAP_RE.match(line)
    assert m is not None  # every part of the wrapper is optional
    return (Stream(True, m.group(1)) if m.end() > 0 else RAW), m.end()


def stream_of(line: str) -> Stream | None:
    """The stream a log's first SGLang logger line sets (behind its wrapper, if any); None for any other
    line (another service's output in a ``docker compose logs`` of several, a progress bar): it sets
    nothing, and the next line is asked."""
    stream, end = _unwrap(line)
    return stream if _SGLANG_RE.match(line, end) is not None else None


def read_in_stream(line: str, stream: Stream) -> Event | None:
    """What one line of ``stream`` says: its wrapper taken off (exactly one, as Docker writes it), the rest
    read as SGLang's own line (a second wrapper inside it is text); None for a line this stream's writer
    did not write."""
    wrapper, end = _unwrap(line)
    if wrapper != stream:
        return None
    m = _SGLANG_RE.match(line, end)
    return Continuation(line[end:]) if m is None else read_message(line[m.end() :])


def read_message(msg: str) -> Event:
    """What one logger record's message says, read from its start."""
    if not msg:
        return _OTHER
    first = msg[0]
    if first == "s" and _START_RE.match(msg):
        return Start(msg[len("server_args=") :])
    if first == "D":
        if _DECODE_HEAD_RE.match(msg):
            return _decode(msg)
        if (m := _DIED_RE.match(msg)) is not None:
            return Died(m.group(1), msg[m.end() :])
    if first == "T" and msg.startswith(READY_LINE):
        return _READY
    if first == "P" and _PREFILL_HEAD_RE.match(msg):
        return _PREFILL
    for start, inside, what in _COUNTED:
        if msg.startswith(start) and inside in msg:
            return Counted(what)
    if msg.startswith("Capture draft "):
        if "CUDA graph begin" in msg:
            return Counted("draft_graph_begin")
        if "CUDA graph end" in msg:
            return _RUNNING
    if msg.startswith(OVERRIDE_LINE):
        return _OVERRIDE
    if msg.startswith("Load weight end.") and (m := _LOAD_END_RE.match(msg)) is not None:
        return Loaded(m.group(1))
    if msg.startswith(DSPARK_RUNNER_LINE) and (m := _DSPARK_RUNNER_RE.search(msg)) is not None:
        return DSparkRunner(int(m.group(2)), int(m.group(3)))
    if (m := _DEFERRED_RE.match(msg)) is not None:
        return LayerBackend(_backend_name(m.group(1)))
    if msg.startswith(CHILD_FAILED):
        return _CHILD_FAILED
    if (m := _DIED_RE.match(msg)) is not None:
        return Died(m.group(1), msg[m.end() :])
    if msg.startswith(("Loaded plugin ", "Executed general plugin")) or _HOOKS_RE.match(msg):
        return _RUNNING
    return _OTHER


def _backend_name(value: str) -> str:
    """``MoeRunnerBackend.FLASHINFER_MXFP4`` (an enum's str) or ``flashinfer_mxfp4``, as the CLI spells it."""
    return value.rsplit(".", 1)[-1].lower()


def _decode(msg: str) -> Decode:
    fields: dict[str, float] = {}
    for m in _FIELD_RE.finditer(msg):
        fields.setdefault(m.group(1), float(m.group(2)))
    return Decode(fields.get("accept len"), fields.get("accept rate"), fields.get("gen throughput (token/s)"))


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """What a batch line says of the scheduler's load: ``kind`` ("decode" or "prefill"), the requests
    running and waiting in its queue (None: the build's line has no such field)."""

    kind: str
    running: int | None
    queued: int | None


def batch_counts(line: str, stream: Stream = RAW) -> BatchCounts | None:
    """A ``Decode batch`` / ``Prefill batch`` line of ``stream``, read for its ``#running-req`` and
    ``#queue-req`` fields (SGLang 0.5.23 writes both in both lines: metrics_reporter.py
    ``report_prefill_stats``, ``report_decode_stats``); None for any other line."""
    wrapper, end = _unwrap(line)
    p = _SGLANG_RE.match(line, end) if wrapper == stream else None
    if p is None:
        return None
    msg = line[p.end() :]
    head = _DECODE_HEAD_RE.match(msg) or _PREFILL_HEAD_RE.match(msg)
    if head is None:
        return None
    counts: dict[str, int] = {}
    for c in _COUNT_RE.finditer(msg[head.end() :]):
        counts.setdefault(c.group(1), int(c.group(2)))
    kind = "decode" if msg.startswith("D") else "prefill"
    return BatchCounts(kind, counts.get("running-req"), counts.get("queue-req"))


def exception_line(text: str) -> str | None:
    """The exception a traceback line names (``ValueError: ...``), capped; None when it names none."""
    m = _EXCEPTION_LINE_RE.match(text.strip())
    return m.group(1)[:FAILURE_CAP] if m is not None else None


# ---- the server start's arguments ----


def parsed_args(raw: str | None) -> dict[str, object] | None:
    """The start's resolved args, redacted (None: no ``server_args=`` line, or one that does not parse)."""
    args = parse_server_args(raw) if raw is not None else None
    return redact(args) if args is not None else None


def parse_server_args(text: str) -> dict[str, object] | None:
    """``{...}`` (the resolved dict) or ``ServerArgs(...)`` (the dataclass repr: its keywords) as a dict of
    values, read by ``pyrepr`` (never evaluated); a field whose repr is not a literal is kept as its text."""
    try:
        value = parse_repr(text.strip())
    except ValueError:
        return None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {str(k): v for k, v in value.items()}
    return None


# ---- the follower's fast path: bytes, C-speed scans ----

START_MARKER = b"server_args="
DECODE_MARK = b"accept len: "
# Every message start the parser reacts to but decode lines: a region holding none of these anywhere is
# routine traffic (a superset test: the region is then parsed line by line, which reads each line exactly).
NOTABLE = tuple(
    m.encode()
    for m in (
        "server_args=", OVERRIDE_LINE, " hit an exception", CHILD_FAILED, FP8_HEAD_LINE,
        "experts for Humming backend", "Using indexed gemm", "experts for FlashInfer",
        "for TRT-LLM MxFP4 kernel", "experts for Marlin backend", "Capture draft ", READY_LINE,
        "Load weight end.", "Loaded plugin", "Executed general plugin", DSPARK_RUNNER_LINE, "Applied ",
        "deferred finalize",
    )
)  # fmt: skip


@functools.lru_cache(maxsize=16)
def _decode_sample_in(stream: Stream) -> re.Pattern[bytes]:
    """A decode line with an acceptance figure, anchored at a line's start (re.M), behind ``stream``'s
    wrapper exactly as ``read_in_stream`` takes it off (its own Compose name, the engine's stamp optional;
    or the stamp alone): what ``_bulk`` counts. The greedy ``[^\\n]*`` finds the line's ``, accept len: ``
    field (never ``block accept len``) with one backtrack."""
    if not stream.wrapped:
        wrap = ""
    elif stream.container is None:
        wrap = _DOCKER_TIME
    else:
        wrap = re.escape(stream.container) + rf" {{1,128}}\| (?:{_DOCKER_TIME})?"
    return re.compile(
        rb"^" + (wrap + _SGLANG_NC).encode() + rb"Decode batch(?: \[\d+\])?(?=[.,] )[^\n]*, accept len: ",
        re.M,
    )


_BATCH_MARK = b" batch"


def last_batch(region: bytes, stream: Stream = RAW) -> tuple[int, str] | None:
    """The last ``Decode batch`` / ``Prefill batch`` line of ``stream`` in ``region`` (whole lines): its
    offset in the region and its text. Found by C-speed ``rfind`` from the end; a line that only holds the
    words (a request's text in an access line) is read as the parser would, and passed over."""
    hi = len(region)
    while (idx := region.rfind(_BATCH_MARK, 0, hi)) >= 0:
        start = region.rfind(b"\n", 0, idx) + 1
        end = region.find(b"\n", idx)
        raw = region[start : end if end >= 0 else len(region)]
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if batch_counts(text, stream) is not None:
            return start, text
        hi = start
    return None


def routine(region: bytes) -> bool:
    """Whether ``region`` (whole lines) holds only routine traffic: lines the parser ignores and decode
    lines, none of which can change a fact but a sample."""
    return not any(m in region for m in NOTABLE)


def count_samples(region: bytes, stream: Stream = RAW) -> int:
    """The decode lines with an acceptance figure in ``region`` (lines of ``stream``), each counted once (a
    line's own shape, anchored at its start: a request's text in an access line is never one)."""
    return len(_decode_sample_in(stream).findall(region)) if DECODE_MARK in region else 0


def sample(line: bytes, pos: int, stream: Stream = RAW) -> DecodeSample | None:
    """A decode line of ``stream`` as the parser would record it (None when it is not one with ``accept
    len``, or not that stream's)."""
    event = read_in_stream(line.decode("utf-8", errors="replace").rstrip("\r"), stream)
    if isinstance(event, Decode) and event.accept_len is not None:
        return DecodeSample(event.accept_len, event.accept_rate, event.gen_throughput, pos)
    return None


def is_start_message(after: bytes) -> bool:
    """Whether the bytes after a ``server_args=`` begin a start's value (the dict or the dataclass)."""
    return after.startswith((b"{", b"ServerArgs("))


def is_start_line(head: bytes, stream: Stream | None = None) -> bool:
    """Whether ``head`` (a line's bytes from its start up to a ``server_args=``) is SGLang's prefix alone
    (behind ``stream``'s wrapper; any wrapper when the stream is not known yet): the marker then begins
    that line's message."""
    if stream is None:
        return _PREFIX_ONLY_B.match(head) is not None
    text = head.decode("utf-8", errors="replace")
    wrapper, end = _unwrap(text)
    return wrapper == stream and _SGLANG_ONLY_B.match(text[end:].encode()) is not None
