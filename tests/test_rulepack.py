"""Rule packs: the shipped pack is valid, a malformed pack is rejected with file, line and reason (exit 65),
waivers need a justification and stop applying when they expire."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.contract_ids import CONTRACT_CHECK_IDS
from tests.support.private_dir import trusted_copy
from validator.engine import waiver_for
from validator.errors import InputError
from validator.rulepack import DEFAULT_PACK, load_pack, parse_pack

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "rules" / f"{DEFAULT_PACK}.yaml"


def test_default_pack_states_the_recipe() -> None:
    pack = load_pack(None).pack
    e = pack.expect
    assert e.moe_runner_backend == "humming"
    assert e.lm_head_dtype == "float8_e4m3fn"
    assert (e.speculative.num_steps, e.speculative.eagle_topk, e.speculative.num_draft_tokens) == (3, 1, 4)
    assert e.accept_length_min == 1.5
    assert e.checkpoint.lm_head_shape == (157184, 2560)
    assert e.host.max_mem_fraction_static == 0.68
    ids = {c.id for c in pack.checks}
    assert set(CONTRACT_CHECK_IDS) <= ids


def _mutate(tmp_path: Path, old: str, new: str) -> Path:
    text = PACK.read_text()
    assert old in text
    p = tmp_path / "pack.yaml"
    p.write_text(text.replace(old, new, 1))
    return p


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_wrong_type_names_file_line_and_field(tmp_path: Path) -> None:
    p = _mutate(tmp_path, "num_steps: 3", "num_steps: three")
    with pytest.raises(InputError) as exc:
        parse_pack(p)
    assert exc.value.line == _line_of(p, "num_steps: three")
    assert str(p) in str(exc.value)
    assert "expect.speculative.num_steps" in str(exc.value)


def test_bad_severity_in_a_list_item_points_at_its_line(tmp_path: Path) -> None:
    p = _mutate(tmp_path, "    severity: info\n", "    severity: loud\n")
    with pytest.raises(InputError) as exc:
        parse_pack(p)
    assert exc.value.line == _line_of(p, "severity: loud")
    assert "checks[" in str(exc.value) and "severity" in str(exc.value)


def test_unknown_key_is_rejected(tmp_path: Path) -> None:
    p = _mutate(
        tmp_path, "  moe_runner_backend: humming\n", "  moe_runner_backend: humming\n  moe_backnd: x\n"
    )
    with pytest.raises(InputError, match="moe_backnd"):
        parse_pack(p)


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("apiVersion: spark-validate/v1\nkind: RulePack\nmetadata: [unclosed\n")
    with pytest.raises(InputError) as exc:
        parse_pack(p)
    assert exc.value.line is not None and exc.value.line >= 3
    assert "invalid YAML" in str(exc.value)


def test_duplicate_check_ids_rejected(tmp_path: Path) -> None:
    p = _mutate(tmp_path, "  - id: lm_head.exclusive", "  - id: lm_head.fp8")
    with pytest.raises(InputError, match="duplicate check id"):
        parse_pack(p)


WAIVER = """waivers:
  - check: moe.humming_runtime
    justification: cache is warmed by the image build, see OPS-1234
    expires: {date}
"""


def test_waiver_applies_until_it_expires(tmp_path: Path) -> None:
    p = _mutate(tmp_path, "waivers: []\n", WAIVER.format(date="2027-01-31"))
    pack = parse_pack(p)
    assert waiver_for(pack.waivers, "moe.humming_runtime", dt.date(2027, 1, 31)) is not None
    assert waiver_for(pack.waivers, "moe.humming_runtime", dt.date(2027, 2, 1)) is None


def test_waiver_needs_justification_and_known_check(tmp_path: Path) -> None:
    p = _mutate(
        tmp_path,
        "waivers: []\n",
        WAIVER.format(date="2027-01-31").replace("cache is warmed by the image build, see OPS-1234", "ok"),
    )
    with pytest.raises(InputError, match="justification"):
        parse_pack(p)
    p = _mutate(
        tmp_path, "waivers: []\n", WAIVER.format(date="2027-01-31").replace("moe.humming_runtime", "nope.x")
    )
    with pytest.raises(InputError, match="unknown check"):
        parse_pack(p)


def test_rules_lint_cli_exit_codes(tmp_path: Path) -> None:
    trusted_copy(PACK.parent / "probe-prompts.yaml", tmp_path / "shipped")  # the pack's prompts, beside it
    ok = run_cli("rules", "lint", str(trusted_copy(PACK, tmp_path / "shipped")))
    assert ok.returncode == 0, ok.stderr
    bad = _mutate(tmp_path, "accept_length_min: 1.5", "accept_length_min: [1]")
    res = run_cli("rules", "lint", str(bad))
    assert res.returncode == 65
    line = _line_of(bad, "accept_length_min: [1]")
    assert res.stderr.strip().startswith(f"spark-validate: {bad}:{line}: expect.accept_length_min")
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_rules_lint_rejects_unknown_builtin(tmp_path: Path) -> None:
    p = _mutate(tmp_path, "  - id: env.undeclared", "  - id: env.undeclared_typo")
    res = run_cli("rules", "lint", str(p))
    assert res.returncode == 65 and "env.undeclared_typo" in res.stderr


def test_rules_show_and_list() -> None:
    res = run_cli("rules", "show", "spec.lm_head_shared")
    assert res.returncode == 0
    assert "set_lm_head_from_target" in res.stdout and "critical" in res.stdout
    assert run_cli("rules", "show", "no.such").returncode == 2
    listing = run_cli("rules", "list")
    assert listing.returncode == 0 and "moe.backend" in listing.stdout
