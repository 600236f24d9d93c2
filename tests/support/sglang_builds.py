"""SGLang builds for tests: the real 0.5.23 files, optionally with the Ling-3.0 patch applied.

A build is a site-packages-like directory holding ``sglang/`` with the files the install reader looks at,
copied from the real wheel (tests.support.sglang_wheel). The patch is applied to those real files the way the
Ling-3.0 patch does it: ``SGLANG_ENABLE_FP8_LM_HEAD = EnvBool(False)`` declared inside ``class Envs``
like its neighbours, and ``set_lm_head_from_target`` on ``BailingMoeForCausalLMNextN``.
"""

from __future__ import annotations

import ast
import shutil
import stat
import sys
from pathlib import Path

from tests.support.sglang_wheel import SGLANG_VERSION, sglang_root, sglang_site

# The files the install reader parses, plus what makes ``sglang`` findable as a package.
FILES = (
    "__init__.py",
    "version.py",
    "_version.py",
    "srt/environ.py",
    "srt/models/bailing_moe_nextn.py",
    "srt/arg_groups/choices.py",
    "srt/speculative/eagle_worker_v2.py",  # init_lm_head: when the draft is given the head module
    # the tool-call parser table and the detectors model.tool_call_parser compares
    "srt/function_call/function_call_parser.py",
    "srt/function_call/ling3_detector.py",
    "srt/function_call/glm4_moe_detector.py",
    "srt/function_call/qwen25_detector.py",
)
DSPARK_WORKER = "srt/speculative/dspark_components/dspark_worker_v2.py"


def make_build(
    site: Path,
    *,
    fp8_lm_head: bool = True,
    share_hook: bool = True,
    plugins: dict[str, str] | None = None,
    dspark: bool = False,
) -> Path:
    """Write a build into ``site`` and return its ``sglang`` root. With both flags False it is stock.
    ``dspark`` adds the real DSpark worker and draft model files (what the install reader parses)."""
    src = sglang_root()
    root = site / "sglang"
    files = list(FILES)
    if dspark:
        files.append(DSPARK_WORKER)
        files += [str(p.relative_to(src)) for p in sorted((src / "srt" / "models").glob("*dspark*.py"))]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, root / rel)
    dist = f"sglang-{SGLANG_VERSION}.dist-info"
    shutil.copytree(sglang_site() / dist, site / dist, dirs_exist_ok=True)
    if fp8_lm_head:
        patch_environ(root / "srt" / "environ.py")
    if share_hook:
        patch_nextn(root / "srt" / "models" / "bailing_moe_nextn.py")
    if plugins:
        ep = site / "plugin_pkg-1.0.dist-info"
        ep.mkdir(exist_ok=True)
        lines = "".join(f"{k} = {v}\n" for k, v in plugins.items())
        (ep / "entry_points.txt").write_text(f"[console_scripts]\nx = y:z\n\n[sglang.srt.plugins]\n{lines}")
    return root


def patch_environ(path: Path) -> None:
    """Declare the FP8-head switch as the last field of ``class Envs``, in the file's own style."""
    text = path.read_text()
    envs = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "Envs")
    end = envs.body[-1].end_lineno
    assert end is not None
    lines = text.splitlines(keepends=True)
    addition = (
        "\n    # Ling-3.0: quantize only the LM head to FP8 at load (dynamic activation scheme).\n"
        "    SGLANG_ENABLE_FP8_LM_HEAD = EnvBool(False)\n"
    )
    path.write_text("".join([*lines[:end], addition, *lines[end:]]))


def patch_nextn(path: Path) -> None:
    """Add ``set_lm_head_from_target`` right before ``set_embed_and_head`` in the NEXTN draft class."""
    text = path.read_text()
    cls = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.ClassDef) and n.name == "BailingMoeForCausalLMNextN"
    )
    anchor = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "set_embed_and_head")
    lines = text.splitlines(keepends=True)
    addition = (
        "    def set_lm_head_from_target(self, lm_head):\n"
        '        """Share the target\'s whole LM-head module (quant method and scales included)."""\n'
        "        self.lm_head = lm_head\n\n"
    )
    start = anchor.lineno - 1 - len(anchor.decorator_list)
    path.write_text("".join([*lines[:start], addition, *lines[start:]]))


def fake_interpreter(bin_dir: Path, site: Path | None, *, delay_s: float = 0.0) -> Path:
    """A ``python`` wrapper on disk that runs this interpreter with ``site`` first on its path (like a
    server venv), after an optional delay spent in a child process (to exercise timeouts)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "python"
    pythonpath = f'PYTHONPATH="{site}"; export PYTHONPATH\n' if site else "unset PYTHONPATH\n"
    sleep = f"sleep {delay_s}\n" if delay_s else ""
    script.write_text(f'#!/bin/sh\n{pythonpath}{sleep}exec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script
