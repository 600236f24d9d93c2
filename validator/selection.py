"""``--check ID`` / ``--skip ID``: which checks a run judges, chosen on the command line (kube-bench's
``--check`` and ``--skip``), beside the pack's waivers.

A waiver keeps a result visible but non-blocking, with a justification and an expiry, in the pack; a
selection is the operator's choice for one run. A check left out is still listed, as ``skip`` with a
message that says it was left out on request (a report never drops a check silently), it is never counted
as proven, and the coverage line names it. An ID that no check has is a usage error (exit 2) naming it:
a typo must not leave the check it meant running unnoticed, nor skip nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from validator.checks.registry import builtins
from validator.errors import UsageError
from validator.recipe_match import CHECK_ID as AUTO
from validator.rulepack import list_builtin_packs, load_pack

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


def known_check_ids(pack_ids: Iterable[str] = ()) -> set[str]:
    """Every check ID a run can have: the builtin checks, the checks of every built-in pack, and those of
    the pack in use (a pack file may define checks of its own with ``expect``)."""
    ids = set(builtins()) | {AUTO} | set(pack_ids)
    for path in list_builtin_packs():
        ids.update(c.id for c in load_pack(str(path)).pack.checks)
    return ids


def selection_from(
    check: Sequence[str] | None, skip: Sequence[str] | None, pack_ids: Iterable[str] = ()
) -> Selection | None:
    """The selection ``--check``/``--skip`` ask for (None: every check), each ID checked to exist."""
    check, skip = list(check or ()), list(skip or ())
    if not check and not skip:
        return None
    known = known_check_ids(pack_ids)
    for flag, ids in (("--check", check), ("--skip", skip)):
        for check_id in ids:
            if check_id not in known:
                raise UsageError(
                    f"{flag} {check_id}: no check has this ID (`spark-validate rules list` lists them)"
                )
    both = sorted(set(check) & set(skip))
    if both:
        raise UsageError(f"--check and --skip both name {', '.join(both)}")
    return Selection(only=frozenset(check) if check else None, skip=frozenset(skip))
