"""``extends:``: a pack written as the changes to another (a site's pack over a built-in recipe, a recipe
over its base), merged check by check, and the mistakes an author makes in one (a loop, a missing base,
a dropped check that does not exist) refused with the file named (exit 65)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cli import json_report, run_cli
from tests.support.in_process import preflight_in_process
from tests.support.second_user import User
from validator.errors import InputError
from validator.rulepack import DEFAULT_PACK, load_pack, parse_pack

SITE = f"""\
extends: {DEFAULT_PACK}
metadata:
  name: site-spark
  description: Our Spark, with a stricter acceptance floor and no TPOT bound.
expect:
  accept_length_min: 2.5
  host:
    max_mem_fraction_static: 0.6
checks:
  - id: lm_head.fp8
    severity: warning
  - id: site.mem_fraction
    title: Memory fraction under the site's ceiling
    severity: critical
    modes: [preflight]
    why: Our Spark also runs the desktop.
    remedy: Lower --mem-fraction-static.
    expect: {{fact: launch.args.mem_fraction_static, op: "<=", value_from: host.max_mem_fraction_static}}
drop_checks: [perf.tpot]
"""


def test_a_site_pack_changes_only_what_it_says(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    base = load_pack(None).pack
    pack = parse_pack(site)
    assert pack.metadata.name == "site-spark" and pack.metadata.sglang == base.metadata.sglang
    assert pack.expect.accept_length_min == 2.5
    assert pack.expect.host.max_mem_fraction_static == 0.6
    assert pack.expect.host.memory_bandwidth_gbps == base.expect.host.memory_bandwidth_gbps  # merged, kept
    assert pack.expect.moe_runner_backend == base.expect.moe_runner_backend
    ids = [c.id for c in pack.checks]
    base_ids = [c.id for c in base.checks]
    assert ids == [i for i in base_ids if i != "perf.tpot"] + ["site.mem_fraction"]
    head = next(c for c in pack.checks if c.id == "lm_head.fp8")
    base_head = next(c for c in base.checks if c.id == "lm_head.fp8")
    assert head.severity == "warning"
    assert head.why == base_head.why and head.remedies == base_head.remedies
    # the same probe; its prompt file is the base pack's, named where it is (the site pack is elsewhere)
    assert pack.probe is not None and base.probe is not None
    assert replace(pack.probe, prompts=base.probe.prompts) == base.probe
    assert load_pack(str(site)).probe_prompts == load_pack(None).probe_prompts


def test_the_site_pack_drives_a_real_preflight(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    lint = run_cli("rules", "lint", str(site))
    assert lint.returncode == 0, lint.stderr
    argv = "python -m sglang.launch_server --model-path /m --mem-fraction-static 0.65"
    out = preflight_in_process("--rules", str(site), "--launch-cmd", argv, "--format", "json")
    results = {r["id"]: r for r in json_report(out.stdout)["checks"]}
    assert results["site.mem_fraction"]["status"] == "fail"  # 0.65 over the site's 0.6, under the base's 0.68
    assert results["lm_head.fp8"]["severity"] == "warning"
    assert out.returncode == 78


def test_a_declarative_checks_fields_fill_its_message_and_remedy(tmp_path: Path) -> None:
    """``{actual}``, ``{expected}`` and ``{fact}`` are a declarative check's own fields in every text
    ``rules lint`` lets name them: the message it shows and the remedy, with the pack's values beside."""
    site = tmp_path / "site.yaml"
    site.write_text(
        SITE.replace(
            "    remedy: Lower --mem-fraction-static.\n",
            "    remedy: Lower {fact} from {actual} to {expected} (the site's "
            "{expect.host.max_mem_fraction_static}).\n"
            "    fail_message: '{fact} is {actual}, over {expected}'\n",
        )
    )
    assert run_cli("rules", "lint", str(site)).returncode == 0
    argv = "python -m sglang.launch_server --model-path /m --mem-fraction-static 0.65"
    out = preflight_in_process("--rules", str(site), "--launch-cmd", argv, "--format", "json")
    result = {r["id"]: r for r in json_report(out.stdout)["checks"]}["site.mem_fraction"]
    assert result["status"] == "fail"
    assert result["message"] == "launch.args.mem_fraction_static is 0.65, over 0.6"
    assert result["remedy"] == "Lower launch.args.mem_fraction_static from 0.65 to 0.6 (the site's 0.6)."


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.yaml": "extends: ./b.yaml\n", "b.yaml": "extends: ./a.yaml\n"}, "packs deep"),
        ({"a.yaml": "extends: no-such-pack\n"}, "no built-in rule pack of that name"),
        ({"a.yaml": "extends: ./missing.yaml\n"}, "no such pack file"),
        ({"a.yaml": f"extends: {DEFAULT_PACK}\ndrop_checks: [no.such]\n"}, "'no.such' is not a check"),
        ({"a.yaml": "extends: [1]\n"}, "extends: must name a pack"),
        # a base whose checks are not a list: the base is named, never a TypeError (exit 1)
        ({"a.yaml": "extends: ./b.yaml\n", "b.yaml": "checks: 5\n"}, "checks must be a list"),
        ({"a.yaml": "extends: ./b.yaml\n", "b.yaml": "checks: {x: 1}\n"}, "checks must be a list"),
        # names the kernel refuses (ENAMETOOLONG): one line naming the pack, not an internal error
        ({"a.yaml": "extends: " + "d/" * 3000 + "x.yaml\n"}, "File name too long"),
        ({"a.yaml": "extends: " + "n" * 5000 + "\n"}, "File name too long"),
    ],
)
def test_mistakes_in_extends_name_the_file(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as exc:
        parse_pack(tmp_path / "a.yaml")
    assert message in str(exc.value) and str(tmp_path) in str(exc.value)
    cli = run_cli("rules", "lint", str(tmp_path / "a.yaml"))
    assert cli.returncode == 65 and message in cli.stderr and "Traceback" not in cli.stderr


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("n" * 5000, "File name too long"),  # a built-in pack's name, looked up as one file name
        # a path of PATH_MAX bytes or more is refused as the kernel refuses it, before any walk (one that
        # long of /../ was walked in quadratic time: red team 11, 9d80733)
        ("d/" * 3000 + "x.yaml", "File name too long"),
    ],
)
def test_a_pack_name_the_kernel_refuses_is_one_line(ref: str, why: str) -> None:
    cli = run_cli("rules", "--rules", ref, "list")
    err = cli.stderr.strip()
    assert cli.returncode == 65 and why in err and len(err.splitlines()) == 1, err[-300:]


def test_lint_refuses_a_figure_the_extended_pack_had(tmp_path: Path) -> None:
    """A site pack that raises the acceptance floor but keeps (or writes) prose quoting the old 1.5 would
    print the wrong number on every failure: ``rules lint`` names the text and the field to use."""
    site = tmp_path / "site.yaml"
    site.write_text(
        SITE.replace(
            "    severity: warning\n",
            "    severity: warning\n    why: Acceptance above 1.5 is what NEXTN buys.\n",
        )
    )
    out = run_cli("rules", "lint", str(site))
    assert out.returncode == 65, out.stdout + out.stderr
    assert "lm_head.fp8.why says 1.5, the extended pack's expect.accept_length_min" in out.stderr
    assert "this pack's is 2.5: write {expect.accept_length_min}" in out.stderr
    fixed = site.read_text().replace("above 1.5", "above {expect.accept_length_min}")
    site.write_text(fixed)
    assert run_cli("rules", "lint", str(site)).returncode == 0


def test_lint_notes_a_figure_written_as_a_number(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE.replace("Our Spark also runs the desktop.", "Keep it at or below 0.6 here."))
    out = run_cli("rules", "lint", str(site))
    assert out.returncode == 0
    assert (
        "note:" in out.stderr
        and "site.mem_fraction.why writes expect.host.max_mem_fraction_static (0.6)" in (out.stderr)
    )


def test_shipped_recipes_are_written_as_changes_to_the_default_pack() -> None:
    """The DSpark, cookbook and baseline packs extend the default pack: each check text lives once, and
    an entry that names a check of the default pack changes something (no copy creeping back)."""
    import yaml

    from validator.rulepack import builtin_packs_dir, list_builtin_packs

    base = {c.id: c for c in load_pack(None).pack.checks}
    raw_base = {
        c["id"]: c
        for c in yaml.safe_load((builtin_packs_dir() / f"{DEFAULT_PACK}.yaml").read_text())["checks"]
    }
    derived = [p for p in list_builtin_packs() if p.stem != DEFAULT_PACK]
    assert len(derived) >= 3
    for path in derived:
        raw = yaml.safe_load(path.read_text())
        assert raw["extends"] == DEFAULT_PACK, path.name
        for entry in raw.get("checks") or []:
            if entry["id"] in base:
                same = [k for k, v in entry.items() if k != "id" and raw_base[entry["id"]].get(k) == v]
                assert not same, (path.name, entry["id"], same)


CLUSTER_PACK = Path(__file__).resolve().parents[1] / "deploy/cluster/ling-3.0-flash-dgx-spark-tp2.yaml"


def test_a_site_pack_in_the_operators_directory_probes_with_the_base_packs_prompts(tmp_path: Path) -> None:
    """The shipped cluster pack saved in an operator's own directory, which holds no prompt file: the
    probe reads the built-in pack's prompts (the pack that names them), so the broken draft fails
    ``spec.accept_length`` as under the built-in pack (78), never "probe-prompts.yaml: no such file"."""
    from tests.support.sim_process import sim_process

    site = tmp_path / "srv" / "our-spark.yaml"
    site.parent.mkdir(mode=0o700)
    site.write_text(CLUSTER_PACK.read_text())
    assert run_cli("rules", "lint", str(site)).returncode == 0
    with sim_process(tmp_path, "--scenario", "draft-head-weight-only") as sim:
        argv = ["check", "--url", sim.url, "--rules", str(site), "--attestation", str(sim.attestation)]
        out = run_cli(*argv, "--format", "json", timeout=120)
    results = {r["id"]: r for r in json_report(out.stdout)["checks"]}
    assert results["spec.accept_length"]["status"] == "fail", results["spec.accept_length"]
    assert "no such file" not in out.stdout + out.stderr
    assert out.returncode == 78, out.stderr


def test_a_prompt_file_named_by_the_site_pack_is_beside_the_site_pack(tmp_path: Path) -> None:
    """Each pack's files resolve against that pack: the site pack's own prompt file is found beside it,
    and ``rules lint`` reads it (a missing or malformed one is a lint problem naming it, exit 65)."""
    site = tmp_path / "site.yaml"
    site.write_text(SITE + "probe:\n  prompts: our-prompts.yaml\n")
    lint = run_cli("rules", "lint", str(site))
    assert lint.returncode == 65 and f"{tmp_path}/our-prompts.yaml" in lint.stderr, lint.stderr
    assert "no such file" in lint.stderr and "Traceback" not in lint.stderr
    (tmp_path / "our-prompts.yaml").write_text("prompts: 5\n")
    lint = run_cli("rules", "lint", str(site))
    assert lint.returncode == 65 and "non-empty 'prompts' list" in lint.stderr, lint.stderr
    (tmp_path / "our-prompts.yaml").write_text("prompts:\n  - {id: one, text: Count to ten.}\n")
    assert run_cli("rules", "lint", str(site)).returncode == 0
    loaded = load_pack(str(site))
    assert loaded.probe_prompts == tmp_path / "our-prompts.yaml"


def test_a_pack_over_a_site_pack_keeps_the_site_packs_prompts(tmp_path: Path) -> None:
    """Three deep: a team pack in another directory over the site pack over the built-in one; the prompt
    file the site pack names is still the site pack's."""
    (tmp_path / "site").mkdir()
    (tmp_path / "team").mkdir()
    (tmp_path / "site" / "site.yaml").write_text(SITE + "probe:\n  prompts: our-prompts.yaml\n")
    (tmp_path / "site" / "our-prompts.yaml").write_text("prompts:\n  - {id: one, text: Count to ten.}\n")
    team = tmp_path / "team" / "team.yaml"
    team.write_text("extends: ../site/site.yaml\nmetadata:\n  name: team-spark\n")
    assert run_cli("rules", "lint", str(team)).returncode == 0
    assert load_pack(str(team)).probe_prompts == tmp_path / "site" / "our-prompts.yaml"
    from validator.rulepack import builtin_packs_dir

    site = load_pack(str(tmp_path / "site" / "site.yaml"))
    assert site.probe_prompts == tmp_path / "site" / "our-prompts.yaml"
    plain = tmp_path / "team" / "plain.yaml"
    plain.write_text(SITE)
    assert load_pack(str(plain)).probe_prompts == builtin_packs_dir() / "probe-prompts.yaml"


def test_a_second_user_chooses_no_file_a_site_pack_probes_with(
    tmp_path: Path, attacker: User, shared: Path
) -> None:
    """As a real second local user, in a directory anyone may write: a base pack planted there, and a
    prompt file planted where the operator's pack names it, are both refused by ``rules lint`` with the
    file named (exit 65), never read (the prompts decide what the acceptance probe measures)."""
    from tests.support.second_user import run_as

    evil_prompts = "prompts:\n  - {id: evil, text: Repeat the letter a forever.}\n"
    for name, text in (
        ("base.yaml", f"extends: {DEFAULT_PACK}\nmetadata: {{name: planted}}\nprobe: {{prompts: p.yaml}}\n"),
        ("p.yaml", evil_prompts),
    ):
        planted = run_as(attacker, ["sh", "-c", f"cat > {shared / name}"], input=text.encode())
        assert planted.returncode == 0, planted.stderr
    site = tmp_path / "site.yaml"
    site.write_text(f"extends: {shared / 'base.yaml'}\nmetadata:\n  name: site\n")
    lint = run_cli("rules", "lint", str(site))
    assert lint.returncode == 65 and str(shared / "base.yaml") in lint.stderr, lint.stderr
    assert "Traceback" not in lint.stderr
    # the operator's own pack names a prompt file in the shared directory: the planted file is refused
    own = tmp_path / "own.yaml"
    own.write_text(SITE + f"probe:\n  prompts: {shared / 'p.yaml'}\n")
    lint = run_cli("rules", "lint", str(own))
    assert lint.returncode == 65 and f"probe.prompts: {shared / 'p.yaml'}" in lint.stderr, lint.stderr
    assert "writable" in lint.stderr and "Traceback" not in lint.stderr


def test_lint_of_a_site_pack_names_its_own_checks_and_every_stage(tmp_path: Path) -> None:
    """A site pack's mistakes are located in the site pack: each check by its id and its own line (not
    its position in the merged pack, 7 or 30), and a problem of the second stage (a value_from naming no
    expectation) is listed beside the schema's (a bad severity), not after it is fixed."""
    site = tmp_path / "site.yaml"
    site.write_text(
        f"extends: {DEFAULT_PACK}\n"
        "metadata:\n  name: site\n"
        "checks:\n"
        "  - id: lm_head.fp8\n"
        "    severity: bogus\n"
        "  - id: site.x\n"
        "    title: t\n    severity: critical\n    modes: [preflight]\n    why: w\n    remedy: r\n"
        "    expect: {fact: launch.args.mem_fraction_static, op: '<=', value_from: host.nope}\n"
    )
    lint = run_cli("rules", "lint", str(site))
    lines = [line for line in lint.stderr.splitlines() if line.strip()]
    assert lint.returncode == 65 and "Traceback" not in lint.stderr
    assert lines == [
        f"spark-validate: {site}:6: checks[lm_head.fp8].severity: Input should be 'critical', 'warning' or "
        "'info'",
        f"spark-validate: {site}:13: checks[site.x].expect.value_from: site.x: the pack has no expectation "
        "'host.nope'",
    ], lines


@pytest.mark.parametrize("own_checks", ["", "checks:\n  - id: lm_head.fp8\n    severity: warning\n"])
def test_a_mistake_in_an_extended_packs_check_is_named_by_its_id(tmp_path: Path, own_checks: str) -> None:
    """A site pack's bad check, met through a team pack over it: the merged position (checks[31]) means
    nothing in the team's file, so the check is named by id at the team's ``extends:`` line, whether or
    not the team pack has checks of its own."""
    (tmp_path / "site.yaml").write_text(
        f"extends: {DEFAULT_PACK}\nmetadata: {{name: site, description: d}}\nchecks:\n"
        "  - id: site.x\n    title: X\n    severity: urgent\n    modes: [preflight]\n    why: w\n"
        '    remedy: r\n    expect: {fact: launch.args.mem_fraction_static, op: "<=", value: 0.8}\n'
    )
    team = tmp_path / "team.yaml"
    team.write_text(
        "apiVersion: spark-validate/v1\nkind: RulePack\nmetadata: {name: team, description: d}\n"
        f"extends: ./site.yaml\nexpect:\n  accept_length_min: 2.5\n{own_checks}"
    )
    lint = run_cli("rules", "lint", str(team))
    assert lint.returncode == 65, lint.stderr
    assert f"{team}:4: checks[site.x].severity (from the extended pack)" in lint.stderr, lint.stderr
