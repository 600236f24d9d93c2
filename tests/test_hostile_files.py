"""The file readers against planted devices, FIFOs, huge and hostile files as any input.

Each attack is reproduced the way it was found: ``preflight`` run as a real process on planted files
(``config.json -> /dev/zero`` in a cloned model repository, a FIFO as an env file, integers over Python's
4,300-digit limit), under a memory limit and a deadline; each must end at once with exit 65 and one line
naming the file, where before it grew by gigabytes, blocked forever, or exited 1 with a traceback.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.bounded_run import run_bounded
from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import run_cli
from tests.support.prerequisite import missing
from validator.bounded_files import json_depth, parse_json, read_bounded, read_text_bounded
from validator.errors import InputError

HUGE_INT = "9" * 5000


def _args_file(tmp_path: Path) -> Path:
    p = tmp_path / "args.txt"
    p.write_text("--model-path /models/ling\n")
    return p


def _preflight(tmp_path: Path, *args: str) -> tuple[int, str]:
    res = run_bounded(["preflight", "--format", "json", *args], timeout=30)
    assert not res.timed_out, f"preflight blocked: {res.stderr[-500:]}"
    assert res.peak_rss_mb < 200, f"preflight used {res.peak_rss_mb:.0f} MB"
    assert "Traceback" not in res.stderr, res.stderr[-1500:]
    return res.rc, res.stderr


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dev_zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


PLANTS: dict[str, Callable[[Path], Path]] = {"fifo": _fifo, "dev_zero": _dev_zero}


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("victim", ["config.json", "model.safetensors.index.json", "model.safetensors"])
def test_planted_model_file_exits_65(tmp_path: Path, plant: str, victim: str) -> None:
    model = tmp_path / "model"
    write_checkpoint(model, small=True, shards=2 if victim.endswith("index.json") else 1)
    target = model / victim
    if victim == "model.safetensors":
        for shard in model.glob("*.safetensors"):
            shard.unlink()
    else:
        target.unlink()
    PLANTS[plant](target)
    rc, err = _preflight(tmp_path, "--launch-args-file", str(_args_file(tmp_path)), "--model-dir", str(model))
    assert rc == 65, err
    assert str(target) in err and "not a regular file" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("option", ["--unit", "--env-file", "--launch-args-file"])
def test_planted_input_file_exits_65(tmp_path: Path, plant: str, option: str) -> None:
    target = PLANTS[plant](tmp_path / "input")
    extra = ["--launch-args-file", str(_args_file(tmp_path))] if option == "--env-file" else []
    rc, err = _preflight(tmp_path, *extra, option, str(target))
    assert rc == 65, err
    assert str(target) in err and "not a regular file" in err
    assert len(err.strip().splitlines()) == 1


def test_unit_environment_file_fifo_exits_65(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path / "sglang.env")
    unit = tmp_path / "sglang.service"
    unit.write_text(
        f"[Service]\nEnvironmentFile={fifo}\n"
        "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n"
    )
    rc, err = _preflight(tmp_path, "--unit", str(unit))
    assert rc == 65 and str(fifo) in err and "FIFO" in err, err


def test_oversized_sparse_config_json_is_refused_without_reading_it(tmp_path: Path) -> None:
    model = tmp_path / "model"
    write_checkpoint(model, small=True)
    with open(model / "config.json", "r+b") as fh:
        fh.truncate(10 * 1024**3)  # 10 GiB of holes: reading it would be the attack
    rc, err = _preflight(tmp_path, "--launch-args-file", str(_args_file(tmp_path)), "--model-dir", str(model))
    assert rc == 65 and "config.json" in err and "cap" in err, err


def _huge_int_shard(path: Path) -> None:
    header = ('{"x": {"dtype": "U8", "shape": [' + HUGE_INT + '], "data_offsets": [0, 1]}}').encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0")


@pytest.mark.parametrize("victim", ["config.json", "model.safetensors.index.json", "model.safetensors"])
def test_integer_over_4300_digits_exits_65(tmp_path: Path, victim: str) -> None:
    model = tmp_path / "model"
    write_checkpoint(model, small=True, shards=2 if victim.endswith("index.json") else 1)
    if victim == "config.json":
        cfg = (model / "config.json").read_text()
        (model / "config.json").write_text(cfg.replace('"hidden_size": 64', f'"hidden_size": {HUGE_INT}'))
        assert HUGE_INT in (model / "config.json").read_text()
    elif victim == "model.safetensors":
        for shard in model.glob("*.safetensors"):
            shard.unlink()
        _huge_int_shard(model / victim)
    else:
        doc = json.loads((model / victim).read_text())
        (model / victim).write_text(json.dumps(doc)[:-1] + f', "metadata_size": {HUGE_INT}}}')
    rc, err = _preflight(tmp_path, "--launch-args-file", str(_args_file(tmp_path)), "--model-dir", str(model))
    assert rc == 65, err
    assert victim in err and "4300" in err and len(err.strip().splitlines()) == 1


def test_read_bounded_caps_and_types(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert read_bounded(f, 100) == b"x" * 100
    with pytest.raises(InputError, match="over the 99-byte cap"):
        read_bounded(f, 99)
    with pytest.raises(InputError, match="directory"):
        read_bounded(tmp_path, 100)
    with pytest.raises(InputError, match="no such file"):
        read_bounded(tmp_path / "absent", 100)
    # /proc files report st_size 0 and are then read: the cap still holds while reading.
    with pytest.raises(InputError, match="grew past"):
        read_bounded("/proc/self/maps", 10)
    f.write_bytes(b"ok\n\xff")
    with pytest.raises(InputError, match=r"f:2: file is not valid UTF-8"):
        read_text_bounded(f)


def test_parse_json_depth_and_digits() -> None:
    assert parse_json('{"a": [1, {"b": 2}]}', "x") == {"a": [1, {"b": 2}]}
    with pytest.raises(InputError, match="nested more than 100"):
        parse_json("[" * 500 + "]" * 500, "x")
    with pytest.raises(InputError, match="nested too deeply"):
        parse_json("[" * 100_000 + "]" * 100_000, "x")
    with pytest.raises(InputError, match="4300"):
        parse_json(HUGE_INT, "x")
    assert json_depth([[[]]]) == 3 and json_depth(7) == 0


def test_output_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    """``--output FILE`` writes through a private temporary file: a symlink planted at a predictable
    ``FILE.tmp`` (or at FILE) in a directory others can write never makes the report overwrite what it
    points to. A link in one's own private directory is one's own, and is written through."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # where another local user can plant links
    out = shared / "report.json"
    (shared / "report.json.tmp").symlink_to(victim)
    args = ["preflight", "--launch-args-file", str(_args_file(tmp_path)), "--format", "json"]
    res = run_bounded([*args, "--output", str(out)], timeout=30)
    assert res.rc in (0, 69, 78), res.stderr
    assert victim.read_text() == "precious\n"
    assert json.loads(out.read_text())["tool"] == "spark-validate"
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()
    out.unlink()
    out.symlink_to(victim)
    res = run_bounded([*args, "--output", str(out)], timeout=30)
    assert victim.read_text() == "precious\n" and not out.is_symlink()
    assert json.loads(out.read_text())["tool"] == "spark-validate"
    assert sorted(p.name for p in shared.iterdir()) == ["report.json", "report.json.tmp"]
    # a link in a private directory was made by this user (or root): written through
    own = tmp_path / "own.json"
    own.symlink_to(victim)
    res = run_bounded([*args, "--output", str(own)], timeout=30)
    assert own.is_symlink() and json.loads(victim.read_text())["tool"] == "spark-validate"
    # a directory that does not exist is a usage error, found before any work
    res = run_bounded([*args, "--output", str(tmp_path / "absent-dir" / "r.json")], timeout=30)
    assert res.rc == 2 and "absent-dir" in res.stderr and "Traceback" not in res.stderr


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_shape_of_huge_dimensions_exits_65_at_once(tmp_path: Path) -> None:
    """Found by tests/fuzz_hostile.py: a 309-digit dimension overflowed the float in the error message (exit
    1); thousands of 4,000-digit dimensions made the size product take minutes."""
    model = tmp_path / "model"
    write_checkpoint(model, small=True)
    for shard in model.glob("*.safetensors"):
        shard.unlink()
    for dims in (["7" * 309], ["9" * 4000] * 2000):
        header = (
            '{"x": {"dtype": "U8", "shape": [' + ", ".join(dims) + '], "data_offsets": [0, 1]}}'
        ).encode()
        (model / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0")
        args = ["--launch-args-file", str(_args_file(tmp_path)), "--model-dir", str(model)]
        rc, err = _preflight(tmp_path, *args)
        assert rc == 65 and "needs more than" in err and "model.safetensors" in err, err


def test_prefix_readers_refuse_fifos_and_devices(tmp_path: Path) -> None:
    """Readers that only need a file's head (installed SGLang's sources, dist-info METADATA, a hub ref)
    used ``read_bytes()[:N]`` or a line iterator: ``/dev/zero`` was read whole, a FIFO blocked. Through
    ``read_head`` they see an ``OSError`` and treat the file as unreadable, as for a missing one."""
    from validator.bounded_files import read_head
    from validator.sources.host.dists import metadata_version
    from validator.sources.sglang.install import _redirects_flashinfer_cache

    root = tmp_path / "sglang"
    (root / "srt").mkdir(parents=True)
    _dev_zero(root / "__init__.py")
    _fifo(root / "srt" / "environ.py")
    assert _redirects_flashinfer_cache(root) is None
    meta = _fifo(tmp_path / "METADATA")
    assert metadata_version(meta) is None
    assert metadata_version(_dev_zero(tmp_path / "METADATA2")) is None
    ok = tmp_path / "ok"
    ok.write_bytes(b"Version: 1.2\n\nbody" * 10)
    assert read_head(ok, 5) == b"Versi" and metadata_version(ok) == "1.2"


def test_sglang_config_file_aliases_and_devices_exit_65(tmp_path: Path) -> None:
    """``--config FILE`` in a launch command is read as SGLang reads it; a billion-laughs file (aliases that
    expand into gigabytes of argv words) and a FIFO are refused with one line."""
    laughs = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(laughs) + "\nmodel-path: *i\n")
    fifo = _fifo(tmp_path / "fifo.yaml")
    for config, needle in ((bomb, "aliases"), (fifo, "FIFO")):
        cmd = f"python -m sglang.launch_server --config {config}"
        rc, err = _preflight(tmp_path, "--launch-cmd", cmd)
        assert rc == 65 and str(config) in err and needle in err, err


def test_output_to_a_device_writes_it_and_never_replaces_it(tmp_path: Path) -> None:
    """As root, ``--output /dev/null`` once replaced the device with a regular file (for every program on
    the host). A character device or FIFO is written in place; ``/dev/stdout`` (a link in root's /dev)
    is followed to the pipe; a link planted in a directory others can write is replaced, never followed,
    even when it points at a device."""
    if os.geteuid() != 0:
        missing("creating a device node needs root (CI runs as root)")
    args = ["preflight", "--launch-args-file", str(_args_file(tmp_path)), "--format", "json"]
    null = tmp_path / "mynull"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    res = run_bounded([*args, "--output", str(null)], timeout=30)
    assert res.rc in (0, 69, 78), res.stderr
    assert stat.S_ISCHR(null.lstat().st_mode), "the device was replaced"
    piped = run_cli(*args, "--output", "/dev/stdout")  # stdout is a pipe here
    assert piped.returncode in (0, 69, 78), piped.stderr
    assert json.loads(piped.stdout)["tool"] == "spark-validate"
    assert Path("/dev/stdout").is_symlink()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "r.json").symlink_to(null)
    res = run_bounded([*args, "--output", str(shared / "r.json")], timeout=30)
    assert res.rc in (0, 69, 78), res.stderr
    assert not (shared / "r.json").is_symlink() and stat.S_ISCHR(null.lstat().st_mode)
    assert json.loads((shared / "r.json").read_text())["tool"] == "spark-validate"
