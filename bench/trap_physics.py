"""Acceptance length of the FP8-LM-head + MTP trap on CPU (tiny models, real torch, real greedy loop).

Run from the checkout: ``python -m bench.trap_physics [--seeds 5] [--tokens 128]``. Prints one
row per set-up: the stock build (draft holds only the FP8 tensor under an unquantized method), the
patched build (draft shares the module) and the stock build with the plugin's remedy; the ratio column is
against the stock row measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tests.support.plugin_trap import build, eagle_init_lm_head, speculative_generate
from validator.plugin import inspect as insp
from validator.plugin import remedy


def run(setup: str, seed: int, tokens: int) -> tuple[float, bool, float]:
    target, draft = build(seed=seed, with_share_method=setup == "patched")
    if setup == "remedy":
        remedy.apply_share_method(draft)
    eagle_init_lm_head(target, draft)
    shared = insp.sharing(target, [draft])["shared_module"]
    t0 = time.perf_counter()
    result = speculative_generate(target, draft, list(range(1, 17)), tokens)
    return result.accept_length, bool(shared), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    rows = {}
    for setup in ("stock", "patched", "remedy"):
        runs = [run(setup, seed, args.tokens) for seed in range(args.seeds)]
        rows[setup] = (
            statistics.mean(r[0] for r in runs),
            min(r[0] for r in runs),
            max(r[0] for r in runs),
            {r[1] for r in runs},
            sum(r[2] for r in runs),
        )
    base = rows["stock"][0]
    print(
        f"{'setup':<10} {'shared_module':<14} {'accept_len':>10} {'min':>6} {'max':>6}"
        f" {'vs stock':>9} {'loop_s':>7}"
    )
    for setup, (mean, lo, hi, shared, secs) in rows.items():
        flag = "/".join(sorted(str(s) for s in shared))
        print(f"{setup:<10} {flag:<14} {mean:>10.2f} {lo:>6.2f} {hi:>6.2f} {mean / base:>8.2f}x {secs:>7.2f}")
    print(
        f"({args.seeds} seeds, {args.tokens} tokens each;"
        " steps=3 topk=1 draft_tokens=4; vocab 32768, hidden 64)"
    )


if __name__ == "__main__":
    main()
