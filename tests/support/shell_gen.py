"""Launcher scripts generated from a grammar of what real ``start.sh`` files and attackers write, for the
differential run (``tests/support/shell_differential.py``) that holds ``preflight --script``'s reading to
real bash and dash.

Why generated: the reader is a model of bash; reasoning about it misses cases, running bash does not. Each
script is built (seeded, so a failure reproduces) from statements real recipes use (assignments and every
export form, arrays, functions with arguments, ``set --``, ``source``, ``cd``, ``if``/``case``/``[ ]``/
``[[ ]]``, parameter expansions, ``printf -v``, ``eval``, ``IFS``) and from the tricks an attacker would
try (``trap DEBUG``, ``declare -n``, ``mapfile``, a function named ``python3``, a here-doc written then
sourced, aliases, ``hash -p``), each statement tagged with the construct it exercises.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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
            self.bash_vars, self.redirect, self.runtime,
        ]  # fmt: skip
        if depth > 0:  # what is written on several lines, or defines a function, stays at the top level
            kinds = [k for k in kinds if k != self.runtime]
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
            "exec 4>/dev/null", "exec 4>&-", "if true >&4; then A=fd4; else A=nofd4; fi 2>/dev/null",
            "{ exec 4>&-; } 4>/dev/null", 'B=$(echo x 2>/dev/null >&4 || echo bad)',
            'quiet() { echo out; A=quiet; } >/dev/null\nB="[$(quiet)]"; quiet',
        ])  # fmt: skip

    def runtime(self, depth: int) -> str:
        """What is known only at run time, made unknown exactly where it reaches (one kind, so that the
        rest of the grammar keeps its share)."""
        return self.r.choice([self.sourced_input, self.unread_source, self.runtime_loop, self.read_])(depth)

    def read_(self, depth: int) -> str:
        """``read`` of a here-string or here-document: known text split as bash splits it, or unknown."""
        choice = self.pick([
            'read -r -a F <<< "${E1:-}"',
            'read -ra F <<< "  $A  b\\ c "',
            "read -a F <<< ' x\\ y z '",
            'read -r B C <<< "  one two  three  "',
            "read B C <<'EOF'\n a\\ b c\\\nd  \nsecond\nEOF",
            'IFS= read -r B <<< "  $A  "',
            'read <<< " $A "; B="$REPLY"',
            "read -r B < vars.env",
            "read B <<'EOF'\nEOF",
            "read -r -d '' B <<'EOF' || true\n x  y\n$A\nEOF",
            'IFS=, read -r B C <<< "$A,, x,"', 'IFS=", " read -ra F <<< " ,$A , b,"',
            "IFS=: read B C <<< 'a\\:b:c\\ '",
        ])  # fmt: skip
        self.tag("read")
        return choice

    def sourced_input(self, depth: int) -> str:
        """A file sourced from the command's own input: a here-document (static, or with expansions, read
        as unknown), a here-string, a process substitution."""
        choice = self.pick([
            ". /dev/stdin <<'EOF'\nA=from-heredoc\nexport B=\"$E1-$A\"\nEOF",
            ". /dev/stdin <<EOF\nA=plain-heredoc\nEOF",
            "source /dev/stdin <<EOF\nA=$E2\nEOF",
            ". /dev/stdin <<-'EOF'\n\tC=tabbed\n\tEOF",
            'source /proc/self/fd/0 <<< "C=herestring"',
            "source /dev/fd/0 <<< 'export SGLANG_ENABLE_FP8_LM_HEAD=0'",
            'source /dev/stdin <<< "$E2"',
            "source <(echo A=procsub)",
            "echo A=piped | source /dev/stdin",
            "source /dev/stdin < vars.env",
        ])  # fmt: skip
        self.tag("sourced input")
        return choice

    def unread_source(self, depth: int) -> str:
        """A sourced file absent here (and, in the sandbox, at run time too): every variable unknown from
        there on, defaults included."""
        self.tag("unread source")
        return self.pick([
            'source ./site-absent.env; A="${A:-dflt}"',
            "source site-absent.env 2>/dev/null\n"
            'export SGLANG_ENABLE_FP8_LM_HEAD="${SGLANG_ENABLE_FP8_LM_HEAD:-1}"',
            '. ./site-absent.env || B=failed; C="${C-unset}"',
            'source "$E1.env" 2>/dev/null; unset B; B="${B:-reset}"',
        ])  # fmt: skip

    def runtime_loop(self, depth: int) -> str:
        """What changes only what it can: a loop over a glob of a directory the script made (its words known
        only at run time), a cache probe function called or never called, compgen -G, ${v//\\//-}."""
        choice = self.pick([
            'mkdir -p snap/x; for d in snap/*/; do [ -d "$d" ] || continue; B="$d"; done',
            'mkdir -p snap/y; for d in "$PWD"/snap/*/; do C+="${d##*/snap/}"; break; done',
            'probe() { local s; for s in "$HOME"/cache/*/; do [ -d "$s" ] || continue; return 0; done\n'
            "  return 1\n}",
            'probe() { local s; mkdir -p "$HOME/cache"; for s in "$HOME"/cache/*/; do\n'
            '  [[ -f "$s/c" ]] && return 0; done; return 1; }\nif probe; then C=cached; else C=cold; fi',
            'mkdir -p snap/z; for d in snap/*/; do compgen -G "$d"/*.json >/dev/null && A=json; done',
            'compgen -G "sub/*" >/dev/null && B=has-sub || B=no-sub',
            'M=inclusion/Ling-3; B="${M//\\//--}"; C="${M/\\//}"',
            'mkdir -p snap/w; for d in snap/*/; do eval "A=$d"; done',
            'mkdir -p snap/v; n=0; for d in snap/*/; do n=$((n + 1)); done; C="$n"',
            'while read -r line; do F+=("$line"); B="$line"; done < vars.env',
            'n=0; while read -r k v; do [ "$k" = export ] && n=$((n + 1)); done < vars.env; C="$n-$A"',
            'until ! read -r line; do [[ $line == *FROM* ]] && break; done < vars.env; C="${line:-none}"',
        ])  # fmt: skip
        self.tag("runtime loop" if "for " in choice or "read" in choice else "compgen/${v//\\//}")
        return choice

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


__all__ = ["SERVER", "Gen", "Script"]
