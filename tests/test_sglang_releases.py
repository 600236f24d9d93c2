"""The SGLang install reader against a release other than 0.5.23: SGLang 0.5.9 from PyPI, which predates
every piece the Spark recipes rely on. Each property is read from the release's own files first, then the
reader must report it (tests/test_sglang_install.py holds it to 0.5.23's wheel)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.pypi_wheels import SGLANG_OLD, sglang_old_site
from tests.support.sglang_wheel import sglang_root
from validator.sources.sglang.install import read_sglang_install


def _root() -> Path:
    return sglang_old_site() / "sglang"


def _mentions(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if needle in p.read_text(encoding="utf-8", errors="replace")
    )


def test_the_old_release_is_what_the_test_says() -> None:
    root = _root()
    assert (
        f"Version: {SGLANG_OLD}"
        in (sglang_old_site() / f"sglang-{SGLANG_OLD}.dist-info" / "METADATA").read_text()
    )
    assert _mentions(root, "DSPARK") == [] and not (root / "srt/speculative/dspark_components").exists()
    assert "SGLANG_ENABLE_FP8_LM_HEAD" not in (root / "srt/environ.py").read_text()
    assert "set_lm_head_from_target" not in (root / "srt/models/bailing_moe_nextn.py").read_text()
    assert not (root / "srt/arg_groups/choices.py").exists()
    server_args = (root / "srt/server_args.py").read_text()
    choices = re.search(r"MOE_RUNNER_BACKEND_CHOICES = \[(.*?)\]", server_args, re.DOTALL)
    assert choices is not None and '"flashinfer_mxfp4"' in choices.group(1)
    assert '"humming"' not in choices.group(1)


def test_reader_on_the_old_release() -> None:
    f = read_sglang_install(_root(), "test", dspark=True)
    assert f.version == SGLANG_OLD and f.note is None
    assert (
        f.declares("SGLANG_ENABLE_FP8_LM_HEAD") is False
        and f.draft_share_hook["BailingMoeForCausalLMNextN"] is False
    )
    assert f.moe_runner_backends is not None and "flashinfer_mxfp4" in f.moe_runner_backends
    assert "humming" not in f.moe_runner_backends
    assert f.dspark_supported is False and f.dspark_attaches_lm_head is None
    assert f.redirects_flashinfer_cache is False


def test_reader_on_0_5_23_knows_dspark() -> None:
    f = read_sglang_install(sglang_root(), "test", dspark=True)
    assert f.dspark_supported is True and f.dspark_attaches_lm_head is True
