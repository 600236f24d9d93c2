"""Reading a server log saved through Docker against the same log saved plain, in the same run.

``docker compose logs`` puts ``SERVICE  | `` before every line and ``docker logs --timestamps`` an RFC 3339
stamp; the follower reads behind the wrapper with the same byte-level bulk count it uses for a plain log
(``validator/sources/server/log_grammar.py``), so the goal is a read within 1.5x of the plain log's at every
size. Each log holds one start and N ``Decode batch`` lines with ``accept len``; best of three reads
through ``read_server_log``.
Run: ``python -m bench.log_wrappers [--lines 50000,200000]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from validator.sources.server.log import read_server_log

START = (
    "[2026-11-29 15:00:00] server_args={'model_path': '/models/Ling-3.0-flash-fp4', 'tp_size': 1, "
    "'moe_runner_backend': 'humming', 'speculative_algorithm': 'EAGLE', 'speculative_num_steps': 3, "
    "'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 4}"
)
DECODE = (
    "[2026-11-29 15:00:01 TP0] Decode batch, #running-req: 1, #token: 3121, token usage: 0.00, "
    "accept len: 3.05, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 58.50, #queue-req: 0"
)
WRAPPERS: dict[str, Callable[[str], str]] = {
    "plain": lambda line: line,
    "compose": lambda line: "qwen35-4b-sglang  | " + line,
    "timestamps": lambda line: "2026-11-29T15:00:01.123456789Z " + line,
    "compose -t": lambda line: "qwen35-4b-sglang  | 2026-11-29T15:00:01.123456789Z " + line,
}


def _best(path: Path, lines: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        facts = read_server_log(path)
        best = min(best, time.perf_counter() - t0)
        assert facts.decode_sample_count == lines and facts.unusable() is None, facts.unusable()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", default="50000,200000")
    args = parser.parse_args()
    sizes = [int(n) for n in args.lines.split(",")]
    print(f"{'decode lines':>12} {'wrapper':>11} {'MB':>6} {'read ms':>9} {'ratio':>6}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            plain_s = 0.0
            for name, wrap in WRAPPERS.items():
                path = Path(tmp) / f"{n}-{name.replace(' ', '')}.log"
                path.write_text("".join(wrap(x) + "\n" for x in [START] + [DECODE] * n), encoding="utf-8")
                took = _best(path, n)
                plain_s = took if name == "plain" else plain_s
                ratio = took / plain_s if plain_s else float("nan")
                worst = max(worst, ratio)
                mb = path.stat().st_size / 2**20
                print(f"{n:>12} {name:>11} {mb:>6.1f} {took * 1000:>9.1f} {ratio:>6.2f}")
    print(f"goal: every wrapper within 1.5x of the plain log (worst {worst:.2f})")
    return 0 if worst <= 1.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
