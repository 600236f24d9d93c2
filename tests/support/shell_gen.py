"""Launcher scripts generated from a grammar of what real ``start.sh`` files and attackers write, and the
differential run that holds ``preflight --script``'s reading to real bash.

Why generated: the reader is a model of bash; reasoning about it misses cases, running bash does not. Each
script is built (seeded, so a failure reproduces) from statements real recipes use (assignments and every
export form, arrays, functions with arguments, ``set --``, ``source``, ``cd``, ``if``/``case``/``[ ]``/
``[[ ]]``, parameter expansions, ``printf -v``, ``eval``, ``IFS``) and from the tricks an attacker would
try (``trap DEBUG``, ``declare -n``, ``mapfile``, a function named ``python3``, a here-doc written then
sourced, aliases, ``hash -p``). Real bash runs it with ``python3`` replaced by a capture shim first on
``PATH`` (argv and environment as NUL-separated files); the reader's answer must equal what the shim
saw, or say "unresolved" for the part it cannot know.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from validator.errors import InputError, UnresolvedLaunch
from validator.sources.launch_script import BASH_BOOKKEEPING, Exec, read_exec
from validator.sources.shell.values import Unknown, Unsplit, join

SERVER = "-m sglang.launch_server"
VALUES = [
    "x", "'a b'", '""', '"$E1"', "$E2", "b1", "'b*'", "a:b", '"${A:-d}"', "$A", '"${C:+alt}"',
    '"${A#a}"', '"${E2%% *}"', "~/x", '"${A//a/Z}"', "'-v'", '"${A^^}"', '"${#A}"', "$1", '"$2"',
]  # fmt: skip
NAMES = ["A", "B", "C", "SGLANG_ENABLE_FP8_LM_HEAD", "E1"]


@dataclass
class Script:
    text: str
    constructs: set[str] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


class Gen:
    """One script: a few statements, then a launch."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.used: set[str] = set()

    def pick(self, xs: list[str]) -> str:
        return xs[self.r.randrange(len(xs))]

    def val(self) -> str:
        return self.pick(VALUES)

    def name(self) -> str:
        return self.pick(NAMES)

    def tag(self, *names: str) -> None:
        self.used.update(names)

    def statement(self, depth: int = 0) -> str:
        kinds = [
            self.assign, self.assign, self.export, self.export, self.array, self.assoc, self.cond,
            self.case, self.function, self.positional, self.source, self.cd, self.ifs, self.printf_v,
            self.eval_, self.attack, self.arith, self.indirect, self.prefix, self.options, self.loop,
            self.bash_vars, self.redirect,
        ]  # fmt: skip
        if depth > 1:
            kinds = [self.assign, self.export, self.array]
        return self.r.choice(kinds)(depth)

    def assign(self, depth: int) -> str:
        n = self.name()
        form = self.r.randrange(5)
        self.tag("assignment")
        if form == 0:
            return f"{n}={self.val()}"
        if form == 1:
            self.tag("+=")
            return f"{n}+={self.val()}"
        if form == 2:
            self.tag("${V:=d}")
            return f': "${{{n}:={self.val()}}}"'
        if form == 3:
            self.tag("unset")
            return f"unset {n}"
        return f"{n}={self.val()} {self.val()}={self.val()}"

    def export(self, depth: int) -> str:
        n = self.name()
        forms = [
            (f"export {n}={self.val()}", "export"),
            (f"export {n}", "export"),
            (f'export "{n}={self.r.choice(["0", "1", "a b"])}"', "export quoted"),
            (f"export -n {n}", "export -n"),
            (f"declare -x {n}={self.val()}", "declare -x"),
            (f"declare +x {n}", "declare +x"),
            (f"set -a; {n}={self.val()}; set +a", "set -a"),
            (f"readonly {n}={self.val()}", "readonly"),
        ]
        text, tag = self.r.choice(forms)
        self.tag(tag)
        return text

    def array(self, depth: int) -> str:
        self.tag("arrays")
        forms = [
            f"F=({self.val()} {self.val()})",
            f"F+=({self.val()} --flag {self.val()})",
            f"F[3]={self.val()}",
            "F=()",
            '[[ -n "$A" ]] && F+=($A)',
            f'G=("${{F[@]}}" {self.val()})',
        ]
        return self.r.choice(forms)

    def assoc(self, depth: int) -> str:
        self.tag("declare -A")
        keys = self.r.sample(["k1", "k2", "PORT", "MEM", "zz", "a"], 3)
        body = "; ".join(f"M[{k}]={self.val()}" for k in keys)
        loop = self.r.choice([
            'for k in "${!M[@]}"; do A+="$k,"; done',
            'for k in "${!M[@]}"; do printf -v "V_$k" \'%s\' "${M[$k]}"; export "V_$k"; done',
            'B="${M[k1]-none}"',
            'C="${#M[@]}"',
        ])  # fmt: skip
        return f"declare -A M=(); {body}; {loop}"

    def cond(self, depth: int) -> str:
        self.tag("if/[ ]/[[ ]]")
        tests = [
            f'[ "$A" == {self.pick(["b*", "x", "a"])} ]',
            f"[[ $A == {self.pick(['b*', 'x', 'a*', '?'])} ]]",
            f'[[ "$A" = "{self.pick(["b*", "x"])}" ]]',
            '[ -n "$C" ]',
            "[ -z $C ]",
            '[[ -n "${B:-}" && $A != x ]]',
            "[ -d sub ]",
            "[ -f missing.env ]",
            '[ "$E1" = x -a -n "$E2" ]',
            "grep -q zz /nonexistent 2>/dev/null",
            "test $# -gt 0",
            "[[ $A == $E1 ]]",
            "! [ -f vars.env ]",
        ]
        t = self.r.choice(tests)
        body = self.statement(depth + 1)
        other = self.statement(depth + 1)
        form = self.r.randrange(4)
        if form == 0:
            return f"if {t}; then\n  {body}\nelse\n  {other}\nfi"
        if form == 1:
            return f"{t} && {{ {body}; }}"
        if form == 2:
            return f"{t} || {body}"
        return f'if {t}; then {body}; elif [ -n "$B" ]; then {other}; fi'

    def case(self, depth: int) -> str:
        self.tag("case")
        pats = [self.pick(["a", "b*", "x|y", '"$E1"', "$C", "*", "?", "[ab]*", "'b*'"]) for _ in range(3)]
        ends = [self.pick([";;", ";;", ";&", ";;&"]) for _ in range(3)]
        items = "\n".join(f"  {p}) {self.statement(depth + 1)} {e}" for p, e in zip(pats, ends, strict=True))
        return f'case "{self.pick(["$A", "$E1", "$1", "$E2"])}" in\n{items}\nesac'

    def function(self, depth: int) -> str:
        self.tag("functions")
        body = self.pick([
            'local A="$1"; B="$A-$#"',
            'C="$*"; shift; B="${1:-none}"',
            "export SGLANG_ENABLE_FP8_LM_HEAD=\"$1\"",
            'local B; B=inner; A="$B"',
            'return 3',
        ])  # fmt: skip
        call = f"f {self.val()} {self.val()}"
        if self.r.random() < 0.3:
            call = 'f "$@" || A=failed'
        return f"f() {{ {body}; }}\n{call}"

    def positional(self, depth: int) -> str:
        self.tag("set --/shift")
        return self.pick(
            [f"set -- {self.val()} {self.val()}", "shift", 'set -- "$@" extra', "shift 2 || true", "set --"]
        )

    def source(self, depth: int) -> str:
        self.tag("source")
        return self.pick([
            "source vars.env",
            ". ./vars.env",
            "set -a; . ./vars.env; set +a",
            "source helper.sh",
            "source venv/bin/activate",
            "source ./missing.env 2>/dev/null",
            "[ -f missing.env ] && source missing.env",
            "source vars.env one two",
        ])  # fmt: skip

    def cd(self, depth: int) -> str:
        self.tag("cd")
        return self.pick([
            "cd sub", "cd ..", 'cd "$(dirname "$0")"', "cd /nonexistent 2>/dev/null || true",
            'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"', "cd sub && cd ..",
        ])  # fmt: skip

    def ifs(self, depth: int) -> str:
        self.tag("IFS")
        return self.pick(["IFS=:", "IFS=' '", "unset IFS", "IFS=$'\\n'", 'IFS=":b"', "IFS="])

    def printf_v(self, depth: int) -> str:
        self.tag("printf -v")
        return self.pick([
            f"printf -v B '%s-%s' {self.val()} x",
            "R=A; printf -v \"$R\" '%s' set-by-printf",
            f"printf -v SGLANG_ENABLE_FP8_LM_HEAD '%s' {self.pick(['0', '1'])}",
            "printf -v C '%s' \"$(date)\"",
        ])  # fmt: skip

    def eval_(self, depth: int) -> str:
        self.tag("eval")
        return self.pick([
            f"eval \"B={self.pick(['x', 'y'])}\"",
            "eval 'export SGLANG_ENABLE_FP8_LM_HEAD=0'",
            'eval "$E2"',
            "eval \"$(echo A=evald)\"",
        ])  # fmt: skip

    def attack(self, depth: int) -> str:
        choice = self.pick([
            "trap 'SGLANG_ENABLE_FP8_LM_HEAD=0' DEBUG",
            "mapfile -t F < /dev/null",
            "declare -n N=A; N=via-ref",
            "python3() { echo shadowed; }",
            "exec() { echo shadowed; }",
            "alias python3=true",
            "shopt -s expand_aliases; alias python3=true",
            "hash -p /bin/true python3",
            "cat > gen.env <<EOF\nexport SGLANG_ENABLE_FP8_LM_HEAD=0\nEOF\nsource ./gen.env",
            "read -r B <<< \"from-read\"",
            "command -v python3 >/dev/null && B=has",
            "builtin export Q=1",
            "builtin export Q=$E2",
            "command export Q=$E2 SGLANG_ENABLE_FP8_LM_HEAD",
            "trap 'echo bye' EXIT",
            "trap 'exec python3 -m sglang.launch_server --from-trap' EXIT",
            "trap 'exec python3 -m sglang.launch_server --from-trap' EXIT; trap - EXIT",
            "env() { echo shadowed; }",
            "awk 'BEGIN { print \"export SGLANG_ENABLE_FP8_LM_HEAD=0\" > \"gen.env\" }'; source ./gen.env",
        ])  # fmt: skip
        self.tag("attack:" + choice.split()[0].split("(")[0])
        return choice

    def arith(self, depth: int) -> str:
        self.tag("arithmetic")
        return self.pick(["N=3; (( N > 2 )) && B=big", "N=$(( ${#A} + 1 )); C=$N", "(( 0 )) || C=zero"])

    def indirect(self, depth: int) -> str:
        self.tag("${!v}")
        return self.pick(['R=E1; B="${!R}"', 'R=A; C="${!R:-empty}"', 'R=NOPE; B="${!R-unset}"'])

    def prefix(self, depth: int) -> str:
        self.tag("VAR=x cmd")
        return self.pick(["B=temp true", "A=temp f2() { :; }", "A=tmp eval 'B=\"$A\"'", "C=1 :"])

    def options(self, depth: int) -> str:
        self.tag("set -e/-u")
        return self.pick(["set -e", "set -u", "set -euo pipefail", "set +e", "set -f"])

    def loop(self, depth: int) -> str:
        self.tag("loops")
        return self.pick([
            'for w in a "b c" $E2; do A+="$w"; done',
            'while [[ $# -gt 0 ]]; do case "$1" in --p) B="${2:-}"; shift; shift || true ;; '
            "*) shift ;; esac; done",
            "i=0; while (( i < 3 )); do C+=x; i=$((i + 1)); done",
            'while getopts "p:" o; do B=$OPTARG; done',
            'while getopts ":p:x" o; do case $o in p) B="$OPTARG" ;; x) C=x ;; *) C="bad-${OPTARG:-}" ;; '
            "esac; done; shift $((OPTIND - 1))",
            "let N=2+3 M=N*2; C=$M",
            "n=0; (( n++ )) || C=was-zero; B=$n",
            "for ((i = 0; i < 2; i++)); do :; done",
            'for w in "$@"; do [ "$w" = a ] && break; C+="$w"; done',
            "until [ -n \"${C:-}\" ]; do C=filled; done",
        ])  # fmt: skip

    def bash_vars(self, depth: int) -> str:
        self.tag("bash's variables")
        return self.pick([
            'B="$OPTIND-$PS4"', 'C="$SHLVL"', 'B="${TERM:-none}"', 'A="$HOSTNAME"', "B=$BASH_VERSION",
            'C="$OLDPWD"',
        ])  # fmt: skip

    def redirect(self, depth: int) -> str:
        self.tag("redirections")
        return self.pick([
            "exec >/dev/null 2>&1", "exec 3>&1", "{ A=braced; } >/dev/null", 'echo "$A" >&2',
            "B=$(echo out; echo err >&2)", "cat <<EOF >/dev/null\n$A\nEOF\n",
        ])  # fmt: skip

    def launch(self) -> str:
        args = " ".join(
            self.pick([
                '--model-path "$A"', "--port $B", '"${F[@]}"', "${C:-def}", '"${C:=x}"', '--x="${A#a}"',
                '"${A%b}"', '"${A/a/z}"', '"${#F[@]}"', '"$@"', "$*", '"$1"', "--lit 'a b'", '"$E2"',
                "$E2", '"${M[k1]}"', '"$(dirname "$A")"', '"$(pwd)"', '"$PWD"', "$((1 + 2))",
                '--q="${A^^}"', "$F", '"${G[@]}"',
            ])
            for _ in range(self.r.randrange(1, 5))
        )  # fmt: skip
        form = self.r.randrange(10)
        cmd = f"python3 {SERVER} {args}"
        tags = ["exec", "plain", "env", "env -u", "VAR=x exec", "command", "array", "function", "env -i"]
        tags.append("nohup &")
        self.tag("launch:" + tags[form])
        if form == 0:
            return f"exec {cmd}"
        if form == 1:
            return cmd
        if form == 2:
            return f"exec env K={self.val()} {cmd}"
        if form == 3:
            return f"env -u E1 {cmd}"
        if form == 4:
            return f"K={self.val()} exec {cmd}"
        if form == 5:
            return f"command {cmd}"
        if form == 6:
            return f'CMD=(python3 {SERVER} {args}); exec "${{CMD[@]}}"'
        if form == 7:
            return f'launch() {{ exec python3 {SERVER} "$@"; }}; launch {args}'
        if form == 8:
            return f'exec env -i PATH="$PATH" {cmd}'
        return f"nohup {cmd} >/dev/null 2>&1 &\nwait"

    def script(self) -> Script:
        n = self.r.randrange(2, 9)
        header = self.pick(["#!/bin/bash"] * 6 + ["#!/bin/bash -e", "#!/usr/bin/env bash", "#!/bin/bash -eu"])
        if header != "#!/bin/bash":
            self.tag("#! line")
        lines = [header] + [self.statement() for _ in range(n)] + [self.launch()]
        words = ["a", "b c", "", "x*", "--p", "-p", "-x", "-pv", "-q", "--"]
        args = [self.pick(words) for _ in range(self.r.randrange(0, 4))]
        env = {}
        if self.r.random() < 0.3:
            env["A"] = self.pick(["preset", "a b"])
        return Script("\n".join(lines) + "\n", self.used, args, env)


# -- the sandbox --------------------------------------------------------------------------------------------

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
        if isinstance(mine, Unknown):
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
    from concurrent.futures import ThreadPoolExecutor

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


__all__ = ["Gen", "Script", "compare", "differential", "os"]
