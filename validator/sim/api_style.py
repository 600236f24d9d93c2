"""What the simulator's HTTP replies look like per SGLang build family (``spark-validate sim --api-style``).

Real servers differ in what they serve, and a validator built against one shape goes blind on the others.
Each family here is taken from real artifacts (``tests/corpus/``, whose READMEs cite them):

- ``sglang-0.5.23`` (default): the release this project targets: ``/server_info`` with ``startup_time``,
  ``launch_command``, ``frontend`` and ``kv_events``; ``meta_info`` with ``spec_accept_rate``,
  ``spec_accept_length``, ``spec_num_correct_drafts``, ``spec_num_proposed_drafts``, ``spec_verify_ct``
  and ``spec_correct_drafts_histogram``.
- ``docs-2026``: SGLang's docs builds of February to April 2026 (``0.0.0.dev1+g753da2753``,
  ``0.0.0.dev1+g5dd2c243e``): the same ``meta_info``, but ``/server_info`` without ``startup_time``,
  ``launch_command``, ``frontend`` and ``kv_events``.
- ``legacy``: the builds of early 2025 (SGLang's ``benchmark/mtbench/bench_sglang_eagle.py`` prints one
  such reply): ``meta_info`` carries only ``spec_verify_ct`` besides the token counts, so acceptance is
  ``completion_tokens / spec_verify_ct``; only the deprecated ``/get_server_info`` is served (no
  ``/server_info``), without the fields ``docs-2026`` lacks; metrics labelled with ``model_name`` alone
  (SGLang's docs ``/metrics`` dump).

Only ``sglang-0.5.23`` has DSpark, so only it exports the two DSpark gauges (on every server, at 0 without
DSpark, as its ``metrics_collector.py`` registers them); the other families export neither.
- ``aliases``: builds that name the counts ``spec_accept_token_num`` / ``spec_draft_token_num`` and the
  histogram ``spec_accept_histogram`` (a fork's test prints that reply), with ``spec_accept_rate``,
  ``spec_accept_length`` and ``spec_verify_ct``; ``/server_info`` as ``docs-2026``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from validator.errors import UsageError

DEFAULT = "sglang-0.5.23"


@dataclass(frozen=True)
class ApiStyle:
    name: str
    text: str
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
        ApiStyle(DEFAULT, "SGLang 0.5.23: every field this project reads", dspark_gauges=True),
        ApiStyle(
            "docs-2026",
            "SGLang docs builds 2026 (g753da2753, g5dd2c243e): /server_info without startup_time, "
            "launch_command, frontend, kv_events",
            server_info_absent=_NO_LATE_KEYS,
        ),
        ApiStyle(
            "legacy",
            "early-2025 builds: only /get_server_info, meta_info with spec_verify_ct alone",
            server_info_absent=_NO_LATE_KEYS,
            server_info_route=False,
            spec_meta="legacy",
            labels_model_name_only=True,
        ),
        ApiStyle(
            "aliases",
            "builds naming the counts spec_accept_token_num / spec_draft_token_num / spec_accept_histogram",
            server_info_absent=_NO_LATE_KEYS,
            spec_meta="aliases",
        ),
    )
}


def resolve(name: str) -> ApiStyle:
    if name not in STYLES:
        raise UsageError(f"sim: unknown --api-style {name!r} (known: {', '.join(STYLES)})")
    return STYLES[name]


def server_info(style: ApiStyle, info: dict[str, Any]) -> dict[str, Any]:
    """``/server_info`` as this family serves it."""
    return {k: v for k, v in info.items() if k not in style.server_info_absent}


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
