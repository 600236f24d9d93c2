"""The rule pack as the only source of truth, from the user's side: ``rules lint`` lists every problem
(file:line each) and expired waivers, a pack lacking what its checks need is rejected naming it, hostile
YAML (alias bombs, huge integers) and unsafe message templates exit 65 at once, and a pack for another
model is a YAML file and nothing else."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.bounded_run import run_bounded
from tests.support.checkpoint_factory import write_checkpoint
from tests.support.cli import run_cli
from tests.support.sglang_builds import make_build
from validator.pack_templates import render_template

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "rules" / "ling-3.0-flash-dgx-spark.yaml"


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}, cwd=cwd)


def _pack(tmp_path: Path, text: str, name: str = "pack.yaml") -> Path:
    """A copy of a pack's text, with the prompt file it names beside it (as an operator copies both)."""
    (tmp_path / "probe-prompts.yaml").write_bytes((REPO / "rules" / "probe-prompts.yaml").read_bytes())
    p = tmp_path / name
    p.write_text(text)
    return p


def _without_expect(text: str) -> str:
    start = text.index("\nexpect:\n")
    end = text.index("\nprobe:\n")
    return text[:start] + "\n" + text[end:]


def _errors(res: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    return [line for line in res.stderr.splitlines() if line.strip()]


def test_pack_without_expect_names_every_missing_expectation(tmp_path: Path) -> None:
    p = _pack(tmp_path, _without_expect(PACK.read_text()))
    res = _cli("rules", "lint", str(p))
    assert res.returncode == 65, res.stderr
    lines = _errors(res)
    missing = {m.group(1) for line in lines if (m := re.search(r"(expect\.\w+) is missing", line))}
    assert missing == {
        "expect.sglang_version",
        "expect.moe_runner_backend",
        "expect.lm_head_dtype",
        "expect.fp8_lm_head_env",
        "expect.tool_call_parsers",
        "expect.speculative",
        "expect.accept_length_min",
        "expect.checkpoint",
        "expect.host",
        "expect.model_bytes",
        "expect.startup",
    }
    assert all(line.startswith(f"spark-validate: {p}:") for line in lines)
    assert any(
        "expect.speculative is missing (needed by spec.config, spec.lm_head_shared" in x for x in lines
    )
    # Any other command refuses the pack too, in one line that points at `rules lint`.
    pre = _cli(
        "preflight", "--rules", str(p), "--launch-cmd", "python -m sglang.launch_server --model-path /m"
    )
    assert pre.returncode == 65 and len(_errors(pre)) == 1 and "rules lint" in pre.stderr


def test_lint_reports_every_error_with_its_line(tmp_path: Path) -> None:
    text = PACK.read_text()
    text = text.replace("num_steps: 3", "num_steps: three", 1)
    text = text.replace("    severity: info\n", "    severity: loud\n", 1)
    p = _pack(tmp_path, text)
    lines = _errors(_cli("rules", "lint", str(p)))
    assert len(lines) == 2, lines
    numbered = p.read_text().splitlines()
    for line, needle in zip(lines, ("num_steps: three", "severity: loud"), strict=True):
        lineno = int(line.split(":")[2])
        assert needle in numbered[lineno - 1], (line, numbered[lineno - 1])
    # Problems only the builtin checks know about are listed together, too.
    text = PACK.read_text().replace("      not_installed: pip", "      not_instaled: pip", 1)
    old = "    fail_message: --mem-fraction-static is {actual}, above {expected}"
    text = text.replace(old, "    fail_message: '{actual'", 1)
    lines = _errors(_cli("rules", "lint", str(_pack(tmp_path, text))))
    assert any("remedies.not_installed is missing" in x for x in lines), lines
    assert any("no remedy variant 'not_instaled'" in x for x in lines), lines
    assert any("fail_message" in x and "unclosed '{'" in x for x in lines), lines


def test_lint_reports_expired_waivers(tmp_path: Path) -> None:
    waiver = (
        "waivers:\n  - check: moe.humming_runtime\n"
        "    justification: cache is warmed by the image, OPS-1234\n    expires: 2020-01-31\n"
    )
    p = _pack(tmp_path, PACK.read_text().replace("waivers: []\n", waiver))
    res = _cli("rules", "lint", str(p))
    assert res.returncode == 65
    assert _errors(res) == [
        f"spark-validate: {p}: waiver for moe.humming_runtime expired on 2020-01-31: it no longer applies "
        "(renew it with a new justification, or remove it)"
    ]
    listing = _cli("rules", "--rules", str(p), "list")  # still a usable pack: the waiver just does not apply
    assert listing.returncode == 0 and "[waived]" not in listing.stdout


def test_alias_bomb_is_rejected_fast_and_small(tmp_path: Path) -> None:
    bomb = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    text = PACK.read_text().replace("secrets: []\n", "secrets: []\nx-bomb:\n  " + "\n  ".join(bomb) + "\n")
    p = _pack(tmp_path, text)
    for args in (["rules", "lint", str(p)], ["preflight", "--rules", str(p), "--launch-cmd", "python -V"]):
        res = run_bounded(args, timeout=30)
        assert res.rc == 65, (res.rc, res.stderr[-300:])
        assert "YAML aliases (*name) are not allowed" in res.stderr and "Traceback" not in res.stderr
        assert res.peak_rss_mb < 300


def test_huge_integer_exits_65(tmp_path: Path) -> None:
    p = _pack(tmp_path, PACK.read_text().replace("  version: 1\n", "  version: " + "9" * 5000 + "\n", 1))
    res = _cli("rules", "lint", str(p))
    assert res.returncode == 65, res.stderr
    assert len(_errors(res)) == 1 and str(p) in res.stderr and "digit" in res.stderr


def test_templates_are_plain_names_never_evaluated(tmp_path: Path) -> None:
    old = "    fail_message: --mem-fraction-static is {actual}, above {expected}"
    for bad, why in (
        ("{", "unclosed '{'"),
        ("x }", "single '}'"),
        ("{actual.real.__class__}", "is not a plain field name"),
        ("{actual!r:>{expected}}", "is not a plain field name"),
        ("{actual.real}", "unknown template field {actual.real}"),
    ):
        p = _pack(tmp_path, PACK.read_text().replace(old, f"    fail_message: '{bad}'"))
        lines = _errors(_cli("rules", "lint", str(p)))
        assert len(lines) == 1 and "host.mem_fraction" in lines[0] and why in lines[0], (bad, lines)
    # The renderer itself looks names up in a table: nothing is evaluated, a gap stays visible.
    assert render_template("{actual.real.__class__} {{x}} {actual}", {"actual": 0.9}) == (
        "{actual.real.__class__} {{x}} {actual}"  # an invalid template is returned as written
    )
    assert render_template("{actual} above {{{expected}}} {missing}", {"actual": 0.9, "expected": 0.68}) == (
        "0.9 above {0.68} {missing}"
    )


SECOND_PACK = """apiVersion: spark-validate/v1
kind: RulePack
metadata:
  name: acme-moe-test-box
  version: 1
  description: Acme MoE on a test box, triton MoE kernels, FP8 head, no speculation.
  model: acme/Acme-MoE-fp8
  sglang: "0.5.23"
  hardware: any
expect:
  sglang_version: "0.5.23"
  moe_runner_backend: triton
  fp8_lm_head_env: SGLANG_ENABLE_FP8_LM_HEAD
  checkpoint:
    architecture: AcmeMoeForCausalLM
    draft_architecture: AcmeMoeNextN
    lm_head_shape: [256, 64]
    lm_head_dtype: BF16
    min_nextn_layers: 0
    routed_experts: mxfp4
  host:
    max_mem_fraction_static: 0.9
    memory_bandwidth_gbps: 100
  speculative:
    algorithm: NEXTN
    resolved_algorithm: EAGLE
    num_steps: 2
    eagle_topk: 1
    num_draft_tokens: 3
    require_draft_model_path: false
checks:
  - id: moe.backend
    title: Triton MoE kernels
    severity: critical
    modes: [preflight]
    why: Acme's kernels are tuned for {expect.moe_runner_backend}.
    remedy: Use --moe-runner-backend {expect.moe_runner_backend}.
    remedies:
      explicit: Acme says - pass --moe-runner-backend {expect.moe_runner_backend}, never auto.
      missing_backend: Acme says - upgrade SGLang.
  - id: lm_head.fp8
    title: FP8 head
    severity: critical
    modes: [preflight]
    why: Acme's head is large.
    remedy: Acme says - set {expect.fp8_lm_head_env}.
    remedies:
      set_env: Acme says - export {expect.fp8_lm_head_env}=1.
      build: Acme says - install a build that declares {expect.fp8_lm_head_env}.
  - id: checkpoint.layout
    title: Acme checkpoint
    severity: critical
    modes: [preflight]
    why: The head must stay unquantized on disk.
    remedy: Acme says - download the checkpoint again.
    remedies:
      not_convert: Acme says - list lm_head in modules_to_not_convert.
  - id: spec.lm_head_shared
    title: the Acme draft shares the head module
    severity: critical
    modes: [preflight]
    why: An FP8 head read by a draft that only shares the tensor is garbage.
    remedy: Acme says - use a build whose {expect.checkpoint.draft_architecture} shares the head.
    remedies:
      install_or_plugin: Acme says - patch {expect.checkpoint.draft_architecture}.
      unshared: Acme says - launch without {skipped_by}.
  - id: host.mem_fraction
    title: memory fraction at most {expect.host.max_mem_fraction_static}
    severity: warning
    modes: [preflight]
    why: Acme's box needs room for its agent.
    remedy: Acme says - lower --mem-fraction-static to {expect.host.max_mem_fraction_static}.
    expect:
      fact: launch.args.mem_fraction_static
      op: "<="
      value_from: host.max_mem_fraction_static
      when_missing: pass
    pass_message: fraction ok
    fail_message: fraction {actual} above {expected}
"""


def test_a_nextn_layer_of_an_architecture_the_reader_does_not_mirror_is_flagged(tmp_path: Path) -> None:
    """The Acme pack needs no NEXTN layer; asking for one of an architecture whose SGLang loader the
    checkpoint reader does not mirror could never be proven, and lint says so."""
    pack = _pack(tmp_path, SECOND_PACK.replace("min_nextn_layers: 0", "min_nextn_layers: 1"), "acme.yaml")
    out = _cli("rules", "lint", str(pack))
    assert out.returncode == 65, out.stderr
    assert "checkpoint.layout cannot count the NEXTN layer of AcmeMoeForCausalLM" in out.stderr
    assert "BailingMoeV3ForCausalLM only" in out.stderr


def test_second_pack_for_another_model_is_yaml_only(tmp_path: Path) -> None:
    pack = _pack(tmp_path, SECOND_PACK, "acme.yaml")
    assert _cli("rules", "lint", str(pack)).returncode == 0
    model = write_checkpoint(
        tmp_path / "model", architectures=("AcmeMoeForCausalLM",), num_nextn_predict_layers=0
    )
    root = make_build(tmp_path / "site")
    base = ["preflight", "--rules", str(pack), "--format", "json", "--sglang-root", str(root)]
    launch = f"python -m sglang.launch_server --model-path {model} --mem-fraction-static 0.85"
    env_ok = f"SGLANG_ENABLE_FP8_LM_HEAD=1 {launch} --moe-runner-backend triton"

    good = _cli(*base, "--launch-cmd", env_ok.split(" ", 1)[1], "--env-file", str(_env(tmp_path)))
    report = json.loads(good.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert good.returncode == 0, good.stdout
    assert report["rule_pack"] == "acme-moe-test-box"
    assert list(by_id) == [
        "moe.backend", "lm_head.fp8", "checkpoint.layout", "spec.lm_head_shared", "host.mem_fraction"
    ]  # fmt: skip
    assert {c["status"] for i, c in by_id.items() if i != "spec.lm_head_shared"} == {"pass"}
    assert by_id["spec.lm_head_shared"]["status"] == "skip"  # no speculation in this launch
    assert by_id["checkpoint.layout"]["message"].startswith(
        "AcmeMoeForCausalLM checkpoint: BF16 lm_head [256, 64]"
    )

    bad = _cli(*base, "--launch-cmd", f"{launch} --moe-runner-backend auto --mem-fraction-static 0.95")
    report = json.loads(bad.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert bad.returncode == 78
    assert by_id["moe.backend"]["remedy"] == "Acme says - pass --moe-runner-backend triton, never auto."
    assert by_id["moe.backend"]["message"] == (  # an FP8 checkpoint without MXFP4 experts: no known pick
        "MoE runner backend is 'auto': what SGLang picks is unknown (the checkpoint's quant_method fp8: "
        "SGLang decides its MoE backend only at start); the recipe needs triton"
    )
    assert by_id["moe.backend"]["why"] == "Acme's kernels are tuned for triton."
    assert by_id["lm_head.fp8"]["remedy"] == "Acme says - export SGLANG_ENABLE_FP8_LM_HEAD=1."
    assert by_id["host.mem_fraction"]["message"] == "fraction 0.95 above 0.9"
    assert by_id["host.mem_fraction"]["remedy"] == "Acme says - lower --mem-fraction-static to 0.9."
    assert "Ling" not in bad.stdout and "Bailing" not in bad.stdout and "humming" not in bad.stdout.lower()

    # The draft class the installed SGLang is searched for is the pack's, not Ling's.
    spec = f"{env_ok.split(' ', 1)[1]} --speculative-algorithm NEXTN --speculative-num-steps 2"
    drafted = _cli(*base, "--launch-cmd", spec, "--env-file", str(_env(tmp_path)))
    shared = {c["id"]: c for c in json.loads(drafted.stdout)["checks"]}["spec.lm_head_shared"]
    assert shared["status"] == "error", shared
    assert "no draft model file in srt/models defines class AcmeMoeNextN" in shared["message"]


def _env(tmp_path: Path) -> Path:
    p = tmp_path / "server.env"
    p.write_text("SGLANG_ENABLE_FP8_LM_HEAD=1\n")
    return p


def test_every_check_family_module_is_registered() -> None:
    """A family module the registry did not import would leave its checks unknown: every pack listing
    them fails to load. Importing the registry (in a fresh interpreter) imports every module under
    validator/checks/ that registers a builtin (found there, not listed), and every check a built-in pack
    lists without ``expect`` is a registered builtin."""
    import pkgutil
    import sys

    import validator.checks
    from validator.checks.registry import builtins
    from validator.rulepack import list_builtin_packs, parse_pack

    sources = Path(validator.checks.__file__).parent
    registering = {
        m.name
        for m in pkgutil.iter_modules([str(sources)])
        if "@check.builtin(" in (sources / f"{m.name}.py").read_text()
    }
    probe = "import sys, validator.checks.registry; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    imported = {m.rsplit(".", 1)[1] for m in loaded.stdout.split() if m.startswith("validator.checks.")}
    assert registering and registering <= imported, registering - imported
    known = builtins()
    for path in list_builtin_packs():
        for spec in parse_pack(path).checks:
            assert spec.expect is not None or spec.id in known, (path.name, spec.id)


def test_lint_says_each_scalar_mistake_where_it_is(tmp_path: Path) -> None:
    """What pydantic would guess is refused, each problem on its line and its own short line: a bool or
    a decimal string as a count, a float as a switch, NaN as a limit, a list one number short, an unknown
    key holding a newline (escaped, never a second line of output)."""
    text = PACK.read_text()
    for old, new in (
        ("  version: 1\n", "  version: true\n"),
        ("    num_steps: 3\n", '    num_steps: "3.0"\n'),
        ("    lm_head_shape: [157184, 2560]\n", "    lm_head_shape: [157184]\n"),
        ("  require_attestation: false\n", "  require_attestation: 1.0\n"),
        ("  accept_length_min: 1.5 ", "  accept_length_min: .nan "),
        (
            "  model: inclusionAI/Ling-3.0-flash-fp4\n",
            '  model: inclusionAI/Ling-3.0-flash-fp4\n  "x\\ny": 1\n',
        ),
    ):
        assert old in text
        text = text.replace(old, new, 1)
    p = _pack(tmp_path, text)
    res = _cli("rules", "lint", str(p))
    assert res.returncode == 65
    numbered = p.read_text().splitlines()
    said = [
        (numbered[int(x.split(":")[2]) - 1].split("#")[0].strip(), x.split(": ", 2)[2]) for x in _errors(res)
    ]
    assert said == [
        ("version: true", "metadata.version: Input should be a valid integer"),
        ('"x\\ny": 1', "metadata.x\\ny: Extra inputs are not permitted"),
        ('num_steps: "3.0"', "expect.speculative.num_steps: "
         "Input should be a valid integer, unable to parse string as an integer"),
        ("accept_length_min: .nan", "expect.accept_length_min: Input should be greater than or equal to 1"),
        ("lm_head_shape: [157184]", "expect.checkpoint.lm_head_shape: List should have 2 items, not 1"),
        ("require_attestation: 1.0", "expect.require_attestation: Input should be a valid boolean"),
    ]  # fmt: skip


def test_lint_locates_the_rules_over_several_fields(tmp_path: Path) -> None:
    """A duplicate check id is said at ``checks:``, a waiver for no check at ``waivers:``, a declarative
    check without a value at its ``expect:``."""
    text = PACK.read_text()
    first = text.index("\n  - id: ", text.index("\nchecks:"))
    entry = text[first : text.index("\n  - id: ", first + 1)]
    dup = text.replace("\nwaivers: []\n", entry + "\nwaivers: []\n")
    lines = _errors(_cli("rules", "lint", str(_pack(tmp_path, dup))))
    assert [line.split(": ", 2)[2] for line in lines] == [
        f"checks: Value error, duplicate check id {entry.split()[2]!r}"
    ]
    waiver = "waivers:\n  - check: no.such\n    justification: long enough, OPS-1\n    expires: 2030-01-31\n"
    lines = _errors(_cli("rules", "lint", str(_pack(tmp_path, text.replace("waivers: []\n", waiver)))))
    assert [line.split(": ", 2)[2] for line in lines] == [
        "waivers: Value error, waiver names unknown check 'no.such'"
    ]
    waived = text.replace("waivers: []\n", waiver).splitlines()
    assert waived[int(lines[0].split(":")[2]) - 1] == "  - check: no.such"
    bare = '      op: "<="\n      value_from: host.max_mem_fraction_static\n'
    assert bare in text
    p = _pack(tmp_path, text.replace(bare, '      op: "<="\n', 1))
    lines = _errors(_cli("rules", "lint", str(p)))
    assert len(lines) == 1 and lines[0].endswith(".expect: Value error, operator '<=' needs a value"), lines
    assert p.read_text().splitlines()[int(lines[0].split(":")[2]) - 1].strip().startswith("fact: ")


def test_a_key_given_twice_is_refused_at_its_second_line(tmp_path: Path) -> None:
    """YAML keeps the later of two equal keys without a word: a second ``severity:`` would silently win,
    a second ``waivers:`` would drop the first's waivers. The pack is refused at the repeated key, in the
    pack itself and in a pack it extends from."""
    text = PACK.read_text()
    assert "    severity: info\n" in text
    p = _pack(
        tmp_path, text.replace("    severity: info\n", "    severity: info\n    severity: critical\n", 1)
    )
    res = _cli("rules", "lint", str(p))
    assert res.returncode == 65
    line = p.read_text().split("    severity: info\n    severity: critical\n")[0].count("\n") + 2
    assert _errors(res) == [f"spark-validate: {p}:{line}: key 'severity' given twice in one mapping"]
    site = _pack(
        tmp_path,
        "extends: ling-3.0-flash-dgx-spark\nmetadata: {name: site-pack, description: a site's}\n"
        "waivers:\n  - {check: moe.humming_runtime, justification: warmed by the image,\n"
        "     expires: 2099-01-01}\n"
        "waivers: []\n",
        "site.yaml",
    )
    res = _cli(
        "preflight", "--rules", str(site), "--launch-cmd", "python -m sglang.launch_server --model-path /m"
    )
    assert res.returncode == 65
    assert _errors(res) == [f"spark-validate: {site}:6: key 'waivers' given twice in one mapping"]


def test_a_merge_key_is_refused_as_a_second_way_to_give_a_key(tmp_path: Path) -> None:
    """YAML's merge key (``<<``, or any key tagged ``!!merge``) gives a mapping's keys a second time from
    another mapping, and the explicit one wins without a word: ``severity: critical`` beside
    ``<<: {severity: info}`` passed lint, and ``<<`` alone set a field no reader of the pack would look
    for. Aliases are refused already, so a merge key has no use in a pack: it is refused at its line."""
    text = PACK.read_text()
    assert "    severity: info\n" in text
    for key in ("<<", "!!merge m"):
        p = _pack(
            tmp_path,
            text.replace(
                "    severity: info\n", f"    severity: info\n    {key}: {{severity: critical}}\n", 1
            ),
        )
        res = _cli("rules", "lint", str(p))
        assert res.returncode == 65, (key, res.stdout, res.stderr)
        line = p.read_text().split(f"    severity: info\n    {key}:")[0].count("\n") + 2
        assert _errors(res) == [
            f"spark-validate: {p}:{line}: YAML merge keys (<<) are not allowed in a rule pack"
        ]
    quoted = _pack(
        tmp_path,
        text.replace("    severity: info\n", '    severity: info\n    "<<": {severity: critical}\n', 1),
    )
    assert (
        "merge keys" not in _cli("rules", "lint", str(quoted)).stderr
    )  # a quoted '<<' is a plain (unknown) key


def test_an_integer_past_pythons_digit_limit_is_said_at_its_line_for_the_author(tmp_path: Path) -> None:
    """A 5000-digit integer was refused with Python's advice to a programmer ("use
    sys.set_int_max_str_digits() to increase the limit") and no line: now the digit count, the limit and
    the line, for `rules lint` and for any command loading the pack. An explicit ``!!int`` too."""
    text = PACK.read_text()
    line = text.split("  version: 1\n")[0].count("\n") + 1
    for value, digits in (("9" * 5000, 5000), ('!!int "' + "1_" * 4400 + '1"', 4401)):
        p = _pack(tmp_path, text.replace("  version: 1\n", f"  version: {value}\n", 1))
        for args in (("rules", "lint", str(p)), ("rules", "--rules", str(p), "list")):
            res = _cli(*args)
            assert res.returncode == 65, (args, res.stderr)
            assert _errors(res) == [
                f"spark-validate: {p}:{line}: an integer of {digits} digits (at most 4300)"
            ]


def test_a_field_named_like_a_secret_keeps_the_message_after_it(tmp_path: Path) -> None:
    """An unknown key named ``api_key`` made every command but lint say ``recipe.api_key: <redacted> inputs
    are not permitted``: the CLI's last redaction read the field and the reason after it as ``api_key:
    VALUE``. The field and the reason are redacted each alone now; the value is never said."""
    text = PACK.read_text()
    anchor = "  model_types: [bailing_hybrid]\n"
    assert anchor in text
    p = _pack(tmp_path, text.replace(anchor, anchor + "  api_key: hunter2-not-shown\n", 1))
    line = p.read_text().split("  api_key:")[0].count("\n") + 1
    want = f"spark-validate: {p}:{line}: recipe.api_key: Extra inputs are not permitted"
    for args in (
        ("rules", "lint", str(p)),
        ("rules", "--rules", str(p), "list"),
        ("rules", "--rules", str(p), "show", "x"),
    ):
        res = _cli(*args)
        assert res.returncode == 65, (args, res.stderr)
        assert _errors(res) == [want], args
        assert "hunter2" not in res.stderr + res.stdout
    # a secret-shaped value in the reason itself is still redacted when the reason is said alone
    shaped = _pack(
        tmp_path, text.replace(anchor, anchor + "  hf_abcdefghijklmnopqrstu: 1\n", 1), "shaped.yaml"
    )
    res = _cli("rules", "--rules", str(shaped), "list")
    assert res.returncode == 65 and "hf_abcdefghijklmnopqrstu" not in res.stderr, res.stderr
