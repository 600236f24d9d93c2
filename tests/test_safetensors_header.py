from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from tests.support.checkpoint_factory import write_sparse_safetensors
from validator.errors import InputError
from validator.sources.host.safetensors_header import MAX_HEADER_BYTES, read_header


def _raw(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path


def test_reads_file_written_by_safetensors_library(tmp_path: Path) -> None:
    p = tmp_path / "m.safetensors"
    save_file(
        {"a": np.zeros((3, 4), dtype=np.float16), "b": np.ones((5,), dtype=np.uint8)},
        str(p),
        {"format": "np"},
    )
    h = read_header(p)
    assert h.entries["a"].dtype == "F16" and h.entries["a"].shape == (3, 4)
    assert h.entries["b"].dtype == "U8" and h.entries["b"].shape == (5,)
    assert h.metadata == {"format": "np"}
    assert h.data_bytes == 3 * 4 * 2 + 5


def test_real_shape_lm_head_over_sparse_file(tmp_path: Path) -> None:
    p = tmp_path / "head.safetensors"
    write_sparse_safetensors(p, {"lm_head.weight": ("BF16", [157184, 2560])})
    assert p.stat().st_size > 800_000_000
    assert p.stat().st_blocks * 512 < 1_000_000  # a hole: the reader never needs the data
    e = read_header(p).entries["lm_head.weight"]
    assert (e.dtype, e.shape, e.end - e.begin) == ("BF16", (157184, 2560), 157184 * 2560 * 2)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "truncated"),
        (b"\x05\x00\x00", "truncated"),
        (struct.pack("<Q", 1000) + b"{}", "larger than the file"),
        (struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}", "cap"),
        (struct.pack("<Q", 2) + b"\xff\xfe", "UTF-8"),
        (struct.pack("<Q", 5) + b"{abc}", "not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "JSON object"),
    ],
)
def test_malformed_prefix_and_json(tmp_path: Path, content: bytes, needle: str) -> None:
    p = tmp_path / "bad.safetensors"
    p.write_bytes(content)
    with pytest.raises(InputError) as ei:
        read_header(p)
    assert needle in str(ei.value) and str(p) in str(ei.value)


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("notadict", "must be an object"),
        ({"dtype": 3, "shape": [2], "data_offsets": [0, 4]}, "dtype"),
        ({"dtype": "F16", "shape": [-1], "data_offsets": [0, 4]}, "shape"),
        ({"dtype": "F16", "shape": [True], "data_offsets": [0, 4]}, "shape"),
        ({"dtype": "F16", "shape": [2], "data_offsets": [0]}, "data_offsets"),
        ({"dtype": "F16", "shape": [2], "data_offsets": [4, 0]}, "outside"),
        ({"dtype": "F16", "shape": [2], "data_offsets": [0, 400]}, "outside"),
        ({"dtype": "F16", "shape": [3], "data_offsets": [0, 4]}, "needs 6 bytes"),
    ],
)
def test_bad_entries(tmp_path: Path, entry: object, needle: str) -> None:
    p = _raw(tmp_path / "bad.safetensors", {"t": entry}, data=b"\0" * 4)
    with pytest.raises(InputError, match=needle):
        read_header(p)


def test_bad_metadata_and_overlap(tmp_path: Path) -> None:
    p = _raw(tmp_path / "m.safetensors", {"__metadata__": {"k": 1}})
    with pytest.raises(InputError, match="__metadata__"):
        read_header(p)
    two = {
        "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
        "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]},
    }
    p = _raw(tmp_path / "o.safetensors", two, data=b"\0" * 6)
    with pytest.raises(InputError, match="overlap"):
        read_header(p)


def test_unknown_dtype_is_kept_without_size_check(tmp_path: Path) -> None:
    p = _raw(
        tmp_path / "u.safetensors", {"t": {"dtype": "F3_NEW", "shape": [7], "data_offsets": [0, 2]}}, b"\0\0"
    )
    assert read_header(p).entries["t"].dtype == "F3_NEW"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_header(tmp_path / "nope.safetensors")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=300))
def test_random_bytes_only_raise_input_error(tmp_path: Path, blob: bytes) -> None:
    p = tmp_path / "r.safetensors"
    p.write_bytes(blob)
    with contextlib.suppress(InputError):
        read_header(p)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(min_value=0, max_value=400), header=st.dictionaries(st.text(max_size=5), st.integers())
)
def test_truncations_and_random_headers_only_raise_input_error(
    tmp_path: Path, cut: int, header: dict[str, int]
) -> None:
    good = tmp_path / "g.safetensors"
    save_file({"w": np.arange(24, dtype=np.float32).reshape(2, 12)}, str(good))
    data = good.read_bytes()
    p = tmp_path / "t.safetensors"
    p.write_bytes(data[:cut])
    if cut < len(data):
        with pytest.raises(InputError):
            read_header(p)
    else:
        assert read_header(p).entries["w"].shape == (2, 12)
    _raw(p, header)
    with contextlib.suppress(InputError):
        read_header(p)
