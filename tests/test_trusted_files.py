"""validator.trusted_files: the path walk that records every directory on the way (symlinks resolved by
hand, ``..`` physically, loops bounded) and the chain judgement, on real directories and symlinks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import REPO
from validator.trusted_files import (
    UnsafeLocation,
    UntrustedFile,
    chain_problems,
    read_guarded,
    read_trusted_file,
    write_private,
)


def _dirs(path: Path) -> list[str]:
    _, facts = read_guarded(path, 1024)
    return [d.path for d in facts.chain]


def test_the_chain_runs_from_root_to_the_files_directory(tmp_path: Path) -> None:
    f = tmp_path / "a" / "b" / "f.txt"
    f.parent.mkdir(parents=True)
    f.write_text("x")
    data, facts = read_guarded(f, 1024)
    assert data == b"x" and facts.chain[0].path == "/" and facts.chain[-1].path == str(f.parent)
    assert [d.path for d in facts.chain][-3:] == [
        str(tmp_path),
        str(tmp_path / "a"),
        str(tmp_path / "a" / "b"),
    ]
    assert chain_problems(facts, {os.geteuid()}) == []


def test_symlinks_are_followed_by_hand_and_both_sides_recorded(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f.txt").write_text("y")
    (tmp_path / "link").symlink_to(real)  # like /var/run -> /run
    (tmp_path / "rel").symlink_to("real/f.txt")
    assert str(real) in _dirs(tmp_path / "link" / "f.txt")
    data, facts = read_guarded(tmp_path / "rel", 1024)
    assert data == b"y" and facts.chain[-1].path == str(real)
    # '..' is physical, as the kernel resolves it: sub/.. is real/, not the directory holding the link
    (real / "sub").mkdir()
    (tmp_path / "deep").symlink_to(real / "sub")
    assert not (tmp_path / "f.txt").exists()
    assert read_guarded(tmp_path / "deep" / ".." / "f.txt", 1024)[0] == b"y"
    with pytest.raises(UnsafeLocation, match="symbolic link"):
        read_guarded(tmp_path / "rel", 1024, follow_last=False)


def test_a_symlink_loop_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(UnsafeLocation, match="more than 40 symbolic links"):
        read_guarded(tmp_path / "a" / "f", 1024)


def test_a_world_writable_or_sticky_directory_on_the_way_is_a_problem(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    f = shared / "inner" / "f.txt"
    f.parent.mkdir()
    f.write_text("z")
    for mode, words in ((0o777, "(mode 0777)"), (0o1777, "(mode 1777, sticky)")):
        os.chmod(shared, mode)
        _, facts = read_guarded(f, 1024)
        assert [p for p in chain_problems(facts, {os.getuid()}) if str(shared) in p] == [
            f"directory {shared} is writable by its group or others {words}"
        ]
        with pytest.raises(UntrustedFile, match="not trusted as a file"):
            read_trusted_file(f, 1024)
        # only what lies at or under a root is judged when one is given
        assert chain_problems(facts, {os.getuid()}, below=str(f.parent)) == []


def test_the_private_writer_never_follows_and_replaces_atomically(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "t.json"
    write_private(target, b"one")
    write_private(target, b"two")
    assert target.read_bytes() == b"two"
    assert (target.parent.stat().st_mode & 0o777, target.stat().st_mode & 0o777) == (0o700, 0o644)
    assert [p.name for p in target.parent.iterdir()] == ["t.json"]  # no temporary file left
    os.chmod(target.parent, 0o770)
    with pytest.raises(UnsafeLocation, match="writable by its group or others"):
        write_private(target, b"three")


_WRITE = """
import os, resource, signal, sys
from pathlib import Path
from validator.trusted_files import UnsafeLocation, write_private
where, how = sys.argv[1], sys.argv[2]
if how == "full":  # a disk that fills up: writes past 16 bytes fail (EFBIG), as ENOSPC would
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
if how == "cwd-gone":
    os.chdir(where)
    os.rmdir(where)
    where = "rel/t.json"
try:
    write_private(Path(where), b"x" * 100, what="the flag table")
    print("written")
except UnsafeLocation as exc:
    print(f"UnsafeLocation: {exc}")
"""


@pytest.mark.parametrize("how", ["full", "directory-at-the-name", "cwd-gone"])
def test_a_write_that_fails_is_one_unsafe_location_naming_the_path(tmp_path: Path, how: str) -> None:
    """A full disk, a directory standing at the file's name, a relative path with the working directory
    removed: each is one UnsafeLocation naming the path (callers catch that alone; anything else was an
    internal error), and no temporary file is left behind."""
    target = tmp_path / "d" / "t.json"
    if how == "directory-at-the-name":
        target.mkdir(parents=True)
    where = target
    if how == "cwd-gone":
        where = tmp_path / "gone"
        where.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _WRITE, str(where), how],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    expected = {
        "full": f"{target}: cannot write the flag table: File too large",
        "directory-at-the-name": f"{target}: cannot write the flag table: Is a directory",
        "cwd-gone": "rel: no working directory to resolve it in: No such file or directory",
    }[how]
    assert (done.returncode, done.stdout, done.stderr) == (0, f"UnsafeLocation: {expected}\n", "")
    if how != "cwd-gone":
        assert [p.name for p in target.parent.iterdir()] == (["t.json"] if target.is_dir() else [])


def test_dot_dot_after_a_link_is_where_the_kernel_goes(tmp_path: Path) -> None:
    """``link/..`` is the parent of the link's target, as the kernel and the readers resolve it, never the
    link's own directory by text: the writer writes the file a reader of the same path reads."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub")
    path = tmp_path / "link" / ".." / "att" / "t.json"
    write_private(path, b"new")
    assert (tmp_path / "real" / "att" / "t.json").read_bytes() == b"new"
    assert not (tmp_path / "att").exists()
    assert path.read_bytes() == b"new" and read_guarded(path, 100)[0] == b"new"
