"""Constructs the generated differential run (``tests/test_shell_differential.py``) rarely or never writes,
each in a hand-written script run by real bash and by dash (``#!/bin/sh``) and read by the reader: the
reader's value of ``$R`` (the launch's last word) equals what the shell exec'd, or the reader refuses the
path for the reason named. Each case pins the shell's own answer too, so that a case means what it says.

Found by a coverage pass over ``validator/sources/launch/shell/``: the branches these reach ran in no
other test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.shell_differential import compare, read_static, run_bash, sandbox
from tests.support.shell_gen import Script
from validator.sources.launch.shell.values import Unknown, join


@dataclass(frozen=True)
class Refused:
    """The reader says it cannot know the launch (unresolved), for this reason."""

    why: str


NOLAUNCH = None  # the shell starts nothing, and the reader finds no path that does
SYNTAX = Refused("shell syntax error")  # dash refuses the script (bash's syntax); so does the reader
PARTLY = Refused("")  # the reader knows the launch but for $R, which it says is known only at run time
Expect = str | Refused | None

# name: (script body before `exec python3 ... --x "$R"`, bash's outcome, dash's outcome)
CASES: dict[str, tuple[str, Expect, Expect]] = {
    # arithmetic
    "arith * / %": ("R=$(( 3 * 4 / 5 % 7 ))", "2", "2"),
    "arith && ||": ("R=$(( 2 > 1 && 0 || 5 ))", "1", "1"),
    "arith short-circuit": ("R=$(( 0 && 1/0 )),$(( 1 || 1/0 ))", "0,1", "0,1"),
    "arith comparisons": (
        "R=$(( 4 < 5 )),$(( 4 <= 4 )),$(( 5 >= 6 )),$(( 1 == 1 )),$(( 1 != 1 ))",
        "1,1,0,1,0",
        "1,1,0,1,0",
    ),
    "arith unary, negative / and %": (
        "R=$(( -7 / 2 )),$(( -7 % 2 )),$(( !0 )),$(( +3 ))",
        "-3,-1,1,3",
        "-3,-1,1,3",
    ),
    "arith parentheses": ("R=$(( (1 + 2) * 3 ))", "9", "9"),
    # break/continue N past the enclosing loops: the outermost (red team 19: read as the script's end)
    "break 2 in one loop": ("R=a\nfor i in 1 2; do R=$R$i; break 2; done", "a1", "a1"),
    "continue 3 in two loops": (
        "R=a\nfor i in 1 2; do for j in x; do R=$R$i$j; continue 3; done; R=no; done",
        "a1x2x",
        "a1x2x",
    ),
    # red team 21: a function's body and a bash subshell have no loops of their own (a break there does
    # nothing, status 0), $( ) keeps them (a break ends it), dash's subshell ends; the reader broke the
    # caller's loop (`f() { break; }`: the rest of the body, an --enable-fp32-lm-head, read as never run)
    "break in a function called in a loop": (
        "R=a\nf() { break; }\nfor i in 1 2; do R=$R$i; f; R=${R}x; done",
        "a1x2x",
        "a1x2x",
    ),
    "continue in a function called in a loop": (
        "R=a\nf() { continue 2; }\nfor i in 1 2; do R=$R$i; f; R=${R}x; done",
        "a1x2x",
        "a1x2x",
    ),
    "break N in a function's own loop": (
        "R=a\nf() { for k in m n; do R=$R$k; break 3; done; R=${R}F; }\nfor i in 1 2; do f; R=$R$i; done",
        "amF1mF2",
        "amF1mF2",
    ),
    "break in a subshell in a loop": (
        "R=a\nfor i in 1 2; do R=$R$i; (break; exit 3) && R=${R}x; done",
        "a12",
        Refused("where dash and bash differ"),
    ),
    "break in $( ) in a loop": ("R=a\nfor i in 1 2; do R=$R$i$(break; echo no)x; done", "a1x2x", "a1x2x"),
    "break outside a loop": ("R=a\nbreak\nset -e\ncontinue 2\nR=${R}b", "ab", "ab"),
    # red team 21: /proc/self is the shell running the script (its cwd here: the sandbox), never the
    # reader's own process (whose cwd held no such name: a test answered from there, a wrong PASS)
    "a test under /proc/self": ("if [ -d /proc/self/cwd/out ]; then R=y; else R=n; fi", PARTLY, PARTLY),
    "cd under /proc/self": (
        "cd /proc/self/cwd/out\nif [ -d ../out ]; then R=y; else R=n; fi",
        PARTLY,
        PARTLY,
    ),
    # red team 21: what a builtin lists, or an error 2>&1 sends, reaches $( ): it was read as empty (a
    # test of it a certain wrong branch: `[ -n "$X" ] && X=(--enable-fp32-lm-head)` a wrong PASS)
    "export -p in $( )": (
        'X=$(export -p)\nif [ -n "$X" ]; then R=y; else R=n; fi',
        PARTLY,
        Refused("export with an option"),
    ),
    "set in $( )": ('X=$(set)\nif [ -n "$X" ]; then R=y; else R=n; fi', PARTLY, PARTLY),
    "umask in $( )": ('X=$(umask)\nif [ -n "$X" ]; then R=y; else R=n; fi', PARTLY, PARTLY),
    "declare -p in $( )": (
        'X=$(declare -p)\nif [ -n "$X" ]; then R=y; else R=n; fi',
        PARTLY,
        Refused("declare"),
    ),
    "trap in $( )": ("trap 'echo' EXIT\nX=$(trap)\nif [ -n \"$X\" ]; then R=y; else R=n; fi", PARTLY, PARTLY),
    "an error 2>&1 in $( )": (
        'X=$(cd /nonexistent 2>&1)\nif [ -n "$X" ]; then R=y; else R=n; fi',
        PARTLY,
        PARTLY,
    ),
    "declare -p of a name not set": (
        "if declare -p NOPE >/dev/null 2>&1; then R=y; else R=n; fi",
        "n",
        Refused("declare"),
    ),
    # red team 21 (and shell10, c3ffa08): a function defined with redirections opens them at each call
    # (bash and dash); they were never opened (`f() { ...; } >/nonexistent/x`: the call read as
    # succeeding), and one the grammar puts around the definition was opened when it was defined
    "a function defined with a redirection that fails": (
        "f() { true; } >/nonexistent/x\nif f; then R=y; else R=n; fi",
        "n",
        Refused("fails, where dash and bash differ"),
    ),
    "a function defined >&2, called in $( )": ('log() { echo "$@"; } >&2\nR=a$(log hi)', "a", "a"),
    "a function defined with two redirections": (
        "f() { R=b; } >/dev/null 2>/dev/null\nR=a\nf",
        "b",
        "b",
    ),
    # red team 21: a return in $( ) ends the substitution, not the function (the rest of f read as never
    # run); bash's return outside a function is status 2 (dash ends the shell); set -e inside $( ) holds
    # there, and dash's $( ) keeps the caller's (the script ends where bash goes on)
    "return in $( ) in a function": ("f() { X=$(return 5); R=after$?; }\nR=a\nf", "after5", "after5"),
    "return outside a function": (
        "R=a\nX=$(return 2 2>/dev/null); R=$R$?",
        "a2",
        Refused("return outside a function, where dash and bash differ"),
    ),
    "set -e inside $( )": ("R=a\nX=$(set -e; false; echo b)\nR=$R$X", "a", "a"),
    "set -e and a failing $( )": ("set -e\nR=a\nX=$(false; echo b)\nR=$R$X", "ab", NOLAUNCH),
    "read from a here-document": ("read x y <<'EOF'\n  a  b\\ c  \nEOF\nR=\"$x|$y\"", "a|b c", "a|b c"),
    # an and-or list after a here-document's start: the grammar nests it into the redirection, right first
    "cmd <<EOF || ... under set -e": ("set -e\nR=no\nfalse <<'EOF' || R=ok\nx\nEOF", "ok", "ok"),
    "cmd <<EOF || a && b is left to right": ("R=no\ntrue <<'EOF' || R=mid && R=yes\nx\nEOF", "yes", "yes"),
    "a here-document's first line keeps its leading white space": (
        "IFS= read -r R <<'EOF'\n  \tlead\nEOF",
        "  \tlead",
        "  \tlead",
    ),
    # white space in double quotes before an expansion or the closing quote (the grammar's tokens hold it)
    "white space inside double quotes": (
        'A=x; B=y; C="$A $B"; R="$C|  $A  |  |${A}\t${B}|a  $(echo b)"',
        "x y|  x  |  |x\ty|a  b",
        "x y|  x  |  |x\ty|a  b",
    ),
    # red team 20: a redirection bash cannot open: the command does not run and fails (bash: status 1; dash
    # differs, not modelled); whether it opens is looked up as the script's owner, else known at run time
    "a redirection bash cannot open": (
        "R=a\nif true > ./nodir/x; then R=opened; else R=failed; fi 2>/dev/null\n"
        '{ R="$R,inner"; } < ./missing 2>/dev/null\nR="$R:$?"',
        "failed:1",
        Refused("fails, where dash and bash differ"),
    ),
    "an assignment alone on the line before a command, its redirection failing": (
        'R=kept > ./nodir/x 2>/dev/null\nR="$R:$?"',
        Refused("misreads a redirection of assignments"),
        Refused("misreads a redirection of assignments"),
    ),
    "set -e ends the script at a redirection that fails": (
        "set -e\nR=x\ntrue > ./nodir/x",
        NOLAUNCH,
        Refused("fails, where dash and bash differ"),
    ),
    "a redirection that opens": (
        "if true < ./vars.env > /dev/null; then R=opened; else R=failed; fi",
        "opened",
        "opened",
    ),
    "a redirection into a directory the script made: known at run time": (
        "mkdir -p d\nif true > d/x; then R=opened; else R=failed; fi",
        PARTLY,
        PARTLY,
    ),
    # descriptors the script opens and closes (``exec 3>f``, ``exec 3>&-``): ``>&N`` on one that is not
    # open fails as a file that cannot be opened does (bash: "Bad file descriptor", status 1, nothing run);
    # one the script never opened may be inherited: known only at run time
    "a descriptor exec opened is open for >&N": (
        "exec 3>/dev/null\nif true >&3; then R=open; else R=bad; fi",
        "open",
        "open",
    ),
    "a descriptor exec closed is a bad descriptor for >&N": (
        "exec 3>/dev/null\nexec 3>&-\nif true >&3; then R=open; else R=bad; fi 2>/dev/null",
        "bad",
        Refused("fails, where dash and bash differ"),
    ),
    "a group whose <&N is closed does not run": (
        "exec 3>/dev/null\nexec 3>&-\nR=a\nif { R=ran; } <&3; then R=$R,open; else R=$R,bad; fi 2>/dev/null",
        "a,bad",
        Refused("fails, where dash and bash differ"),
    ),
    "a descriptor moved with N>&M-: M is closed": (
        "exec 3>/dev/null\nexec 4>&3-\nif true >&3; then R=open; else R=bad; fi 2>/dev/null\n"
        "if true >&4; then R=$R,4open; fi",
        "bad,4open",
        Refused("a moved descriptor"),  # dash: "Bad fd number", a syntax error
    ),
    "an exec whose redirection fails changes no descriptor": (
        "exec 3>/dev/null\nexec 3>&- 4>./nodir/x 2>/dev/null\nif true >&3; then R=open; else R=bad; fi",
        "open",
        Refused("fails, where dash and bash differ"),
    ),
    "a command's redirections are put back when it ends": (
        "exec 3>/dev/null\n{ exec 3>&-; } 3>/dev/null\nif true >&3; then R=open; else R=bad; fi 2>/dev/null",
        "open",
        "open",
    ),
    "a command's words are expanded before its redirections open": (
        'exec 3>&-\nR="$(echo "$(if true >&3; then echo open; else echo bad; fi 2>/dev/null)" 3>/dev/null)"',
        "bad",
        Refused("fails, where dash and bash differ"),
    ),
    # a function's own redirections (``f() { ...; } >&2``) are made at each call, never at its definition
    "a function's redirections are made at each call": (
        "exec 3>&-\nf() { if true >&3; then R=open; else R=bad; fi; } 3>/dev/null\nR=x\nf",
        "open",
        "open",
    ),
    "a function whose redirection fails does not run (status 1)": (
        'f() { R=ran; } > ./nodir/x\nR=a\nf 2>/dev/null || R="$R,failed"',
        "a,failed",
        Refused("fails, where dash and bash differ"),
    ),
    "a function's output redirected at its definition does not reach $(...)": (
        'f() { echo hi; } >/dev/null\nR="[$(f)]"',
        "[]",
        "[]",
    ),
    "command exec keeps its redirections, builtin exec does not": (
        "exec 3>/dev/null 4>/dev/null\ncommand exec 3>&-\nbuiltin exec 4>&-\n"
        "if true >&3; then R=3open; else R=3bad; fi 2>/dev/null\nif true >&4; then R=$R,4open; fi",
        "3bad,4open",
        Refused("builtin in a /bin/sh script"),
    ),
    "a descriptor the script never opened: known only at run time": (
        "if true >&5; then R=open; else R=bad; fi 2>/dev/null",
        PARTLY,
        PARTLY,
    ),
    "echo with its standard output closed: its status known only at run time": (
        "if echo x >&-; then R=ok; else R=failed; fi 2>/dev/null",
        PARTLY,
        PARTLY,
    ),
    "a descriptor bash allocates ({fd}>file): not modelled, never a command word": (
        "exec {fd}>/dev/null\nR=$fd",
        Refused("a descriptor bash allocates"),
        Refused("a descriptor bash allocates"),
    ),
    "a group run with its standard output closed: not modelled": (
        "R=a\n{ R=x; } >&-",
        Refused("standard input, output or error closed"),
        Refused("standard input, output or error closed"),
    ),
    # ${v:=WORD} with "$@": bash joins the words with a space whatever IFS is, dash with IFS's first
    'assign default from "$@"': ('set -- a b c\n: "${R:="$@"}"', "a b c", "a b c"),
    'assign default from "$@", IFS=:': ('set -- a b c\nIFS=:\n: "${R:="$@"}"', "a b c", "a:b:c"),
    'default "${R:-$@}" (the grammar gives $@ as a word)': (
        'set -- a b c\nR="${R:-$@}"',
        Refused("an expansion the grammar reads as text"),
        Refused("an expansion the grammar reads as text"),
    ),
    "assign default from a bare $@, IFS=:": (
        "set -- a b c\nIFS=:\n: ${R:=$@}",
        Refused("an expansion the grammar reads as text"),
        Refused("an expansion the grammar reads as text"),
    ),
    "arith hex": ("R=$(( 0x1f ))", "31", "31"),
    "arith octal": ("R=$(( 010 ))", Refused("octal arithmetic"), Refused("octal arithmetic")),
    "arith 64-bit wrap": ("R=$(( 9223372036854775807 + 1 ))", "-9223372036854775808", "-9223372036854775808"),
    "arith $(...) inside": ("R=$(( $(echo 3) + 1 ))", "4", "4"),
    "arith ?: skips the untaken assignment": (
        "a=5; R=$(( a ? 1 : 2 )); R=$R$(( 0 ? a=1 : 3 )),$a",
        "13,5",
        Refused("an assignment inside arithmetic in a /bin/sh script"),
    ),
    "arith ?: on a run-time value": (
        "U=$(date +%N); R=$(( U ? 1 : 2 ))",
        Refused("?: on a value known only at run time"),
        Refused("?: on a value known only at run time"),
    ),
    "arith compound assignments": (
        "a=5; (( a += 2, a *= 3, a -= 1, a /= 2, a %= 7 )); R=$a",
        "3",
        Refused("(( )) in a /bin/sh script"),
    ),
    "arith ++ and --": ("a=5; (( a++ )); (( --a )); (( ++a )); R=$a$(( a-- ))$a", "665", Refused("(( ))")),
    "arith ++ under dash": ("a=1; R=$(( a++ ))", "1", Refused("++ or -- in a /bin/sh script")),
    "arith pre-++ under dash": ("R=$(( ++a ))", "1", Refused("++ or -- in a /bin/sh script")),
    "arith ++ of a number": ("R=$(( ++3 ))", Refused("++ of a non-variable"), Refused("++ or --")),
    "arith a name's value read as arithmetic": (
        "a=b; b=3; R=$(( a + 1 ))",
        "4",
        Refused("arithmetic: a='b' in a /bin/sh script"),  # dash: Illegal number
    ),
    "arith a name's value, a number": ("a=-3; R=$(( a + 1 ))", "-2", "-2"),
    "arith a name's value, empty": ("a=; R=$(( a + 1 ))", "1", "1"),
    "arith a name's value, padded": ("a=' 3'; R=$(( a + 1 ))", "4", Refused("a=' 3' in a /bin/sh script")),
    "arith a name's value, run-time": (
        "U=$(date +%N); a=U; R=$(( a + 1 ))",
        PARTLY,
        Refused("a='U' in a /bin/sh script"),
    ),
    "arith unset under set -u": (
        "set -u; R=$(( nope ))",
        NOLAUNCH,
        Refused("nope unset under set -u in a /bin/sh script"),  # dash reads 0
    ),
    "arith division by zero": ("R=$(( 1/0 ))", Refused("division by zero"), Refused("division by zero")),
    "arith recursion": ("a=a; R=$(( a ))", Refused("recursion"), Refused("a='a'")),
    "arith unknown operator": ("R=$(( 1 << 2 ))", Refused("operator '<'"), Refused("operator '<'")),
    "let with a $ left in its text": ("b=3; let 'a=$b'; R=$a", Refused("arithmetic 'a=$b'"), Refused("let")),
    "[[ -lt ]] with a quoted $": (
        "b=3; [[ 1 -lt '$b' ]] && R=y",
        Refused("arithmetic '$b'"),
        Refused("[[ ]] in a /bin/sh script"),
    ),
    "let ?: without :": ("let '1 ? 2'; R=x", Refused("?: without :"), Refused("let")),
    "let unclosed (": ("let '(1'; R=$?", Refused("arithmetic: parentheses"), Refused("let")),
    "let trailing operator": ("let '1 +'; R=$?", Refused("arithmetic: syntax"), Refused("let")),
    "let two numbers": ("let '1 2'; R=$?", Refused("arithmetic: syntax"), Refused("let")),
    "substring offset ${n}": ("v=abcdef; n=2; R=${v:${n}}", "cdef", Refused("in a /bin/sh script (bash's)")),
    "substring offset an expression": ("v=abcdef; n=1+1; R=${v:${n}:2}", "cd", Refused("bash's")),
    "substring offset $(...)": ("v=abcdef; R=${v:$(echo 3)}", "def", Refused("bash's")),
    "substring offset a name": ("v=abcdef; n=2; R=${v:n:2}", "cd", Refused("bash's")),
    # patterns (case, ${v#p}, ${v/p/r})
    "pattern [ alone is literal": ("x='a[b'; case $x in a[b) R=lit ;; *) R=no ;; esac", "lit", "lit"),
    "pattern [!a]": ("x=b; case $x in [!a]) R=neg ;; *) R=no ;; esac", "neg", "neg"),
    "pattern [^a], negated by bash only": (
        "x=b; case $x in [^a]) R=neg ;; *) R=no ;; esac",
        "neg",
        Refused("[^...] in '[^a]' in a /bin/sh script"),  # dash: the set of ^ and a
    ),
    "pattern [[:digit:]]": ("x=7; case $x in [[:digit:]]) R=dig ;; *) R=no ;; esac", "dig", "dig"),
    "pattern [[:punct:]]": ("case 7 in [[:punct:]]) R=p ;; esac", Refused(":punct:"), Refused(":punct:")),
    "pattern [[=e=]]": ("x=e; case $x in [[=e=]]) R=p ;; *) R=no ;; esac", Refused("[=e=]"), Refused("=e=")),
    "pattern [[:x] unclosed class": ("x=':'; case $x in [[:x]) R=y ;; *) R=no ;; esac", "y", "y"),
    "pattern [\\-a]": ("x='-'; case $x in [\\-a]) R=y ;; *) R=no ;; esac", "y", "y"),
    "pattern [0-9]": ("x=5; case $x in [0-9]) R=y ;; *) R=no ;; esac", "y", "y"),
    "pattern [a-\\c]": ("x=b; case $x in [a-\\c]) R=y ;; *) R=no ;; esac", "y", "y"),
    "pattern [9-0]": ("x=5; case $x in [9-0]) R=y ;; *) R=no ;; esac", Refused("range 9-0"), Refused("9-0")),
    "pattern [a-]": ("x=-; case $x in [a-]) R=y ;; *) R=no ;; esac", "y", "y"),
    "pattern \\*": ("v='a*c'; case $v in a\\*c) R=esc ;; *) R=no ;; esac", "esc", "esc"),
    "pattern quoted *": ("v='a*c'; case $v in \"a*\"?) R=q ;; *) R=no ;; esac", "q", "q"),
    "pattern run-time": ("U=$(date); case x in $U) R=u ;; *) R=no ;; esac", PARTLY, PARTLY),
    "${v/p/&&}": ('v=a.b.c; R="${v/./&&}"', "a..b.c", Refused("bash's")),
    "${v//p/\\&}": ("v=a.b.c; R=${v//./\\&}", "a&b&c", Refused("bash's")),
    '${v//p/"&"}': ('v=a.b.c; R=${v//./"&"}', "a&b&c", Refused("bash's")),
    "${v/#p/r}": ("v=abcabc; R=${v/#ab/X},${v/#x/X}", "Xcabc,abcabc", Refused("bash's")),
    "${v/%p/r}": ("v=abcabc; R=${v/%bc/X},${v/%x/X}", "abcaX,abcabc", Refused("bash's")),
    "${v//*/r}": ("v=abc; R=${v//*/X},${v//x*/X}", "X,abc", Refused("bash's")),
    "${v//*(x)/r}": ("v=abc; R=${v//*(x)/X}", Refused("extended pattern '*(x)'"), Refused("bash's")),
    # [[ ]]
    "[[ ( ) ]]": ('[[ ( -n x ) && ( -z "" ) ]] && R=grp', "grp", SYNTAX),
    "[[ ! ( ) ]]": ("[[ ! ( -n x && -z x ) ]] && R=not", "not", SYNTAX),
    "[[ run-time || ]]": ("U=$(date +%N); [[ $U == 1 || -n a ]] && R=y", "y", Refused("[[ ]] in a /bin/sh")),
    "[[ run-time && ]]": (
        "U=$(date +%N); [[ $U == 1 && -n a ]] || R=n",
        PARTLY,
        Refused("[[ ]] in a /bin/sh"),
    ),
    "[[ =~ ]]": ("[[ ab =~ ^a ]] && R=re", Refused("[[ =~ ]]"), Refused("[[ ]] in a /bin/sh")),
    "[[ < ]]": ("[[ a < b ]] && R=lt", Refused("collation order"), Refused("[[ ]] in a /bin/sh")),
    "[[ -gt ]]": ("[[ 3 -gt 2 ]] && R=gt", "gt", Refused("[[ ]] in a /bin/sh")),
    "[[ -nt ]]": (
        "[[ a -nt b ]] && R=nt; R=x",
        Refused("file comparison -nt"),
        Refused("[[ ]] in a /bin/sh"),
    ),
    "[[ -k ]]": ("[[ -k /tmp ]] && R=k", Refused("test operator -k"), Refused("[[ ]] in a /bin/sh")),
    "[[ word ]]": (
        '[[ x ]] && R=w; [[ "" ]] || R=${R}e; [[ $(echo x) ]] && R=${R}c',
        "wec",
        Refused("[[ ]]"),
    ),
    "[[ -v array ]]": ("A=(x); [[ -v A ]] && R=v", "v", SYNTAX),
    # test / [ ]
    "[ -v name ]": ("[ -v E1 ] && R=v", "v", Refused("test -v in a /bin/sh script")),
    "[ -v 1 ]": ("set -- a; [ -v 1 ] && R=v", Refused("test -v '1'"), Refused("test -v in a /bin/sh")),
    "[ -v run-time ]": ('U=$(date +%N); [ -v "$U" ] && R=v; R=x', "x", Refused("test -v in a /bin/sh")),
    "[ -k ]": ("[ -k /tmp ] && R=k", Refused("test with ['-k', '/tmp']"), Refused("test with")),
    "[ == ]": ("[ abc == abc ] && R=eq", "eq", Refused("dash's test has no ==")),
    "[ ' 3' -gt 2 ]": ('[ " 3" -gt 2 ] && R=gt', "gt", "gt"),
    "[ x -gt 2 ]": ("[ x -gt 2 ] && R=gt", Refused("not integers"), Refused("not integers")),
    "[ -nt ]": ("[ a -nt b ] && R=nt", Refused("test with ['a', '-nt', 'b']"), Refused("test with")),
    "[ ]": ("[ ] || R=empty", "empty", "empty"),
    "[ ! word ]": ('[ ! "" ] && R=not', "not", "not"),
    "[ ! -n ]": ('[ ! -n "" ] && R=not', "not", "not"),
    "[ ! ! a = b ]": ("[ ! ! a = b ] && R=x; R=y$R", "y", "y"),
    "[ four words ]": (
        "[ -n a -a b ]; R=$?",
        Refused("test with ['-n', 'a', '-a', 'b']"),
        Refused("test with"),
    ),
    "[ -a -o ]": (
        "[ -n a -o -z a ] && R=o; [ ! -n '' -a -n b ] && R=${R}a; [ a -a b -a c ] && R=${R}w",
        "oaw",
        "oaw",
    ),
    "[ ( ) ]": ('set -- "(" -n a ")" -a -n b; [ "$@" ] && R=paren', "paren", "paren"),
    "[ ! -a ! ]": ('set -- ! -n "" -a ! -z ""; [ "$@" ] || R=nn', "nn", "nn"),
    "[ -o -o ]": ('set -- -n "" -o -n "" -o -z ""; [ "$@" ] && R=oo', "oo", "oo"),
    "[ = -o -lt ]": ('set -- a = b -o 1 -lt 2; [ "$@" ] && R=oo', "oo", "oo"),
    "[ -a -gt ]": ('set -- -n a -a 1 -gt 2; [ "$@" ] || R=aa', "aa", "aa"),
    "[ run-time -o ]": ('U=$(date +%N); set -- -n "" -o "$U" = x; [ "$@" ] || R=no', PARTLY, PARTLY),
    "[ run-time operand ]": (
        'U=$(date +%N); [ -n a -a "$U" -a -n b ]; R=$?',
        Refused("an operand known only at run time where an operator may be"),
        Refused("an operand known only at run time where an operator may be"),
    ),
    "[ -a at the end ]": (
        'set -- -n a -a -n b -a; [ "$@" ]; R=$?',
        Refused("argument expected"),
        Refused("argument"),
    ),
    "[ ( unclosed ]": (
        'set -- "(" -n a -a -n b; [ "$@" ]; R=$?',
        Refused("( without )"),
        Refused("( without )"),
    ),
    "[ trailing words ]": (
        'set -- a -a b c d; [ "$@" ]; R=$?',
        Refused("test with ['a'"),
        Refused("test with"),
    ),
    "[ -f a name too long ]": ("[ -f " + "a" * 300 + " ] || R=long", "long", "long"),
    "[ -f after cd to a run-time directory ]": (
        'cd "$(date +%N)" 2>/dev/null; [ -f x ] && R=f; R=y',
        PARTLY,
        PARTLY,
    ),
    "(( run-time ))": (
        "U=$(date +%N); (( U )) && R=u; (( $U )) && R=u; R=x",
        "x",
        Refused("(( )) in a /bin/sh"),
    ),
    # $? (an assignment's value reads the last command's status; bash's $(...) sets it at once, dash's later)
    "$? after false": ("false; R=$?", "1", "1"),
    "$? after a subshell": ("(exit 3); R=$?", "3", "3"),
    "$? after a function": ("f() { return 4; }; f; R=$?", "4", "4"),
    "$? on the next line": ("false\nR=$?", "1", "1"),
    "$? in two assignments": ("false\nA=$? B=$?\nR=$A$B", "11", "11"),
    "$? after an assignment": ("false; x=1; R=$?", "0", "0"),
    "$? after an assignment's $(...)": ("false; x=$(exit 5); R=$?", "5", "5"),
    "$? around a $(...) in one word": (
        "false; R=$?$(exit 4)$?",
        "14",
        Refused("$? after a $(...) in one command in a /bin/sh script"),  # dash: 11
    ),
    "$? inside a later $(...)": ("false; R=$(exit 4)$(echo $?)", "4", Refused("$? after a $(...)")),
    "$? inside $(...)": ("R=$(false; echo $?)", "1", "1"),
    # variables
    "unset OPTIND": ("unset OPTIND; R=${OPTIND-unset}", "unset", Refused("unset OPTIND in a /bin/sh script")),
    "unset PS4, OPTERR, TERM": (
        "unset PS4 OPTERR TERM; R=${PS4-u}${OPTERR-u}${TERM-u}; PS4=x; R=$R$PS4",
        "uuux",
        "uuux",
    ),
    "unset 1bad": ("unset 1bad; R=$?", Refused("unset of '1bad', not a name"), Refused("not a name")),
    "unset -n": ("unset -n r; R=x", Refused("unset -n"), Refused("unset -n")),
    "unset an element": ("A=(a b); unset 'A[0]'; R=${A[1]}", Refused("unset of an array element"), SYNTAX),
    "unset a local": (
        "f() { local v=1; unset v; R=${v-unset}; }; f",
        Refused("unset of the function-local v"),
        Refused("local in a /bin/sh script"),
    ),
    "unset a readonly": (
        "readonly Q=1; unset Q; R=x",
        Refused("unset of the readonly Q"),
        Refused("readonly"),
    ),
    "unset RANDOM": ("unset RANDOM; R=x", Refused("unset of bash's RANDOM"), Refused("unset of bash's")),
    "unset a run-time name": (
        'unset "$(date +%N)"; R=x',
        Refused("unset of a name known only"),
        Refused("unset"),
    ),
    "export 1bad=2": ("export A=1 1bad=2 B=3; R=$?$A$B", "113", NOLAUNCH),  # dash stops there
    'export "1bad=2"': ('export "1bad=2"; R=$?', "1", NOLAUNCH),
    "readonly 1bad=2": ("readonly 1bad=2; R=$?", "1", Refused("readonly in a /bin/sh script")),
    "export A+=": ("A=5; export A+=6; R=$A", "56", Refused("arrays or += in a /bin/sh script")),
    "export -x": ("export -x A=1; R=x", Refused("export -x"), Refused("export with an option")),
    "export a run-time name": (
        'export "$(date +%N)"; R=x',
        Refused("export argument known only"),
        Refused(""),
    ),
    "local outside a function": ("local x=1; R=$?", "1", Refused("local in a /bin/sh script")),
    "declare -p, -f": (
        "declare -p E1 >/dev/null; R=$?; declare -f >/dev/null; R=$R$?",
        "00",
        Refused("declare"),
    ),
    "declare -n": ("declare -n r=E1; R=$r", Refused("declare -n (a name reference)"), Refused("declare")),
    "declare -i": ("declare -i n=3; R=$n", Refused("declare -i"), Refused("declare")),
    # an unread sourced file may have made any variable an array: its other elements stay unknown (the
    # environment is unknown from there on, so each is partly; a wrong known $R is still a disagreement)
    "an unread file's variable given one element": (
        'source ./site-absent.env 2>/dev/null; F[3]=x; R="${#F[@]}"',
        PARTLY,
        Refused("source in a /bin/sh script"),
    ),
    "an unread file's variable given a list": (
        'source ./site-absent.env 2>/dev/null; F[3]=x; F=(a b); R="${#F[@]}"',
        PARTLY,
        SYNTAX,
    ),
    "an unread file's variable given a scalar": (
        'source ./site-absent.env 2>/dev/null; F=x; R="$F-${F[1]}"',
        PARTLY,
        Refused("source in a /bin/sh script"),
    ),
    "an unread file's variable appended to": (
        'source ./site-absent.env 2>/dev/null; F+=(y); R="${#F[@]}"',
        PARTLY,
        SYNTAX,
    ),
    "declare -a then a scalar": ("declare -a A; A=x; R=${A[0]}", "x", Refused("declare")),
    "declare -A then -a": (
        "declare -A M; declare -a M; R=x",
        Refused("between indexed and associative"),
        Refused(""),
    ),
    "declare -A on a scalar": (
        "x=1; declare -A x; R=x",
        Refused("between indexed and associative"),
        Refused(""),
    ),
    "declare in a function, -g": (
        "f() { declare v=1; declare -g w=2; }; f; R=${v-unset}$w",
        "unset2",
        Refused("declare in a /bin/sh script"),
    ),
    "local of a readonly": (
        "readonly Q=1; f() { local Q=2; }; f; R=x",
        Refused("Q is readonly"),
        Refused(""),
    ),
    "array +=": ("A=(a); A+=(b c); B=x; B+=(y); A[1]+=z; R=${A[*]}/${B[*]}", "a bz c/x y", SYNTAX),
    "array index expressions": (
        "A=(a b); i=1; R=${A[1+0]}${A[i]}${A[-1]-}",
        Refused("unary expression '-1'"),
        SYNTAX,
    ),
    "array index a run-time name": ("U=$(date +%N); A=(a b); R=${A[U]}", Refused("array index 'U'"), SYNTAX),
    "array subscript a run-time name": (
        "A[$(date +%N)]=x; R=y",
        Refused("array subscript known only"),
        Refused(""),
    ),
    "array keyed literal": ("A=([1]=a); R=${A[1]}", Refused("keyed array element"), SYNTAX),
    "assoc given a list": (
        "declare -A M; M=(a b); R=x",
        Refused("associative array M given a list"),
        Refused(""),
    ),
    "assoc keyed literal": (
        "declare -A M; M=([a]=b); R=${M[a]}",
        Refused("associative array literal"),
        Refused(""),
    ),
    "a scalar as an array": ("x=a; R=${x[0]}${x[1]-u}", "au", Refused("(bash's)")),
    "BASH_SOURCE": ("R=${#BASH_SOURCE[@]}${BASH_SOURCE[0]##*/}", "1s.sh", Refused("(bash's)")),
    "BASH_SOURCE under dash": ("R=${BASH_SOURCE-unset}; R=${R##*/}", "s.sh", "unset"),
    "BASH_SOURCE[x]": ("R=${BASH_SOURCE[x]##*/}", Refused("BASH_SOURCE[x]"), Refused("(bash's)")),
    "FUNCNAME outside a function": ("R=${FUNCNAME-unset}", "unset", "unset"),
    "BASH_VERSINFO": ("R=${BASH_VERSINFO[0]}", PARTLY, Refused("(bash's)")),
    "assign RANDOM": (
        "RANDOM=5; R=x",
        Refused("assignment to bash's own variable RANDOM"),
        Refused("RANDOM"),
    ),
    # brace expansion: the grammar gives ``{a,b}`` as the words "{", "a,b", "}", which were read as one
    # literal word (red team 22: ``--served-model-name {x,--enable-fp32-lm-head}`` passed where bash runs
    # the FP32 head); dash leaves it, bash (as sh too) makes two words: refused for both
    "brace expansion the grammar splits": (
        "set -- x {a,b}; R=$#",
        Refused("brace expansion"),
        Refused("brace expansion"),
    ),
    "brace expansion around a variable": (
        'v=a; set -- x{"$v",b}; R=$#',
        Refused("brace expansion"),
        Refused(""),
    ),
    "braces quoted": ('set -- "{a,b}" x{a}; R=$1$2', "{a,b}x{a}", "{a,b}x{a}"),
    # bash runs command_not_found_handle (in a child) for a command it cannot find: the server it execs
    # there is what runs (red team 22: read as "not found", the next line's launch passed)
    "command_not_found_handle": (
        "command_not_found_handle() { exec python3 -m sglang.launch_server --x handled; }\n"
        "R=out; nosuchcmd_rt22",
        Refused("command_not_found_handle"),
        Refused("command_not_found_handle"),
    ),
    # under set -x each traced command expands PS4 first: a command substitution there runs (red team 22)
    "PS4 expanded under set -x": (
        "R=out; PS4='$(R=in; exec python3 -m sglang.launch_server --x ps4)'; set -x; :",
        Refused("PS4"),
        Refused("PS4"),
    ),
    "set -x with the plain PS4": ("PS4='++ '; set -x; R=$(echo a)", "a", "a"),
    # bash's variables that change how bash itself runs once set (red team 22): POSIX mode keeps an
    # assignment before a special builtin, FUNCNEST drops the rest of the line past the limit, BASH_ARGV0 is
    # $0, BASH_COMPAT 4.2 keeps the quotes of a pattern substitution's replacement; bash as sh has them
    # too, so a /bin/sh script that sets them is not read either
    "POSIXLY_CORRECT set": (
        "R=a; POSIXLY_CORRECT=1; R=b :",
        Refused("POSIXLY_CORRECT is set or unset"),
        Refused("POSIXLY_CORRECT is set or unset"),
    ),
    "unset POSIXLY_CORRECT": (
        "R=a; unset POSIXLY_CORRECT; R=b :",
        Refused("POSIXLY_CORRECT is set or unset"),
        Refused("POSIXLY_CORRECT is set or unset"),
    ),
    "FUNCNEST past its limit": (
        "R=out; FUNCNEST=1; f() { g; }; g() { R=in; }; f; R=dropped",
        Refused("FUNCNEST is set or unset"),
        Refused("FUNCNEST is set or unset"),
    ),
    "BASH_ARGV0 sets $0": (
        "BASH_ARGV0=z; R=${0##*/}",
        Refused("BASH_ARGV0 is set or unset"),
        Refused("BASH_ARGV0 is set or unset"),
    ),
    "local BASH_COMPAT": (
        'f() { local BASH_COMPAT=4.2; x=a; R="${x/a/"b"}"; }; f',
        Refused("BASH_COMPAT is set or unset"),
        Refused(""),
    ),
    "$#, ${1}, ${2-u} of run-time words": ("set -- $(date +%N); R=$#${2-u}", "1u", "1u"),
    "~ with HOME ending in /": ("HOME=/a/; A=~/x; B=~; R=$A,$B", "/a//x,/a/", "/a//x,/a/"),
    "~ with HOME=/": ("HOME=/; R=~/x", "//x", "//x"),
    "~ after : in an assignment": ("HOME=/a; P=~/x:~/y; R=$P", "/a/x:/a/y", "/a/x:/a/y"),
    # echo and printf (their output, through $(...))
    "echo -n": ("R=$(echo -n a; echo b)", "ab", PARTLY),  # dash's echo: not modelled
    "echo -e": ("R=$(echo -e 'a\\tb')", PARTLY, PARTLY),
    "echo a backslash": ('R=$(echo "a\\\\b")', "a\\b", PARTLY),  # dash's echo reads \\b
    "echo -x": ("R=$(echo -x)", "-x", PARTLY),
    "printf -v a bad name": ("printf -v 1bad %s x; R=$?", "2", Refused("printf -v in a /bin/sh script")),
    "printf -v --": ("printf -v R -- %s x", "x", Refused("printf -v in a /bin/sh script")),
    "printf alone": ("printf; R=$?", "2", "2"),
    "printf -- and a format reused": ("R=$(printf -- '%s-%s' a b c)", "a-bc-", "a-bc-"),
    "printf %d and %%": ("R=$(printf '%d' 42)$(printf 'a%%b')", "42a%b", "42a%b"),
    "printf %5s": ("R=$(printf '%5s|' ab)", Refused("printf conversion %5"), Refused("printf conversion %5")),
    "printf %b": ("R=$(printf '%b' 'a\\nb')", Refused("printf conversion %b"), Refused("conversion %b")),
    "printf a run-time format": ('R=$(printf "$(date +%N)")', PARTLY, PARTLY),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_construct_reads_as_bash_and_dash_run_it(tmp_path: Path, name: str) -> None:
    body, *expected = CASES[name]
    base = sandbox(tmp_path)
    for shell, expect in zip(("/bin/bash", "/bin/sh"), expected, strict=True):
        script = Script(f'#!{shell}\n{body}\nexec python3 -m sglang.launch_server --x "$R"\n')
        ran = run_bash(tmp_path, script, base)
        verdict = compare(read_static(tmp_path, script, base), ran)
        where = f"{shell}: bash ran {ran.argv[-1:]}, the reader: {verdict}"
        if expect is PARTLY:
            assert ran.launched and verdict.kind == "partly", where
        elif isinstance(expect, Refused):
            assert verdict.kind == "unresolved" and expect.why in verdict.detail, where
        elif expect is NOLAUNCH:
            assert not ran.launched and verdict.kind == "no-launch", where
        else:
            assert ran.launched and ran.argv[-1] == expect, where
            assert verdict.kind == "proven", where


def test_an_element_set_after_an_untrusted_sourced_file_leaves_the_count_unknown(tmp_path: Path) -> None:
    """A sourced file others can write is not read: every variable is unknown from there on, on one path.
    It may have made ``F`` an array, so after ``F[3]=x`` the count is unknown (bash counts 1 here, with
    this file; another file could make it more), not 2 (an unknown element 0 counted as set); a list
    given afterwards is known again."""
    base = sandbox(tmp_path)
    shared = tmp_path / "shared.env"
    shared.write_text("A=1\n")
    shared.chmod(0o666)
    for body, bash, reader in (
        ('F[3]=x; R="${#F[@]}"', "1", "partly"),
        ('F[3]=x; R="${F[3]}-${F[5]}"', "x-", "partly"),
        ('F[3]=x; F=(a b); R="${#F[@]}"', "2", "known"),
    ):
        script = Script(
            f'#!/bin/bash\nsource ./shared.env\n{body}\nexec python3 -m sglang.launch_server --x "$R"\n'
        )
        ran = run_bash(tmp_path, script, base)
        read = read_static(tmp_path, script, base)
        verdict = compare(read, ran)
        assert ran.argv[-1] == bash and verdict.kind == "partly", (body, ran.argv, verdict)
        assert not isinstance(read, str)
        last = join(read.argv[-1]) if not isinstance(read.argv, Unknown) else read.argv
        assert isinstance(last, Unknown) == (reader == "partly"), (body, last)


# read with a known here-string or here-document (bash only: dash has neither here-strings nor -a)
READ_CASES: dict[str, tuple[str, Expect]] = {
    "read -r -a from an empty here-string": ('read -r -a A <<< "${X:-}"\nR="${#A[@]}:${A[*]}"', "0:"),
    "read -a splits on IFS white space": ('read -r -a A <<< "  a  b\tc  "\nR="${#A[@]}:${A[1]}"', "3:b"),
    "read -ra, the options in one word": ('read -ra A <<< "x y"\nR="${A[1]}"', "y"),
    "read: the last name takes the rest": (
        'read -r x y <<< "  one two  three  "\nR="$x|$y"',
        "one|two  three",
    ),
    "read: more names than words": ('read x y z <<< "a"\nR="$x,$y,$z"', "a,,"),
    "read without -r: backslashes quote": ("read x y <<< 'a\\ b c\\\\d'\nR=\"$x|$y\"", "a b|c\\d"),
    "read -r: backslashes stay": ("read -r x y <<< 'a\\ b c'\nR=\"$x|$y\"", "a\\|b c"),
    "read from a here-document: the first line": (
        "read x <<'EOF'\n  first line  \nsecond\nEOF\nR=\"[$x]\"",
        "[first line]",
    ),
    "read: backslash-newline continues the line": ("read x <<'EOF'\na\\\nb\nEOF\nR=\"$x\"", "ab"),
    "read with an empty IFS keeps the line whole": ('IFS= read -r x <<< "  a b  "\nR="[$x]"', "[  a b  ]"),
    "read -d '' takes the whole here-document": (
        "read -r -d '' x <<'EOF' || true\n one\n two \nEOF\nR=\"[$x]\"",
        "[one\n two]",
    ),
    "read -d :": ("read -d : x y <<< 'a b:c'\nR=\"[$x|$y]\"", "[a|b]"),
    "read at the end of the input fails": (
        "if read x <<'EOF'\nEOF\nthen R=yes; else R=\"no[$x]\"; fi",
        "no[]",
    ),
    "read into REPLY: the line unsplit": ('read <<< "  hi there "\nR="[$REPLY]"', "[  hi there ]"),
    "read into REPLY, backslashes quote": ("read <<< ' a\\ b\\\\ '\nR=\"[$REPLY]\"", "[ a b\\ ]"),
    "read -a from a file is known only at run time": ('read -r -a A < /etc/hostname\nR="${A[0]}"', PARTLY),
    # IFS with characters other than white space: each is a delimiter (with the white space around it),
    # so two in a row delimit an empty field; the last name's one field loses its trailing delimiter
    "read with IFS=,": ('IFS=, read -r x y <<< "a,b"\nR="$x|$y"', "a|b"),
    "read with IFS=,: the last name's one field loses its delimiter": (
        'IFS=, read -r x y <<< "a,b,"\nR="$x|$y"',
        "a|b",
    ),
    "read with IFS=,: the last name keeps two fields and their delimiters": (
        'IFS=, read -r x y <<< "a,b,,"\nR="$x|$y"',
        "a|b,,",
    ),
    "read with IFS=', ': white space around a comma is one delimiter": (
        'IFS=", " read -r x y z <<< " a ,, b , "\nR="$x|$y|$z"',
        "a||b",
    ),
    "read -a with IFS=:: empty fields, none after the last delimiter": (
        'IFS=: read -r -a A <<< "::a::b:"\nR="${#A[@]}:${A[2]}"',
        "5:a",
    ),
    "read: the last name's rest loses a quoted trailing IFS blank too": (
        'read x y <<< "a b c\\ "\nR="[$y]"',
        "[b c]",
    ),
    "read with IFS=,: a backslash-quoted comma does not split": (
        'IFS=, read x y <<< "a\\,b,c"\nR="$x|$y"',
        "a,b|c",
    ),
}


def _quoted(text: str) -> str:
    """``text`` (no ``$``, backquote or double quote in it) as a double-quoted word."""
    return '"' + text.replace("\\", "\\\\") + '"'


def _read_cases(seed: int, count: int) -> str:
    """``count`` reads of random lines (blanks, tabs, commas, colons, backslashes) with a random IFS, one to
    three names or ``-a``, ``-r`` or not, each adding what it assigned to ``$R``."""
    import random

    r = random.Random(seed)
    lines = []
    for k in range(count):
        ifs = r.choice([",", ":", ", ", " :", ",\t", "\t", " ", ", :", "\\", "a"])
        line = "".join(
            r.choice(["a", "b", "c", ",", ":", " ", " ", "\t", "\\"]) for _ in range(r.randint(0, 9))
        )
        opt = r.choice(["-r ", ""])
        head = f"IFS={_quoted(ifs)} read {opt}"
        if r.random() < 0.3:
            lines.append(f"{head}-a A <<< {_quoted(line)}")
            lines.append(f'R="$R {k}:${{#A[@]}}"; for e in "${{A[@]}}"; do R="$R<$e>"; done')
        else:
            names = " ".join(f"v{j}" for j in range(r.randint(1, 3)))
            lines.append(f"{head}{names} <<< {_quoted(line)}")
            lines.append(f'R="$R {k}:' + "".join(f"<${v}>" for v in names.split()) + '"')
    return "R=\n" + "\n".join(lines)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_read_splits_on_any_ifs_as_bash_does(tmp_path: Path, seed: int) -> None:
    """``read`` with IFS of white space, of other characters and of both, held to real bash over random
    lines (bash manual, "Word Splitting" and "read"): the reader's ``$R`` is what bash assigned."""
    base = sandbox(tmp_path)
    script = Script(f'#!/bin/bash\n{_read_cases(seed, 60)}\nexec python3 -m sglang.launch_server --x "$R"\n')
    ran = run_bash(tmp_path, script, base)
    static = read_static(tmp_path, script, base)
    verdict = compare(static, ran)
    assert ran.launched and verdict.kind == "proven", (verdict, ran.argv[-1:])


@pytest.mark.parametrize("name", list(READ_CASES))
def test_read_reads_as_bash_runs_it(tmp_path: Path, name: str) -> None:
    """Finding 7 of world9 (shantanugoel's ``read -r -a EXTRA <<< "${EXTRA_ARGS:-}"``): ``read`` of a known
    here-string or here-document is read as bash reads it (bash manual, "read")."""
    body, expect = READ_CASES[name]
    base = sandbox(tmp_path)
    script = Script(f'#!/bin/bash\n{body}\nexec python3 -m sglang.launch_server --x "$R"\n')
    ran = run_bash(tmp_path, script, base)
    verdict = compare(read_static(tmp_path, script, base), ran)
    where = f"bash ran {ran.argv[-1:]}, the reader: {verdict}"
    if expect is PARTLY:
        assert ran.launched and verdict.kind == "partly", where
    elif isinstance(expect, Refused):
        assert verdict.kind == "unresolved" and expect.why in verdict.detail, where
    else:
        assert ran.launched and ran.argv[-1] == expect, where
        assert verdict.kind == "proven", where


# world10 F1: the word of ${v:-word} (:+, =, :=) unquoted is split as an expansion's result (a wrong PASS:
# ${NAME:-ling --enable-fp32-lm-head} was one word, and bash gives the FP32 head's flag)
OPERAND_SPLITS = [
    "${N:-a b}",
    '${N:-a "b c"}',
    "${N:-a\\ b}",
    "${N:+x}${M:-a b}",
    "${N-a b}",
    "${N:-a\tb}",
    "${N:-a   b}c",
    "${N:-$E2 z}",
    '${N:-"$E2" z}',
    "${N:-'a b' c}",
    "${N:-a\\ \\ b} z",
    "${N:-a\\\\b c}",
    "${N:-~/x y}",
    "${N:-$(echo a b) c}",
    '"${N:-a b}"',
    '"${N:-a "b c"}"',
    '${N:=a b} "$N"',
    "${E1:+--f --g}",
]


@pytest.mark.parametrize("word", OPERAND_SPLITS)
def test_the_word_of_an_unquoted_default_is_split_as_bash_and_dash_split_it(
    tmp_path: Path, word: str
) -> None:
    base = sandbox(tmp_path)
    for shell in ("/bin/bash", "/bin/sh"):
        for prefix in ("", "IFS=,; ", "IFS=; "):
            script = Script(f"#!{shell}\n{prefix}exec python3 -m sglang.launch_server --x {word}\n")
            ran = run_bash(tmp_path, script, base)
            verdict = compare(read_static(tmp_path, script, base), ran)
            assert ran.launched and verdict.kind == "proven", (shell, prefix, ran.argv[3:], verdict)


# what bash does with one of these in its environment, against what the reader read before (red team 22:
# a unit's Environment= reaches a ``bash -c`` string): POSIX mode keeps R=b, FUNCNEST=1 drops the rest of the
# line, BASH_COMPAT=4.2 keeps the quotes
_TUNED = {
    "POSIXLY_CORRECT": ("", "R=a; R=b :", "b"),
    "FUNCNEST": ("1", "R=out; f() { g; }; g() { R=in; }; f; R=dropped", "out"),
    "BASH_COMPAT": ("4.2", 'x=a; R="${x/a/"b"}"', '"b"'),
}


@pytest.mark.parametrize("name", list(_TUNED))
def test_bash_started_with_a_variable_that_changes_how_it_runs_is_not_read(tmp_path: Path, name: str) -> None:
    value, body, bash_says = _TUNED[name]
    base = sandbox(tmp_path)
    script = Script(
        f'#!/bin/bash\n{body}\nexec python3 -m sglang.launch_server --x "$R"\n', env={name: value}
    )
    ran = run_bash(tmp_path, script, base)
    assert ran.launched and ran.argv[-1] == bash_says, ran.argv
    verdict = compare(read_static(tmp_path, script, base), ran)
    assert verdict.kind == "unresolved" and f"{name} in the environment" in verdict.detail, verdict


def test_bash_and_dash_start_getopts_at_one_whatever_the_environments_optind(tmp_path: Path) -> None:
    """bash and dash set OPTIND (and bash OPTERR) to 1 at start: an inherited OPTIND=2 would have getopts
    skip the first option (red team 22: a unit's Environment=OPTIND=2 picked the other branch)."""
    base = sandbox(tmp_path)
    for shell in ("/bin/bash",):  # dash's getopts is not modelled
        script = Script(
            f'#!{shell}\ngetopts ab o -b -a; R=$o\nexec python3 -m sglang.launch_server --x "$R"\n',
            env={"OPTIND": "2"},
        )
        ran = run_bash(tmp_path, script, base)
        assert ran.launched and ran.argv[-1] == "b", (shell, ran.argv)
        verdict = compare(read_static(tmp_path, script, base), ran)
        assert verdict.kind == "proven", (shell, verdict)


def test_bash_as_sh_takes_what_dash_ignores_in_its_environment(tmp_path: Path) -> None:
    """A /bin/sh script is read as what dash and bash started as sh do alike: bash as sh still takes
    SHELLOPTS, BASHOPTS, FUNCNEST, BASH_COMPAT and exported functions from its environment (dash none)."""
    base = sandbox(tmp_path)
    for name, value in [
        ("SHELLOPTS", "noglob"),
        ("BASHOPTS", "nullglob"),
        ("FUNCNEST", "1"),
        ("BASH_COMPAT", "4.2"),
        ("BASH_FUNC_python3%%", "() { :; }"),
    ]:
        script = Script('#!/bin/sh\nexec python3 -m sglang.launch_server --x "$R"\n', env={name: value})
        (tmp_path / "s.sh").write_text(script.text)
        reading = read_static(tmp_path, script, base)
        assert isinstance(reading, str) and "in the environment" in reading, (name, reading)


# red team 23: what the grammar leaves as text in the word of ${v:-word} is never read as that text: a
# backquote's command, a process substitution, and a ~user whose name holds a blank (no such user: bash
# leaves the text and splits it, '${N:-~ --enable-fp32-lm-head}' is two words)
OPERAND_TEXT = [
    "${N:-`echo a b` c}",
    "${N:-x`echo a b`}",
    "${N:-${M:-`echo a b`}}",
    '"${N:-`echo a b`}"',
    "${N:-<(echo a) y}",
    "${N:-~ x}",
    "${N:-~ --f}",
    "${N:=~ x y}",
]


@pytest.mark.parametrize("word", OPERAND_TEXT)
def test_what_the_grammar_leaves_as_text_in_an_operand_is_never_read_as_text(
    tmp_path: Path, word: str
) -> None:
    base = sandbox(tmp_path)
    for shell in ("/bin/bash", "/bin/sh"):
        for prefix in ("", "IFS=,; "):
            script = Script(f"#!{shell}\n{prefix}exec python3 -m sglang.launch_server --x {word}\n")
            ran = run_bash(tmp_path, script, base)
            verdict = compare(read_static(tmp_path, script, base), ran)
            assert ran.launched and verdict.kind != "disagree", (shell, prefix, ran.argv[3:], verdict)


# red team 23: tree-sitter-bash gives 'a`echo b`c' as two arguments, 'a' and '`echo b`c'; bash has one word
ADJACENT = ["a`echo b`c", "a`echo b c`d", "/m`echo -`-enable-metrics", "a`echo b`$E1", "a`echo b`"]


@pytest.mark.parametrize("word", ADJACENT)
def test_one_word_the_grammar_splits_in_two_is_never_read_as_two(tmp_path: Path, word: str) -> None:
    base = sandbox(tmp_path)
    for shell in ("/bin/bash", "/bin/sh"):
        script = Script(f"#!{shell}\nexec python3 -m sglang.launch_server --x {word}\n")
        ran = run_bash(tmp_path, script, base)
        verdict = compare(read_static(tmp_path, script, base), ran)
        assert ran.launched and verdict.kind != "disagree", (shell, ran.argv[3:], verdict)
