"""Runs the property tests of ``tests/fuzz_hostile.py`` (the client's reply handling and every input
parser) in a child pytest under ``RLIMIT_AS``, and bounds the whole child: an unbounded allocation fails
there within a second instead of swapping the host, and its peak RSS is asserted here."""

from __future__ import annotations

from tests.support.bounded_run import run_bounded

CHILD_AS = 3 << 30  # pytest + hypothesis + httpx map ~1 GiB of address space before the first example
CHILD_RSS_MB = 200  # the project's bound; measured 71 MB (interpreter, pytest, hypothesis, one capped reply)


def test_fuzz_suite_within_memory_and_time_bounds() -> None:
    res = run_bounded(
        ["-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider", "tests/fuzz_hostile.py"],
        module="pytest",
        as_limit=CHILD_AS,
        timeout=280,
    )
    assert not res.timed_out, res.stdout[-3000:]
    assert res.rc == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "6 passed" in res.stdout, res.stdout[-2000:]
    assert res.peak_rss_mb < CHILD_RSS_MB, f"fuzz child peaked at {res.peak_rss_mb:.0f} MB"
