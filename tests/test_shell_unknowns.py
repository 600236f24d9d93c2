"""The launcher-script reader's unknowns are exactly what bash computes at run time (issue 29, items 2, 3
and 5), through the real CLI on scripts that real bash also runs (its ``python3`` recording what it was
started with):

- a file sourced from the command's own input (``. /dev/stdin <<'EOF'``, ``source /proc/self/fd/0 <<<``,
  ``/dev/fd/0``) is read as that text; a process substitution or a here-document with expansions makes
  every variable unknown from there, never "a missing file" whose defaults would then be taken;
- a sourced file absent here makes every variable unknown from there, defaults included;
- a loop over words known only at run time (a glob of a directory the script made) makes unknown what its
  body can change and nothing else; a function never called changes nothing, and a cache probe called in
  an ``if`` only forks on its status.

Each case has its control next to it: the same script without the construct gives the expert's verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.support.second_user import User, run_as
from tests.test_deploy_script import (  # noqa: F401 (host: the fixture, built as in test_deploy_script)
    RECIPE,
    Host,
    _bash_run,
    _preflight,
    _static,
    _statuses,
    _write,
    host,
)
from validator.errors import UnresolvedLaunch
from validator.sources.launch.script import read_exec
from validator.sources.launch.shell.values import Unknown, join

FP8 = "SGLANG_ENABLE_FP8_LM_HEAD"


def _script(pre: str, backend: str = '"${MOE_BACKEND:-humming}"', fp8: str = "1") -> str:
    return (
        f"#!/bin/bash\nsource .venv/bin/activate\n{pre}\nexport {FP8}={fp8}\n"
        'M="$HOME/models/Ling-3.0-flash-fp4"\n'
        f'exec python3 -m sglang.launch_server --model-path "$M" {RECIPE.replace("humming", backend, 1)} '
        '--speculative-draft-model-path "$M"\n'
    )


def _check(report: dict[str, Any], check: str) -> dict[str, Any]:
    (found,) = [c for c in report["checks"] if c["id"] == check]
    return found


HERE_DOCS = {
    "dev-stdin-heredoc": ". /dev/stdin <<'EOF'\nMOE_BACKEND=auto\nEOF",
    "proc-self-fd-0-herestring": 'source /proc/self/fd/0 <<< "MOE_BACKEND=auto"',
    "dev-fd-0-heredoc": "source /dev/fd/0 <<EOF\nMOE_BACKEND=auto\nEOF",
    "tab-stripped-heredoc": ". /dev/stdin <<-EOF\n\tMOE_BACKEND=auto\n\tEOF",
}


@pytest.mark.parametrize("name", sorted(HERE_DOCS))
def test_a_sourced_here_document_is_read_as_its_text(host: Host, name: str) -> None:  # noqa: F811
    """The here-document sets ``MOE_BACKEND=auto``; bash runs ``--moe-runner-backend auto``. The reader
    said "missing file" and took the default: ``PASS moe.backend (humming)``. Now it reads the text."""
    script = _write(host, f"heredoc-{name}.sh", _script(HERE_DOCS[name]))
    ran = _bash_run(host, script, {})
    assert ran["argv"][ran["argv"].index("--moe-runner-backend") + 1] == "auto"
    static = _static(host, script, {})
    assert static.args["moe_runner_backend"] == "auto" and not static.unresolved
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 78 and _statuses(report)["moe.backend"] == "fail", err
    assert "auto" in _check(report, "moe.backend")["message"]


def test_control_without_the_here_document_passes(host: Host) -> None:  # noqa: F811
    script = _write(host, "heredoc-control.sh", _script(":"))
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))


@pytest.mark.parametrize(
    "pre",
    [
        "source <(printf 'MOE_BACKEND=auto\\n')",
        "source /dev/stdin <<EOF\nMOE_BACKEND=$(printf auto)\nEOF",
        "printf 'MOE_BACKEND=auto\\n' > /dev/null; source /dev/stdin < /dev/null",
    ],
    ids=["process-substitution", "heredoc-with-expansion", "stdin-from-a-file"],
)
def test_a_sourced_input_whose_text_is_not_known_makes_everything_unknown(
    host: Host,  # noqa: F811
    pre: str,
) -> None:
    """Text known only at run time: what reads a variable from there on is unproven (error), never the
    default taken as the value; the checks that read nothing of it still run."""
    script = _write(host, "unknown-input.sh", _script(pre))
    static = read_exec(script, host.env)[0]
    backend = static.argv[static.argv.index(["--moe-runner-backend"]) + 1]  # type: ignore[union-attr]
    assert isinstance(join(backend), Unknown)
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and report["verdict"] == "inconclusive", err
    assert _statuses(report)["moe.backend"] == "error"


def test_defaults_after_an_unreadable_sourced_file_are_unknown(host: Host) -> None:  # noqa: F811
    """``source site.env`` (absent when preflight runs, present at boot) then ``${FP8:-1}``: the reader
    took the default as known (PASS with --allow-partial; bash ran with 0). Now ``lm_head.fp8`` is
    unproven and listed as such, and the file present at boot shows why."""
    text = _script("source site.env\nMOE_BACKEND=humming", fp8=f'"${{{FP8}:-1}}"')
    script = _write(host, "site-env.sh", text)
    (host.root / "site.env").unlink(missing_ok=True)
    static = _static(host, script, {})
    assert FP8 in static.unresolved and FP8 not in static.env
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and _statuses(report)["lm_head.fp8"] == "error", err
    # assigned after the file: known again (the check itself also reads $HOME's model path: unknown)
    assert static.args["moe_runner_backend"] == "humming" and "moe_runner_backend" not in static.unresolved
    rc, report, err = _preflight(host.env, "--script", str(script), "--allow-partial")
    assert _statuses(report)["lm_head.fp8"] == "error"
    assert "lm_head.fp8" in report["coverage"]["not_proven"], report["coverage"]
    (host.root / "site.env").write_text(f"{FP8}=0\n")
    try:
        assert _bash_run(host, script, {})["env"][FP8] == "0"
    finally:
        (host.root / "site.env").unlink()


def test_control_a_default_with_nothing_sourced_is_known(host: Host) -> None:  # noqa: F811
    script = _write(host, "site-env-control.sh", _script(":", fp8=f'"${{{FP8}:-1}}"'))
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and _statuses(report)["lm_head.fp8"] == "pass", err


# A cache probe as MiaAI-Lab's start.sh writes it (tests/corpus/scripts/README.md): a glob loop over the
# snapshots of a directory the script itself made, in a function called only in an `if`, and a function
# that is never called at all.
PROBE = """set -euo pipefail
mkdir -p "$HOME/hub"
is_cached() {
  local dir snapshot
  dir="$HOME/hub/models--$1"
  [[ -d "$dir/snapshots" ]] || return 1
  for snapshot in "$dir"/snapshots/*/; do
    [[ -f "$snapshot/config.json" ]] || continue
    if [[ -f "$snapshot/model.safetensors.index.json" ]] \\
      || compgen -G "$snapshot/model-"*.safetensors >/dev/null; then
      return 0
    fi
  done
  return 1
}
never_called() { for f in /nonexistent/*; do MOE_BACKEND=auto; eval "$f"; done; }
if is_cached Ling-3.0-flash-fp4; then echo cached; else echo "not cached yet"; fi
"""


def test_a_glob_loop_in_a_cache_probe_changes_nothing_the_launch_reads(host: Host) -> None:  # noqa: F811
    """Every launch check was ERR at the loop (a glob of a directory the script made). The loop changes
    only the probe's locals and its status: the launch is read exactly, as bash runs it."""
    script = _write(host, "probe.sh", _script(PROBE))
    ran = _bash_run(host, script, {})
    static = _static(host, script, {})
    assert static.argv == ran["argv"][2:] and not static.unresolved
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))


def test_a_glob_loop_makes_unknown_exactly_what_it_assigns(host: Host) -> None:  # noqa: F811
    """A loop over the same glob that sets the backend: that value (and only it) is unknown."""
    loop = 'mkdir -p "$HOME/conf.d"\nfor f in "$HOME"/conf.d/*.conf; do MOE_BACKEND=auto; done'
    script = _write(host, "loop-assigns.sh", _script(loop))
    static = read_exec(script, host.env)[0]
    backend = static.argv[static.argv.index(["--moe-runner-backend"]) + 1]  # type: ignore[union-attr]
    assert isinstance(join(backend), Unknown)
    # no .conf file here: bash runs the body once with the pattern itself; with one, as often as there are
    ran = _bash_run(host, script, {})["argv"]
    assert ran[ran.index("--moe-runner-backend") + 1] == "auto"
    rc, report, err = _preflight(host.env, "--script", str(script))
    statuses = _statuses(report)
    assert rc == 69 and statuses["moe.backend"] == "error", err
    assert statuses["lm_head.fp8"] == "pass" and statuses["spec.config"] == "pass"


def test_a_glob_loop_whose_body_is_not_bounded_stays_unresolved(host: Host) -> None:  # noqa: F811
    """``eval`` in the loop's body can change anything: the reading is unresolved, never guessed."""
    loop = 'mkdir -p "$HOME/conf.d"\nfor f in "$HOME"/conf.d/*.conf; do eval "$(cat "$f")"; done'
    script = _write(host, "loop-eval.sh", _script(loop))
    rc, report, err = _preflight(host.env, "--script", str(script))
    assert rc == 69 and report["verdict"] == "inconclusive", err
    assert all(c["status"] != "pass" for c in report["checks"] if c["id"] == "moe.backend")


def test_paths_through_a_probe_are_its_outcomes_not_its_conditions(tmp_path: Path) -> None:
    """A pure function's call forks once per distinct outcome, not once per condition inside it: two
    probes of four conditions each give four paths, not hundreds (the cap is 256)."""
    from validator.sources.launch.shell.reader import read_script

    text = "#!/bin/bash\n" + PROBE + "if is_cached other; then :; fi\nexec python3 -m sglang.launch_server\n"
    script = tmp_path / "s.sh"
    script.write_text(text)
    reading = read_script(script, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert len(reading.endings) == 4, [e.reason for e in reading.endings]
    assert {e.kind for e in reading.endings} == {"launch"}


def test_a_file_written_where_another_user_can_replace_it_is_not_read_as_written(
    tmp_path: Path, attacker: User, shared: Path
) -> None:
    """``cat > FILE <<'EOF'`` then ``source FILE`` is read as the here-document's text only where nobody
    else can change FILE in between. A second user who made FILE first in a shared directory (mode 0666)
    can rewrite it after the script wrote it: there the sourced values are unknown. Attacked as that user
    for real: the rewrite after the script's own write succeeds."""
    target = shared / "site.env"
    made = run_as(attacker, ["sh", "-c", f"umask 0; echo 'export {FP8}=0' > '{target}'"])
    assert made.returncode == 0, made.stderr
    body = (
        f"cat > '{{0}}' <<'EOF'\nexport {FP8}=1\nEOF\nsource '{{0}}'\nexec python3 -m sglang.launch_server\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    script = tmp_path / "shared.sh"
    script.write_text("#!/bin/bash\n" + body.format(target))
    ex = read_exec(script, env)[0]
    assert ex.env.get(FP8) != "1" and (isinstance(ex.env.get(FP8), Unknown) or ex.others), ex.env.get(FP8)
    # the hazard is real: the script's write lands in the attacker's file, which the attacker rewrites
    subprocess.run(["bash", "-c", f"cat > '{target}' <<'EOF'\nexport {FP8}=1\nEOF"], check=True, timeout=30)
    rewrite = run_as(attacker, ["sh", "-c", f"echo 'export {FP8}=0' > '{target}'"])
    assert rewrite.returncode == 0 and target.read_text() == f"export {FP8}=0\n", rewrite.stderr
    # control: the same script writing in its own private directory is read as written
    private = tmp_path / "own.sh"
    private.write_text("#!/bin/bash\n" + body.format(tmp_path / "site.env"))
    assert read_exec(private, env)[0].env.get(FP8) == "1"


def test_a_read_loop_makes_unknown_what_it_reads_into_and_nothing_else(host: Host) -> None:  # noqa: F811
    """``while read -r k v; do ...; done < site.conf``: how many lines, and what they say, is known only
    at run time. It made every launch unresolved (a fork per line, past the path cap); now what the loop
    assigns is unknown and the rest is read exactly: the variable it sets fails nothing it does not
    reach."""
    (host.root / "site.conf").write_text("moe auto\nport 30001\n")
    loop = 'while read -r k v; do [ "$k" = moe ] && MOE_BACKEND="$v"; LAST="$k"; done < site.conf'
    script = _write(host, "read-loop.sh", _script(loop))
    ran = _bash_run(host, script, {})["argv"]
    assert ran[ran.index("--moe-runner-backend") + 1] == "auto"
    static = read_exec(script, host.env)[0]
    backend = static.argv[static.argv.index(["--moe-runner-backend"]) + 1]  # type: ignore[union-attr]
    assert isinstance(join(backend), Unknown)
    rc, report, err = _preflight(host.env, "--script", str(script))
    statuses = _statuses(report)
    assert rc == 69 and statuses["moe.backend"] == "error", err
    assert statuses["lm_head.fp8"] == "pass" and statuses["spec.config"] == "pass"
    # control: the same loop setting only a variable the launch does not read
    quiet = _write(host, "read-loop-control.sh", _script(loop.replace('MOE_BACKEND="$v"', 'SEEN="$v"')))
    rc, report, err = _preflight(host.env, "--script", str(quiet))
    assert rc == 0 and report["verdict"] == "pass", (err, report.get("checks"))


def test_a_sourced_file_another_user_can_change_is_not_read_as_it_is_now(
    tmp_path: Path, attacker: User, shared: Path
) -> None:
    """``source /shared/site.env``: a file another user owns, or can replace, says what it says when the
    server starts, not what it says now. Attacked for real: the second user writes the file (FP8 head on,
    what a recipe wants to see), the reading does not take that value; the same user then changes it,
    which is what bash would read. Control: the same file in a private directory is read."""
    site = shared / "site.env"
    made = run_as(attacker, ["sh", "-c", f"echo 'export {FP8}=1' > '{site}'"])
    assert made.returncode == 0, made.stderr
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    script = tmp_path / "shared-source.sh"
    script.write_text(f"#!/bin/bash\nsource '{site}'\nexec python3 -m sglang.launch_server\n")
    ex = read_exec(script, env)[0]
    assert ex.env.get(FP8) != "1" and ex.others is not None, ex.env.get(FP8)
    changed = run_as(attacker, ["sh", "-c", f"echo 'export {FP8}=0' > '{site}'"])
    assert changed.returncode == 0 and site.read_text() == f"export {FP8}=0\n", changed.stderr
    own = tmp_path / "site.env"
    own.write_text(f"export {FP8}=1\n")
    script.write_text(f"#!/bin/bash\nsource '{own}'\nexec python3 -m sglang.launch_server\n")
    assert read_exec(script, env)[0].env.get(FP8) == "1"


def test_a_sourced_fifo_is_read_as_unknown_without_waiting(tmp_path: Path) -> None:
    """A FIFO where the sourced file should be (anyone able to make one there decides what bash reads):
    the reading neither blocks on it nor takes it for a missing file; every variable is unknown from
    there, and the reason names it."""
    os.mkfifo(tmp_path / "site.env")
    script = tmp_path / "fifo.sh"
    script.write_text(
        f"#!/bin/bash\nexport {FP8}=1\nsource ./site.env\nexec python3 -m sglang.launch_server\n"
    )
    ex = read_exec(script, {"PATH": "/usr/bin:/bin"})[0]
    assert ex.others is not None and "not a regular file" in ex.others, ex.others
    assert isinstance(ex.env[FP8], Unknown)


def test_a_shebang_names_bash_only_where_the_file_is_the_systems_bash(
    tmp_path: Path, attacker: User, shared: Path
) -> None:
    """Red team 23: the ``#!`` line was judged by its last word alone: ``#!/shared/p/bash`` (a file another
    user wrote, a ``#!/bin/sh`` script asking for both heads), ``#!/usr/bin/env bash`` with their directory
    first on PATH, or their link named ``sh`` to python were read as bash or sh running the script, and
    b29c8bc reads a unit's ExecStart= script so (exit 0, the FP8 head from the unit). The kernel runs that
    file: what it runs is unknown unless it is, after its links, root's (or this user's) and so named."""
    made = run_as(
        attacker,
        [
            "sh",
            "-c",
            f"mkdir -p {shared}/p && printf '#!/bin/sh\\necho fake > {shared}/ran\\n' > {shared}/p/bash && "
            f"chmod 755 {shared}/p/bash && ln -s /usr/bin/python3 {shared}/p/sh",
        ],
    )
    assert made.returncode == 0, made.stderr
    body = "exec python3 -m sglang.launch_server --model-path /m\n"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    theirs = {"PATH": f"{shared}/p:/usr/bin:/bin", "HOME": str(tmp_path)}
    script = tmp_path / "start.sh"
    for line, path_env, why in (
        (f"#!{shared}/p/bash", env, f"a file UID {attacker.uid} owns"),
        ("#!/usr/bin/env bash", theirs, f"a file UID {attacker.uid} owns"),
        (f"#!{shared}/p/sh", env, "which is /usr/bin/python3"),
    ):
        script.write_text(f"{line}\n{body}")
        with pytest.raises(UnresolvedLaunch, match=why):
            read_exec(script, path_env)
    # the hazard is real: the kernel runs their file, not bash
    script.write_text(f"#!{shared}/p/bash\n{body}")
    script.chmod(0o755)
    subprocess.run([str(script)], check=True, timeout=30, env=env)
    assert (shared / "ran").read_text() == "fake\n"
    for line in ("#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh"):
        script.write_text(f"{line}\n{body}")
        assert read_exec(script, env)[0].argv


def test_a_units_script_tests_files_as_the_user_the_service_runs_as(tmp_path: Path, attacker: User) -> None:
    """Red team 23: ``User=them`` runs the ExecStart= script as them, so ``[ -r FILE ]`` is their answer;
    the reader gave root's (b29c8bc reads a unit's script) and passed lm_head.exclusive for a script that
    asks for the FP32 head when it cannot read a root-only file, which as them it cannot."""
    base = Path(tempfile.mkdtemp(prefix="sv-user-"))  # a directory the service's user can reach
    try:
        os.chmod(base, 0o755)
        secret = base / "root-only"
        secret.write_text("x")
        secret.chmod(0o600)
        script = base / "start.sh"
        script.write_text(
            f"#!/bin/bash\nX=\n[ -r {secret} ] || X=--enable-fp32-lm-head\n"
            "exec python3 -m sglang.launch_server --model-path /m $X\n"
        )
        script.chmod(0o755)
        ran = run_as(attacker, ["bash", "-c", f"[ -r {secret} ] || echo fp32"])
        assert ran.stdout.strip() == b"fp32", ran  # as them the test fails: both heads
        unit = base / "ling.service"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        statuses = {}
        for user in ("", f"User={attacker.uid}\n"):
            unit.write_text(f"[Service]\n{user}Environment=SGLANG_ENABLE_FP8_LM_HEAD=1\nExecStart={script}\n")
            _rc, report, _err = preflight_json_in_process(env, "--unit", str(unit))
            statuses[user] = {c["id"]: c["status"] for c in report["checks"]}["lm_head.exclusive"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert statuses == {"": "pass", f"User={attacker.uid}\n": "error"}, statuses


def test_a_units_script_is_not_read_where_the_unit_changes_what_its_process_sees(tmp_path: Path) -> None:
    """Red team 24: ``InaccessiblePaths=FILE`` hides a file from the service (systemd.exec(5)), and
    ``DynamicUser=yes``, ``Group=``, ``BindPaths=``, capabilities ... change what its script may read or
    finds there; the reader tested the files as this process sees them and passed lm_head.exclusive for a
    script that asks for the FP32 head where the file is not there, which in the service it is not."""
    base = Path(tempfile.mkdtemp(prefix="sv-view-"))
    try:
        os.chmod(base, 0o755)
        flag = base / "flag"
        flag.write_text("x")
        flag.chmod(0o600)
        script = base / "start.sh"
        script.write_text(
            f"#!/bin/bash\nX=\n[ -r {flag} ] || X=--enable-fp32-lm-head\n"
            "exec python3 -m sglang.launch_server --model-path /m $X\n"
        )
        script.chmod(0o755)
        unit = base / "ling.service"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        statuses, errors = {}, {}
        for key in ("", f"InaccessiblePaths={flag}\n", "DynamicUser=yes\n", "PrivateTmp=no\nGroup=nogroup\n"):
            unit.write_text(
                f"[Service]\n{key}Environment=SGLANG_ENABLE_FP8_LM_HEAD=1\nExecStart={script}\n"
                "PrivateTmp=no\n"
            )
            _rc, report, err = preflight_json_in_process(env, "--unit", str(unit))
            statuses[key] = {c["id"]: c["status"] for c in report["checks"]}["lm_head.exclusive"]
            errors[key] = err + json.dumps(report)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert statuses == {
        "": "pass",
        f"InaccessiblePaths={flag}\n": "error",
        "DynamicUser=yes\n": "error",
        "PrivateTmp=no\nGroup=nogroup\n": "error",
    }, (statuses, errors)
    assert "DynamicUser=yes changes what the service" in errors["DynamicUser=yes\n"], errors
