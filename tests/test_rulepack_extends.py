"""``extends:``: a pack written as the changes to another (a site's pack over a built-in recipe, a recipe
over its base), merged check by check, and the mistakes an author makes in one (a loop, a missing base,
a dropped check that does not exist) refused with the file named (exit 65)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import json_report, run_cli
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
    assert pack.probe == base.probe


def test_the_site_pack_drives_a_real_preflight(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    lint = run_cli("rules", "lint", str(site))
    assert lint.returncode == 0, lint.stderr
    argv = "python -m sglang.launch_server --model-path /m --mem-fraction-static 0.65"
    out = run_cli("preflight", "--rules", str(site), "--launch-cmd", argv, "--format", "json")
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
    out = run_cli("preflight", "--rules", str(site), "--launch-cmd", argv, "--format", "json")
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


@pytest.mark.parametrize("ref", ["n" * 5000, "d/" * 3000 + "x.yaml"])
def test_a_pack_name_the_kernel_refuses_is_one_line(ref: str) -> None:
    cli = run_cli("rules", "--rules", ref, "list")
    err = cli.stderr.strip()
    assert cli.returncode == 65 and "File name too long" in err and len(err.splitlines()) == 1, err


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
