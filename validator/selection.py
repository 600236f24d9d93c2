"""``--check ID`` / ``--skip ID``: which checks a run judges (kube-bench's flags), beside the pack's waivers.

A check left out is still listed, as ``skip`` saying it was left out on request (a report never drops a
check silently), never counted as proven, and named by the coverage line. The command line builds it (an
unknown ID is a usage error); the engine only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

ON_REQUEST = "skipped_on_request"  # evidence key marking a check left out by --check/--skip


@dataclass(frozen=True)
class Selection:
    only: frozenset[str] | None = None  # --check: judge these and no others
    skip: frozenset[str] = frozenset()  # --skip: judge all but these

    def excluded(self, check_id: str) -> str | None:
        """Why ``check_id`` is left out of this run, or None when it runs."""
        if check_id in self.skip:
            return f"skipped on request (--skip {check_id})"
        if self.only is not None and check_id not in self.only:
            return f"not selected (--check {', '.join(sorted(self.only))})"
        return None
