"""Read a safetensors file's header without touching its tensor data.

Preflight must judge a 60+ GB checkpoint in milliseconds, so only the 8-byte length prefix and the JSON
header are read. The header is untrusted input: every way it can be malformed (truncation, absurd
length, bad UTF-8/JSON, wrong entry types, offsets outside the data area, sizes that do not match the
shape) becomes an ``InputError`` naming the file, never a traceback or a huge allocation.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from validator.bounded_files import open_regular
from validator.errors import InputError

# The safetensors library refuses headers above 100 MB; a real shard's header is a few hundred KB.
MAX_HEADER_BYTES = 100_000_000

_ABSURD_BITS = 1 << 70  # 128 EiB: past it a tensor's size is only "too large"

# Bits per element for the dtypes the safetensors format defines (sub-byte types included).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}


@dataclass(frozen=True)
class HeaderEntry:
    dtype: str
    shape: tuple[int, ...]
    begin: int  # offsets relative to the start of the data area
    end: int


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    entries: dict[str, HeaderEntry]
    metadata: dict[str, str] | None
    data_bytes: int  # size of the data area (file size - 8 - header length)


def read_header(path: Path | str) -> SafetensorsHeader:
    """Parse and validate the header of one ``.safetensors`` file."""
    p = Path(path)
    where = str(p)
    fd = open_regular(p, "safetensors file")  # a FIFO or /dev/zero named *.safetensors is refused here
    try:
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise InputError(where, f"truncated: {size} bytes, shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", prefix)
            if n > MAX_HEADER_BYTES:
                raise InputError(where, f"header length {n} exceeds the {MAX_HEADER_BYTES}-byte cap")
            if 8 + n > size:
                raise InputError(where, f"header length {n} is larger than the file ({size} bytes)")
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(where, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) < n:
        raise InputError(where, "truncated while reading the header")
    return parse_header(raw, where=where, path=p, data_bytes=size - 8 - n)


def parse_header(raw: bytes, *, where: str, path: Path, data_bytes: int) -> SafetensorsHeader:
    """Validate the JSON header bytes against the format's rules (and the data area's size)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(where, f"header is not valid UTF-8 (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, f"header is not valid JSON: {exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise InputError(where, "header JSON is nested too deeply") from None
    except ValueError as exc:  # an integer over Python's 4,300-digit conversion limit
        raise InputError(where, f"header is not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(doc, dict):
        raise InputError(where, f"header must be a JSON object, got {type(doc).__name__}")

    metadata: dict[str, str] | None = None
    entries: dict[str, HeaderEntry] = {}
    for name, value in doc.items():
        if name == "__metadata__":
            metadata = _metadata(value, where)
            continue
        entries[name] = _entry(name, value, where, data_bytes)
    _check_no_overlap(entries, where)
    return SafetensorsHeader(path=path, entries=entries, metadata=metadata, data_bytes=data_bytes)


def _metadata(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InputError(where, "__metadata__ must map strings to strings")
    return dict(value)


def _entry(name: str, value: object, where: str, data_bytes: int) -> HeaderEntry:
    if not isinstance(value, dict):
        raise InputError(where, f"tensor {name!r}: entry must be an object")
    dtype = value.get("dtype")
    shape = value.get("shape")
    offsets = value.get("data_offsets")
    if not isinstance(dtype, str) or not dtype:
        raise InputError(where, f"tensor {name!r}: dtype must be a non-empty string")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise InputError(where, f"tensor {name!r}: shape must be a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets):
        raise InputError(where, f"tensor {name!r}: data_offsets must be two non-negative integers")
    begin, end = offsets
    if begin > end or end > data_bytes:
        raise InputError(
            where,
            f"tensor {name!r}: data_offsets [{begin}, {end}] outside the data area ({data_bytes} bytes)",
        )
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        span_bits = (end - begin) * 8
        # The product grows with every dimension (unless one is 0): stop once it is past any file's size,
        # so a header of many 4,000-digit dimensions costs nothing and the message never overflows a float.
        expected = 0 if 0 in shape else bits
        for dim in shape if expected else ():
            expected *= dim
            if expected > _ABSURD_BITS:
                break
        if expected != span_bits:
            needs = f"{expected / 8:g}" if expected <= _ABSURD_BITS else f"more than {_ABSURD_BITS // 8}"
            shown = shape if len(str(shape)) <= 80 else f"[{len(shape)} dimensions]"
            raise InputError(
                where, f"tensor {name!r}: {dtype}{shown} needs {needs} bytes, data_offsets span {end - begin}"
            )
    return HeaderEntry(dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_no_overlap(entries: dict[str, HeaderEntry], where: str) -> None:
    spans = sorted((e.begin, e.end, n) for n, e in entries.items() if e.end > e.begin)
    for (_, prev_end, prev), (begin, _, name) in itertools.pairwise(spans):
        if begin < prev_end:
            raise InputError(where, f"tensors {prev!r} and {name!r} overlap in the data area")
