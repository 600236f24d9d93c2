"""The launcher-script reader read in one process more than once, as the sidecar and the differential
test do: each reading is the script's own, whatever was read before it (the syntax tree's field-name cache
once matched a node of a freed tree to a new tree's node at the same address, and read a script's
``exec`` line as a command without arguments: no launch)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.shell_differential import compare, read_static, run_bash, sandbox
from tests.support.shell_gen import Script
from validator.sources.launch.command import shebang
from validator.sources.launch.shell.reader import read_script
from validator.sources.launch.shell.syntax import interpreter, interpreter_options


def test_a_script_read_again_in_one_process_reads_the_same(tmp_path: Path) -> None:
    script = tmp_path / "start.sh"
    script.write_text(
        "#!/bin/bash\na=x\n"
        + "a=$a$a\n" * 12
        + "exec python -m sglang.launch_server --model-path /m --served-model-name $a\n"
    )
    readings = [read_script(script, env={"PATH": "/usr/bin:/bin"}) for _ in range(20)]
    for reading in readings:
        assert [e.kind for e in reading.endings] == ["launch"], [e.reason for e in reading.endings]
        launch = reading.endings[0].launch
        assert launch is not None
        assert launch.words[-2:] == [["--served-model-name"], ["x" * 4096]]


def test_an_empty_argument_in_unquoted_star_under_dash_is_unresolved(tmp_path: Path) -> None:
    """``$*`` unquoted with ``IFS=:`` and an empty argument: bash makes an empty word of it, dash (``/bin/sh``
    on Debian and Ubuntu) none. The reader, which models only what the two do alike under ``#!/bin/sh``,
    says it cannot know that part instead of giving bash's answer (found by the differential run, seed 19,
    ``--shell sh``)."""
    script = Script("#!/bin/sh\nIFS=:\nexec python3 -m sglang.launch_server $*\n", args=["b c", "", "-p"])
    base = sandbox(tmp_path)
    ran = run_bash(tmp_path, script, base)
    assert ran.launched and ran.argv[-2:] == ["b c", "-p"], ran.argv  # dash dropped the empty argument
    verdict = compare(read_static(tmp_path, script, base), ran)
    assert verdict.kind == "unresolved", verdict
    assert "empty argument and a non-blank IFS in a /bin/sh script" in verdict.detail


@pytest.mark.parametrize(
    ("body", "dash_argv"),
    [
        # dash has no $BASH_VERSION: under set -u it stops there and starts nothing
        ("set -u\nB=$BASH_VERSION\nexec python3 -m sglang.launch_server --port 1\n", None),
        # nor $BASH_SOURCE: the word is empty, not the script's path
        (
            'exec python3 -m sglang.launch_server --served-model-name "$BASH_SOURCE"\n',
            ["--served-model-name", ""],
        ),
    ],
)
def test_bashs_own_variables_are_unset_under_dash(
    tmp_path: Path, body: str, dash_argv: list[str] | None
) -> None:
    """A ``#!/bin/sh`` script's ``$BASH_VERSION`` and ``$BASH_SOURCE`` are unset, as dash has them (the
    reader gave bash's values there; the differential run found the first, seed 21, ``--shell sh``)."""
    script = Script("#!/bin/sh\n" + body)
    base = sandbox(tmp_path)
    ran = run_bash(tmp_path, script, base)
    if dash_argv is None:
        assert not ran.launched
    else:
        assert ran.launched and ran.argv[-2:] == dash_argv, ran.argv
    verdict = compare(read_static(tmp_path, script, base), ran)
    assert verdict.kind == ("no-launch" if dash_argv is None else "proven"), verdict


@pytest.mark.parametrize("shebang", ["#!/bin/bash", "#!/bin/sh"])
def test_the_activate_of_an_older_venv_is_read_without_an_assumption(tmp_path: Path, shebang: str) -> None:
    """A venv made by Python 3.11.3 or older (Debian 12's, Ubuntu 22.04's) has ``activate`` run ``hash -r``
    only under bash or zsh: ``if [ -n "${BASH:-}" -o -n "${ZSH_VERSION:-}" ]``. bash always sets ``$BASH``
    (its own path), dash never: the test is decided, not a run-time condition the reading assumes (which
    made ``preflight --script`` warn for every script that sources such a venv, as the unprivileged run of
    tests/test_deploy_script.py found, its venv made from Debian's python3)."""
    body = 'if [ -n "${BASH:-}" -o -n "${ZSH_VERSION:-}" ] ; then\n    hash -r 2> /dev/null\nfi\n'
    script = Script(f"{shebang}\n{body}exec python3 -m sglang.launch_server --port 1\n")
    base = sandbox(tmp_path)
    ran = run_bash(tmp_path, script, base)
    assert ran.launched and ran.argv[-2:] == ["--port", "1"], ran.argv
    reader = read_static(tmp_path, script, base)
    assert compare(reader, ran).kind == "proven", reader
    assert not isinstance(reader, str) and reader.where.endswith("(no assumption)"), reader.where


def test_a_status_that_true_discards_does_not_fork(tmp_path: Path) -> None:
    """F9 of world9 (shantanugoel's serve.sh: 204 paths, 2 s): ``cmd || true`` and ``cmd || :`` end with
    status 0 whichever way ``cmd`` went and differ in nothing else, so they are one path, not two; each
    sourced file is parsed once per reading. A ``true`` the script redefines still forks. Held to bash."""
    body = (
        "source ./lib.sh\n" * 3
        + 'gid="$(getent group video | cut -d: -f3 || true)"\n'
        + "docker rm -f old >/dev/null 2>&1 || true\n" * 8
        + "grep -q x /etc/hostname || :\n"
    )
    (tmp_path / "lib.sh").write_text("L=1\n")
    script = tmp_path / "start.sh"
    script.write_text(f'#!/bin/bash\nset -e\n{body}exec python3 -m sglang.launch_server --x "$L"\n')
    reading = read_script(script, env={"PATH": "/usr/bin:/bin"})
    assert [e.kind for e in reading.endings] == ["launch"], [e.reason for e in reading.endings]
    shadowed = tmp_path / "shadowed.sh"
    shadowed.write_text(
        "#!/bin/bash\ntrue() { return 1; }\ndocker rm -f old || true\nexec python3 -m sglang.launch_server\n"
    )
    assert len(read_script(shadowed, env={"PATH": "/usr/bin:/bin"}).endings) == 2
    run = Script(f'#!/bin/bash\nset -e\n{body}exec python3 -m sglang.launch_server --x "$L"\n')
    base = sandbox(tmp_path)
    (tmp_path / "lib.sh").write_text("L=1\n")
    ran = run_bash(tmp_path, run, base)
    assert ran.launched and ran.argv[-1] == "1"
    assert compare(read_static(tmp_path, run, base), ran).kind in ("proven", "partly")


_LONG = "1" * 5000


@pytest.mark.parametrize(
    ("line", "kinds"),
    [
        ("exit ²", {"exit"}),
        (f"exit {_LONG}", {"exit"}),
        ("for i in 1; do break ²; done", {"unresolved"}),
        (f"for i in 1; do continue {_LONG}; done", {"unresolved"}),
        ("for i in 1; do break 0; done", {"unresolved"}),
        ("shift ²", {"unresolved"}),
        (f"shift {_LONG}", {"unresolved"}),
        ("f() { return ²; }; f", {"launch"}),
        ("OPTIND=²; getopts a o", {"unresolved"}),
        (f"X=$(( {_LONG} + 1 ))", {"unresolved"}),
        (f"printf -v X %d {_LONG}", {"unresolved"}),
        (f"echo ${{{_LONG}}}", {"launch"}),
        ("for i in 1; do break 1; done", {"launch"}),
    ],
)
def test_a_count_that_is_no_small_ascii_number_is_never_an_internal_error(
    tmp_path: Path, line: str, kinds: set[str]
) -> None:
    """Red team 19: ``str.isdigit`` takes "²" (and other Unicode digits) that ``int`` refuses, and ``int``
    refuses over 4,300 digits: ``exit ²``, ``shift ²``, ``break ²``, ``return ²`` in a function, or any of
    them (and an arithmetic literal, ``printf %d``) with 5,000 digits, in another user's script, was
    ``internal error: ValueError``, exit 1. bash fails on each ("numeric argument required"; ``break`` with
    no number ends the shell), so the count is a number of at most 18 ASCII digits, else not modelled (or,
    for ``exit``/``return``, a status known only at run time)."""
    script = tmp_path / "start.sh"
    script.write_text(f"#!/bin/bash\n{line}\nexec python3 -m sglang.launch_server --model-path /m\n")
    reading = read_script(script, env={"PATH": "/usr/bin:/bin"})
    assert {e.kind for e in reading.endings} == kinds, [e.reason for e in reading.endings]


def test_a_reading_is_bounded_in_memory_and_in_time(tmp_path: Path) -> None:
    """Red team 19, three short scripts another user could give root's preflight: ``a=$a$a`` 40 times (16
    bytes doubled to 16 TiB: MemoryError, exit 1, or the OOM killer); ``${a//y/z}`` on a 16 KiB value
    (matched at each position against each end: 27 s; 1 MiB, hours); eight forks and a loop of 20,000
    statements (every path replays the loop: 256 x 20,000 statements, 21 s). A value is built up to
    MAX_VALUE, a pattern matched on at most MAX_PATTERN_SUBJECT characters, a reading does MAX_WORK;
    past them what is left is unknown or unresolved, never computed."""
    import time

    from validator.sources.launch.shell.values import Unknown

    script = tmp_path / "start.sh"
    server = "exec python3 -m sglang.launch_server --model-path /m --served-model-name"
    doubled = "a=xxxxxxxxxxxxxxxx\n" + "a=$a$a\n" * 40
    script.write_text(f'#!/bin/bash\n{doubled}{server} "$a"\n')
    (ending,) = read_script(script, env={}).endings
    assert ending.launch is not None and isinstance(ending.launch.words[-1][0], Unknown)
    script.write_text("#!/bin/bash\na=xxxxxxxxxxxxxxxx\n" + "a=$a$a\n" * 10 + f'{server} "${{a//y/z}}"\n')
    started = time.monotonic()
    (ending,) = read_script(script, env={}).endings
    assert ending.launch is not None and isinstance(ending.launch.words[-1][0], Unknown)
    assert time.monotonic() - started < 5
    forks = "".join(f'if [ "$(date +%s)" = x{i} ]; then c{i}=1; fi\n' for i in range(8))
    body = "; ".join(f"b={k}" for k in range(21))
    words = " ".join(str(k) for k in range(999))
    script.write_text(f"#!/bin/bash\n{forks}for i in {words}; do {body}; done\n{server} x\n")
    started = time.monotonic()
    kinds = {e.kind for e in read_script(script, env={}).endings}
    assert kinds == {"unresolved"} and time.monotonic() - started < 8


def test_the_texts_one_reading_parses_for_source_and_eval_are_bounded(tmp_path: Path) -> None:
    """Red team 20: 900 ``eval``s of a 280 KB text that differs each time took a reading minutes (each a
    new parse). Past ``MAX_PARSED_BYTES`` of new text in all, the path is unresolved, naming the bound; a
    text parsed once more (the same file sourced on every path) costs nothing."""
    from validator.sources.launch.shell.builtins_flow import MAX_PARSED_BYTES

    script = tmp_path / "start.sh"
    script.write_text(
        '#!/bin/bash\nS=": AAAAAAAAAAAAAAAA"\n' + 'S="$S $S"\n' * 12
        + 'for ((i=0;i<200;i++)); do eval "$S $i"; done\n'
        + "exec python3 -m sglang.launch_server --model-path /m\n"
    )  # fmt: skip
    reading = read_script(script, env={"PATH": "/usr/bin:/bin"})
    assert [e.kind for e in reading.endings] == ["unresolved"], [e.reason for e in reading.endings]
    assert f"over {MAX_PARSED_BYTES} bytes in all" in reading.endings[0].reason
    (tmp_path / "lib.sh").write_text("L=1\n" + ("# " + "x" * 498 + "\n") * 1000)  # 500 KB, parsed once
    script.write_text(
        "#!/bin/bash\n" + "source ./lib.sh\n" * 10 + 'exec python3 -m sglang.launch_server --x "$L"\n'
    )
    assert [e.kind for e in read_script(script, env={"PATH": "/usr/bin:/bin"}).endings] == ["launch"]


@pytest.mark.parametrize(
    "line",
    [
        "#!/bin/bash" + " " * 300 + "-f",  # the option past byte 255: Linux never hands it to bash
        "#!/bin/bash -" + "e" * 300 + "f",
        "#!/bin/bash -" + "e" * 240 + "f",
        "#!/bin/bash -f",
        "#!/bin/sh" + "\t" * 260 + "-f",
    ],
)
def test_the_shebang_line_is_read_as_linux_reads_it(tmp_path: Path, line: str) -> None:
    """Red team 23: Linux reads a ``#!`` line within the file's first 256 bytes (fs/binfmt_script.c), so an
    option written past byte 255 is not the shell's; the reader took every option of the whole line
    (``-f`` past 255 blanks: no pathname expansion, where bash expands ``*`` into a file named
    ``--enable-fp32-lm-head``). Held to the kernel: the script run as itself prints ``$-``."""
    script = tmp_path / "s.sh"
    script.write_text(line + '\necho "$-"\n')
    script.chmod(0o755)
    ran = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=20)
    data = script.read_bytes()
    opts = interpreter_options(data)
    assert opts is not None and ("noglob" in opts) == ("f" in ran.stdout.strip()), (opts, ran.stdout)
    assert ("errexit" in opts) == ("e" in ran.stdout.strip())
    found = shebang(script)
    assert found is not None and interpreter(data) == {"bash": "bash", "sh": "sh"}[Path(found[0]).name]
