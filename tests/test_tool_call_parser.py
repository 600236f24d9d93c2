"""``--tool-call-parser glm`` under SGLang 0.5.23 (issue 29, item 8): the warning says what really differs,
read from the build's own detectors, not "tool calls come back as text".

In 0.5.23 (the real wheel's ``srt/function_call/``) ``glm`` and ``glm45`` map to ``Glm4MoeDetector``;
``ling3`` maps to ``Ling3Detector(Glm4MoeDetector)``, which redefines only the two patterns that also
accept the forms without a newline after the function name. A call with the newline parses alike under
both. Each case runs the real CLI on the real files; the controls: ``ling3`` passes, ``qwen25`` (unrelated)
still says the calls come back as text, and a build whose ``ling3`` detector does not extend ``glm``'s
says so too (the relation is read, never assumed).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process import preflight_json_in_process
from tests.support.sglang_wheel import sglang_root

PARSER = "model.tool_call_parser"


def _cmd(parser: str) -> str:
    return (
        f"{shlex.quote(sys.executable)} -m sglang.launch_server --model-path /m --tool-call-parser {parser}"
    )


def _judged(root: Path, parser: str) -> dict[str, Any]:
    rc, report, err = preflight_json_in_process(
        {"PATH": "/usr/bin:/bin"}, "--launch-cmd", _cmd(parser), "--sglang-root", str(root), "--check", PARSER
    )
    assert report, (rc, err)
    (result,) = [c for c in report["checks"] if c["id"] == PARSER]
    return result


@pytest.mark.parametrize("parser", ["glm", "glm45"])
def test_glm_warns_with_what_ling3_adds(parser: str) -> None:
    result = _judged(sglang_root(), parser)
    assert result["status"] == "warn", result
    msg = result["message"]
    assert f"--tool-call-parser {parser} parses with Glm4MoeDetector" in msg, msg
    assert "Ling3Detector extends, redefining only _STREAMING_PARTIAL_PATTERN, func_detail_regex" in msg, msg
    assert "emit the first argument tag immediately" in msg  # the build's own docstring, quoted
    assert result["evidence"]["redefines"] == ["_STREAMING_PARTIAL_PATTERN", "func_detail_regex"]
    assert "reads everything the parser given reads" in (result["remedy"] or "")


def test_control_ling3_passes_and_an_unrelated_parser_loses_every_call() -> None:
    assert _judged(sglang_root(), "ling3")["status"] == "pass"
    other = _judged(sglang_root(), "qwen25")
    assert other["status"] == "warn" and "Qwen25Detector" in other["message"]
    assert "nor one it extends: the model's tool calls come back as text" in other["message"], other


def test_a_build_whose_ling3_does_not_extend_glm_says_so(tmp_path: Path) -> None:
    """The relation comes from the build: the same wheel with Ling3Detector rebased onto
    BaseFormatDetector makes glm an unrelated parser."""
    src = sglang_root()
    root = tmp_path / "sglang"
    for rel in ("srt/function_call/function_call_parser.py", "srt/function_call/glm4_moe_detector.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, root / rel)
    ling3 = (src / "srt/function_call/ling3_detector.py").read_text()
    rebased = ling3.replace(
        "from sglang.srt.function_call.glm4_moe_detector import Glm4MoeDetector",
        "from sglang.srt.function_call.base_format_detector import BaseFormatDetector",
    ).replace("class Ling3Detector(Glm4MoeDetector):", "class Ling3Detector(BaseFormatDetector):")
    assert rebased != ling3
    (root / "srt/function_call/ling3_detector.py").write_text(rebased)
    (root / "version.py").write_text('__version__ = "0.5.23"\n')
    result = _judged(root, "glm")
    assert result["status"] == "warn" and "nor one it extends" in result["message"], result
