"""What the simulator's HTTP replies look like per SGLang build family (``spark-validate sim --api-style``),
each taken from real artifacts (``tests/corpus/``, whose READMEs cite them), so the validator is not blind
to the shapes it was not built against: ``sglang-0.5.23`` (default; full ``/server_info`` and
``meta_info``, the only one with DSpark gauges), ``docs-2026`` (the 2026 docs builds: ``/server_info``
without ``startup_time``, ``launch_command``, ``frontend``, ``kv_events``), ``legacy`` (early 2025: only
``spec_verify_ct``, only ``/get_server_info``, metrics labelled by ``model_name`` alone) and ``aliases``
(a fork's count and histogram names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from validator.errors import UsageError

DEFAULT = "sglang-0.5.23"


@dataclass(frozen=True)
class ApiStyle:
    name: str
    server_info_absent: frozenset[str] = frozenset()  # top-level keys this family does not serve
    server_info_route: bool = True  # False: only the deprecated /get_server_info exists
    spec_meta: str = "current"  # "current", "legacy" (spec_verify_ct only) or "aliases"
    # the build has DSpark, whose two gauges (spec_cap_length, spec_block_accept_length) SGLang 0.5.23's
    # metrics_collector.py registers on every server, at 0 without DSpark; builds without DSpark lack them
    dspark_gauges: bool = False
    labels_model_name_only: bool = False  # older builds label every series with model_name alone


_NO_LATE_KEYS = frozenset({"startup_time", "launch_command", "frontend", "kv_events"})

STYLES: dict[str, ApiStyle] = {
    s.name: s
    for s in (
        ApiStyle(DEFAULT, dspark_gauges=True),  # every field this project reads
        ApiStyle("docs-2026", server_info_absent=_NO_LATE_KEYS),  # the docs builds g753da2753, g5dd2c243e
        ApiStyle(
            "legacy",
            server_info_absent=_NO_LATE_KEYS,
            server_info_route=False,
            spec_meta="legacy",
            labels_model_name_only=True,
        ),
        # the counts named spec_accept_token_num / spec_draft_token_num / spec_accept_histogram
        ApiStyle("aliases", server_info_absent=_NO_LATE_KEYS, spec_meta="aliases"),
    )
}


def resolve(name: str) -> ApiStyle:
    if name not in STYLES:
        raise UsageError(f"sim: unknown --api-style {name!r} (known: {', '.join(STYLES)})")
    return STYLES[name]


def spec_meta(
    style: ApiStyle,
    *,
    completion_tokens: int,
    verify_ct: int,
    correct: int,
    proposed: int,
    histogram: list[int],
) -> dict[str, Any]:
    """The speculative fields of a final ``meta_info`` in this family's names."""
    if style.spec_meta == "legacy":
        return {"spec_verify_ct": verify_ct}
    rate = correct / proposed if proposed else 0.0
    length = completion_tokens / verify_ct
    if style.spec_meta == "aliases":
        return {
            "spec_accept_rate": rate,
            "spec_accept_length": length,
            "spec_accept_histogram": histogram,
            "spec_accept_token_num": correct,
            "spec_draft_token_num": proposed,
            "spec_verify_ct": verify_ct,
        }
    return {
        "spec_accept_rate": rate,
        "spec_accept_length": length,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": verify_ct,
        "spec_correct_drafts_histogram": histogram,
    }
