"""The installed-package readers (humming, SGLang) against hostile files where a module should be: a file
over the read cap whose code past the cap decides the verdict, nesting past the parser's limits, a FIFO,
``/dev/zero``. None may pass what was not read whole, raise, or block."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from validator.sources.host import humming
from validator.sources.host.humming import gb10_bandwidth_safe
from validator.sources.sglang import install as sglang_install
from validator.sources.sglang.install import read_sglang_install

UNGUARDED = (
    "import pynvml\n"
    "def calculate_gpu_bandwidth(h):\n"
    "    return pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)\n"
)


def _humming(tmp_path: Path, text: str) -> Path:
    package = tmp_path / "humming"
    (package / "utils").mkdir(parents=True)
    (package / "utils" / "device.py").write_text(text)
    return package


def test_a_humming_module_over_the_cap_is_no_verdict(tmp_path: Path) -> None:
    """Padding puts the unguarded query past the bytes read: 'safe' would be a pass for a start that dies."""
    assert gb10_bandwidth_safe(_humming(tmp_path, UNGUARDED))[0] is False  # control
    padded = "#" + "x" * humming._FILE_CAP + "\n" + UNGUARDED
    verdict, why = gb10_bandwidth_safe(_humming(tmp_path / "padded", padded))
    assert verdict is None and "not read whole" in why, why


def test_a_humming_package_past_the_entry_limit_is_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modules past the limit were once left unread and the verdict 'safe' stood on the rest."""
    package = _humming(tmp_path, UNGUARDED)
    for i in range(3):
        (package / f"a{i}.py").write_text("X = 1\n")
    monkeypatch.setattr(humming, "_MAX_ENTRIES", 3)
    assert gb10_bandwidth_safe(package) == (None, "humming's package holds over 3 entries, not read whole")
    monkeypatch.setattr(humming, "_MAX_ENTRIES", 4)
    assert gb10_bandwidth_safe(package)[0] is False


def test_humming_modules_that_mention_the_query_are_parsed_within_a_budget(tmp_path: Path) -> None:
    """Red team 19: every module under the 2 MB cap that mentions NVML_CLOCK_MEM was parsed; 200 of another
    user's modules of 330,000 statements each took root's preflight 372 s (20,000, the entry limit, hours).
    Past _PARSE_CAP bytes of such modules in all there is no verdict, and none is parsed further."""
    package = _humming(tmp_path, UNGUARDED)
    dense = "x = 1\n" * 330_000 + "# NVML_CLOCK_MEM\n"
    for i in range(20):
        (package / f"m{i}.py").write_text(dense)
    started = time.monotonic()
    verdict, why = gb10_bandwidth_safe(package)
    assert verdict is None and "over 1000000 bytes together" in why, why
    assert time.monotonic() - started < 5
    assert gb10_bandwidth_safe(_humming(tmp_path / "plain", UNGUARDED))[0] is False  # control


def test_humming_modules_over_the_read_budget_are_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 modules at the 2 MB file cap are 40 GB of reading (red team 19): the scan stops at a total,
    with no verdict; the real package (under 1 MB) is far below it."""
    package = _humming(tmp_path, UNGUARDED)
    for i in range(4):
        (package / f"a{i}.py").write_text("X = 1\n" * 100)
    monkeypatch.setattr(humming, "_READ_CAP", 1000)
    assert gb10_bandwidth_safe(package) == (
        None,
        "humming's modules are over 1000 bytes together, not read whole",
    )
    monkeypatch.setattr(humming, "_READ_CAP", 100_000)
    assert gb10_bandwidth_safe(package)[0] is False


def test_sglang_sources_not_read_whole_leave_an_undeclared_variable_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``env.undeclared`` says SGLang "silently ignores" a variable found in none of its sources: past the
    read's limits a source left unread may read it, so that is no verdict, not a warning."""
    from functools import partial

    from validator.checks.base import CheckContext
    from validator.checks.env import env_undeclared
    from validator.facts import Facts, LaunchFacts, SGLangInstallFacts
    from validator.pack_schema import Expectations
    from validator.report import Status
    from validator.rulepack import load_pack

    root = tmp_path / "sglang"
    (root / "srt").mkdir(parents=True)
    for name in ("a", "b", "c"):
        (root / "srt" / f"{name}.py").write_text("X = 1\n")
    (root / "srt" / "d.py").write_text("import os\nos.environ.get('SGLANG_READ_HERE')\n")
    wanted = {"SGLANG_READ_HERE", "SGLANG_NOWHERE"}
    assert sglang_install.referenced_env(root, wanted) == {"SGLANG_READ_HERE"}
    monkeypatch.setattr(sglang_install, "read_below", partial(sglang_install.read_below, limit=3))
    assert sglang_install.referenced_env(root, wanted) is None

    spec = next(c for c in load_pack(None).pack.checks if c.id == "env.undeclared")
    ctx = CheckContext(spec=spec, expect=Expectations(), mode="preflight")
    launch = LaunchFacts(
        origin="--launch-cmd", argv=[], entry="launch_server", interpreter=None, args={}, explicit=set(),
        env={"SGLANG_NOWHERE": "1"},
    )  # fmt: skip

    def judged(referenced: set[str] | None) -> tuple[Status, str]:
        sg = SGLangInstallFacts(root=root, located_by="test", version="0.5.23", declared_env={"SGLANG_X"})
        sg.referenced_env = referenced
        outcome = env_undeclared(Facts(launch=launch, sglang=sg), ctx)
        return outcome.status, outcome.message

    assert judged(set()) == (Status.WARN, "SGLang 0.5.23 does not declare SGLANG_NOWHERE: silently ignored")
    assert judged(None) == (
        Status.ERROR,
        f"SGLang's sources under {root} were not read whole: whether it reads SGLANG_NOWHERE is unknown",
    )


def test_a_humming_module_nested_past_the_parser_is_no_verdict(tmp_path: Path) -> None:
    deep = "x = " + "+".join(["1"] * 200_000) + "\n" + UNGUARDED
    verdict, why = gb10_bandwidth_safe(_humming(tmp_path, deep))
    assert verdict is None and "not valid Python" in why, why


def _sglang(tmp_path: Path) -> Path:
    root = tmp_path / "sglang"
    (root / "srt" / "models").mkdir(parents=True)
    (root / "srt" / "arg_groups").mkdir()
    (root / "srt" / "arg_groups" / "choices.py").write_text('MOE_RUNNER_BACKEND_CHOICES = ["triton"]\n')
    return root


def test_sglang_sources_nested_too_deeply_or_over_the_cap_are_notes(tmp_path: Path) -> None:
    root = _sglang(tmp_path)
    assert read_sglang_install(root, "t").moe_runner_backends == ["triton"]  # control
    (root / "srt" / "environ.py").write_text("x = " + "+".join(["1"] * 200_000) + "\n")
    facts = read_sglang_install(root, "t")
    assert facts.note is not None and "srt/environ.py: does not parse (nested too deeply)" in facts.note
    # the list of backends past the cap: a cut file that parses would otherwise name no humming, or any
    choices = root / "srt" / "arg_groups" / "choices.py"
    choices.write_text("#" * sglang_install._SOURCE_CAP + '\nMOE_RUNNER_BACKEND_CHOICES = ["humming"]\n')
    facts = read_sglang_install(root, "t")
    assert facts.moe_runner_backends is None and "not read whole" in (facts.note or ""), facts.note


@pytest.mark.timeout(30)  # the FIFO blocked open() for ever before
def test_a_fifo_or_dev_zero_among_the_model_files_is_skipped_not_waited_on(tmp_path: Path) -> None:
    root = _sglang(tmp_path)
    # draft model files by their names (the reader opens those), before and after the real one
    os.mkfifo(root / "srt" / "models" / "aaa_fifo_nextn.py")
    (root / "srt" / "models" / "aab_zero_mtp.py").symlink_to("/dev/zero")
    (root / "srt" / "models" / "bailing_moe_nextn.py").write_text("class Other:\n    pass\n")
    (root / "srt" / "models" / "zz_mtp.py").write_text("class BailingMoeForCausalLMNextN:\n    pass\n")
    started = time.monotonic()
    facts = read_sglang_install(root, "t")
    assert time.monotonic() - started < 10
    assert facts.draft_share_hook == {"Other": False, "BailingMoeForCausalLMNextN": False}, facts.note


@pytest.mark.parametrize(
    ("version", "read"),
    [
        (b"0.6.3", "0.6.3"),
        (b"0.6.3\x00", None),  # raised ValueError (embedded null byte) in the kernel scan
        (b"../../../../tmp/elsewhere", None),  # pointed the kernel scan at another directory
        (b"/etc", None),
        (b"..", None),
        (b"a" * 5000, None),
        (b"1.0.0rc1+cu128", "1.0.0rc1+cu128"),
    ],
)
def test_a_dist_version_that_is_no_version_is_not_used_as_a_path(
    tmp_path: Path, version: bytes, read: str | None
) -> None:
    from validator.sources.host.flashinfer import read_flashinfer

    info = tmp_path / "site" / "flashinfer_python-0.6.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(
        b"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: " + version + b"\n\n"
    )
    facts = read_flashinfer({}, site_dirs=[tmp_path / "site"], home=tmp_path, sglang_redirects=None)
    assert facts.python_version == read
    if read is None:
        assert facts.note is not None and "no Version in METADATA" in facts.note
