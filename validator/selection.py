"""``--check ID`` / ``--skip ID``: which checks a run judges, chosen on the command line (kube-bench's
``--check`` and ``--skip``), beside the pack's waivers.

A waiver keeps a result visible but non-blocking, with a justification and an expiry, in the pack; a
selection is the operator's choice for one run. A check left out is still listed, as ``skip`` with a
message that says it was left out on request (a report never drops a check silently), it is never counted
as proven, and the coverage line names it. The command line builds it (``commands/common.py``: an ID that
no check has is a usage error naming it); the engine only reads it.
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
