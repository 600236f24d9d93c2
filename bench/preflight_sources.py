"""How long the preflight evidence sources take, against a baseline measured in the same run.

The baseline is starting a bare Python interpreter (``python -c pass``): the floor of any preflight, since
ExecStartPre starts one. Each source should cost a fraction of it. Run from the repository root:
``python -m bench.preflight_sources``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.checkpoint_factory import write_checkpoint
from tests.support.sglang_wheel import sglang_root
from validator.sources.host.checkpoint import read_checkpoint
from validator.sources.host.humming import read_humming
from validator.sources.host.platform import read_host
from validator.sources.host.safetensors_header import read_header
from validator.sources.sglang.install import read_sglang_install
from validator.sources.sglang.interpreter import probe_interpreter


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm the page cache, as a second start would be
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    root = sglang_root()
    with tempfile.TemporaryDirectory() as tmp:
        model = write_checkpoint(Path(tmp) / "ling", small=False, shards=8)
        head_shard = model / read_checkpoint(model).tensors["lm_head.weight"].file
        rows = [
            (
                "baseline: python -c pass",
                _median_ms(lambda: subprocess.run([sys.executable, "-c", "pass"]), 10),
            ),
            ("sglang: probe interpreter", _median_ms(lambda: probe_interpreter(sys.executable), 10)),
            ("sglang: read install (ast)", _median_ms(lambda: read_sglang_install(root, "bench"), 20)),
            ("checkpoint: 8 shards, real shapes", _median_ms(lambda: read_checkpoint(model), 50)),
            ("safetensors: one header", _median_ms(lambda: read_header(head_shard), 200)),
            (
                "humming",
                _median_ms(lambda: read_humming({"HOME": tmp}, site_dirs=None, service_user=None), 50),
            ),
            ("host", _median_ms(lambda: read_host(service_user=None), 200)),
        ]
    base = rows[0][1]
    print(f"{'source':36} {'median ms':>10} {'x baseline':>11}")
    for name, ms in rows:
        print(f"{name:36} {ms:10.2f} {ms / base:11.3f}")


if __name__ == "__main__":
    main()
