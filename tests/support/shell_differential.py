"""The differential run: a generated launcher script (``tests/support/shell_gen.py``) run by real bash (or
dash) in a sandbox, and read by ``preflight --script``'s reader; the two answers compared.

Real bash runs it with ``python3`` replaced by a capture shim first on ``PATH`` (argv and environment as
NUL-separated files); the reader's answer must equal what the shim saw, or say "unresolved" for the part
it cannot know. Apart from the generator so that a test of one script (``Script`` written by hand) uses
the same sandbox and comparison.
"""

from __future__ import annotations

import random
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.shell_gen import Gen, Script
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch.script import BASH_BOOKKEEPING, Exec, read_exec
from validator.sources.launch.shell.values import Unknown, Unsplit, join

# perl, not sh: a shell would add PWD to the environment it records. Only the first start is recorded:
# a real server runs until it stops, and what the script does after that (an EXIT trap) is not the launch
SHIM = """#!/usr/bin/perl
exit 0 if -e "{out}/env";
open(my $a, ">", "{out}/argv"); print $a join("\\0", $0, @ARGV), "\\0"; close($a);
open(my $e, ">", "{out}/env"); print $e map {{ "$_=$ENV{{$_}}\\0" }} sort keys %ENV; close($e);
"""


def sandbox(root: Path) -> dict[str, str]:
    """A directory the scripts run in: the capture shim first on PATH, a venv whose python3 is the shim
    too, env files to source, a helper both on PATH and beside the script. Returns the base environment."""
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    for d in ("shim", "venv/bin", "lib", "sub", "home"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for d in ("shim", "venv/bin"):
        p = root / d / "python3"
        p.write_text(SHIM.format(out=out))
        p.chmod(0o755)
    (root / "vars.env").write_text(
        'FROM_FILE="file value"\nexport E_EXP=1\nA="${A:-from-env-file}"\nB="$1"\n'
    )
    (root / "venv/bin/activate").write_text(
        f'VIRTUAL_ENV="{root}/venv"\nexport VIRTUAL_ENV\n_OLD_PATH="$PATH"\n'
        'PATH="$VIRTUAL_ENV/bin:$PATH"\nexport PATH\nif [ -z "${PS1:-}" ]; then :; fi\nhash -r 2>/dev/null\n'
    )
    (root / "lib/helper.sh").write_text("export HELPER=from-path\n")
    (root / "helper.sh").write_text("export HELPER=from-dir\n")
    return {
        "PATH": f"{root}/shim:{root}/lib:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "E1": "x",
        "E2": "a b",
        "LANG": "C",
    }


@dataclass
class Ran:
    launched: bool
    program: str = ""
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def run_bash(root: Path, script: Script, base: dict[str, str]) -> Ran:
    out = root / "out"
    for f in ("argv", "env"):
        (out / f).unlink(missing_ok=True)
    for f in ("gen.env",):
        (root / f).unlink(missing_ok=True)
    path = root / "s.sh"
    path.write_text(script.text)
    # as the operator runs it (./s.sh): the #! line's interpreter, its one argument, the script (what the
    # kernel does; exec'ing the file itself races with the threads that write the other sandboxes' files)
    first = script.text.split("\n", 1)[0][2:].strip()
    interp, _, rest = first.partition(" ")
    subprocess.run(
        [interp, *([rest.strip()] if rest.strip() else []), str(path), *script.args],
        env={**base, **script.env},
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )
    (root / "gen.env").unlink(missing_ok=True)
    if not (out / "env").exists():
        return Ran(False)
    words = (out / "argv").read_bytes().split(b"\0")[:-1]
    env_items = (out / "env").read_bytes().split(b"\0")[:-1]
    env = dict(item.decode("utf-8", "surrogateescape").split("=", 1) for item in env_items)
    argv = [w.decode("utf-8", "surrogateescape") for w in words]
    return Ran(True, argv[0], argv[1:], env)


@dataclass
class Verdict:
    kind: str  # proven, partly, unresolved, no-launch, disagree
    detail: str = ""


def read_static(root: Path, script: Script, base: dict[str, str]) -> Exec | str:
    try:
        ex, launched = read_exec(root / "s.sh", {**base, **script.env}, script.args)
    except UnresolvedLaunch as exc:
        return f"unresolved: {exc}"
    except InputError as exc:
        return f"no-launch: {exc}"
    if not any(e.assumed or e.survived for e in launched):
        ex.where = ex.where + " (no assumption)"
    return ex


def compare(reader: Exec | str, ran: Ran) -> Verdict:
    """Equal, or the reader says unresolved for what differs; anything else is a disagreement."""
    if isinstance(reader, str):
        if reader.startswith("unresolved") or "shell syntax error" in reader:
            # a refusal: a broken script (bash runs its lines up to the error, then exits) is not read
            return Verdict("unresolved", reader)
        if ran.launched:
            return Verdict("disagree", f"reader: {reader}; bash launched {ran.argv}")
        return Verdict("no-launch")
    if not ran.launched:
        if isinstance(reader.program, Unknown):
            return Verdict("unresolved", f"the program: {reader.program.reason}")
        if reader.where.endswith("(no assumption)"):
            return Verdict(
                "disagree", f"reader launches {reader.argv} on a path with no assumption; bash did not"
            )
        return Verdict("no-launch", "the reader's launch needs a condition bash did not meet")
    partly = False
    problems: list[str] = []
    if isinstance(reader.program, Unknown):
        partly = True
    elif reader.program != ran.program:
        problems.append(f"program {reader.program!r} != {ran.program!r}")
    if isinstance(reader.argv, Unknown):
        partly = True
    else:
        words = reader.argv[1:]
        k = 0
        for f in words:
            if f and isinstance(f[0], Unsplit):
                partly = True
                k = -1
                break
            v = join(f)
            if k >= len(ran.argv):
                problems.append(f"argv longer than bash's: {v!r}")
                break
            if isinstance(v, Unknown):
                partly = True
            elif v != ran.argv[k]:
                problems.append(f"argv[{k + 1}] {v!r} != {ran.argv[k]!r}")
            k += 1
        if k >= 0 and k != len(ran.argv) and not problems:
            problems.append(f"argv {len(words)} words, bash {len(ran.argv)}: {ran.argv}")
    for name in set(reader.env) | set(ran.env):
        if name in BASH_BOOKKEEPING or name == "OLDPWD":
            continue
        mine, theirs = reader.env.get(name), ran.env.get(name)
        if isinstance(mine, Unknown) or (mine is None and reader.others is not None):
            partly = True
        elif mine != theirs:
            problems.append(f"env {name}: reader {mine!r}, bash {theirs!r}")
    if problems:
        return Verdict("disagree", "; ".join(problems))
    return Verdict("partly" if partly else "proven")


def differential(
    seed: int, count: int, root: Path, workers: int = 2, shell: str = "bash"
) -> tuple[Counter[str], dict[str, Counter[str]], list[str]]:
    """Generate ``count`` scripts from ``seed``, run each under bash and the reader; the totals by outcome,
    by construct, and the disagreements (each with its script)."""
    rng = random.Random(seed)
    scripts = [Gen(random.Random(rng.getrandbits(64))).script() for _ in range(count)]
    if shell == "sh":  # the same scripts as #!/bin/sh: dash runs them (Ubuntu's and Debian's /bin/sh)
        for s in scripts:
            s.text = "#!/bin/sh\n" + s.text.split("\n", 1)[1]
            s.constructs.add("#!/bin/sh")
    totals: Counter[str] = Counter()
    by: dict[str, Counter[str]] = {}
    bad: list[str] = []

    def one(job: tuple[int, list[Script]]) -> list[tuple[Script, Verdict]]:
        k, batch = job
        box = root / f"w{k}"
        base = sandbox(box)
        results = []
        for s in batch:
            ran = run_bash(box, s, base)
            (box / "s.sh").write_text(s.text)
            results.append((s, compare(read_static(box, s, base), ran)))
        return results

    batches = [(k, scripts[k::workers]) for k in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        for results in pool.map(one, batches):
            for s, v in results:
                totals[v.kind] += 1
                for c in s.constructs:
                    by.setdefault(c, Counter())[v.kind] += 1
                if v.kind == "disagree":
                    bad.append(f"{v.detail}\nargs={s.args} env={s.env}\n{s.text}")
    return totals, by, bad


__all__ = ["SHIM", "Ran", "Verdict", "compare", "differential", "read_static", "run_bash", "sandbox"]
