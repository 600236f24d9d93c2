"""The SGLang model loaders the checkpoint reader mirrors: where each finds a checkpoint's NEXTN (MTP) layer
and routed experts, keyed by ``config.json``'s ``architectures`` (as SGLang's model registry picks them).

Data only: the checkpoint source counts what a layout says, and ``pack_lint`` refuses a pack needing a
NEXTN layer of an architecture none mirrors (unprovable). A new architecture is one ``LoaderLayout`` here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LoaderLayout:
    """Where one SGLang model loader finds the NEXTN layer and the routed experts of a checkpoint."""

    nextn_spec_parts: tuple[str, ...]  # the NEXTN layer's own (non-decoder) weights
    routed_expert: re.Pattern[str]  # a routed expert's weight name; group 1 is its layer

    def nextn_layer_id(self, num_hidden_layers: int) -> int:
        """``resolve_nextn_layer_id``: where the MTP layer sits in the HF name space (names under
        ``model.mtp`` are skipped by the loader and do not count)."""
        return 0 if num_hidden_layers == 1 else num_hidden_layers


# SGLang 0.5.23's srt/models/bailing_moe_v3.py: resolve_nextn_layer_id, _NEXTN_SPEC_WEIGHT_NAMES, and the
# expert parameter mapping of load_weights (gate_proj, up_proj, down_proj per expert).
BAILING_MOE_V3 = LoaderLayout(
    nextn_spec_parts=("eh_proj", "enorm", "hnorm", "final_layernorm"),
    routed_expert=re.compile(
        r"^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$"
    ),
)
LAYOUTS: dict[str, LoaderLayout] = {"BailingMoeV3ForCausalLM": BAILING_MOE_V3}


def layout_for(architectures: Sequence[str]) -> LoaderLayout | None:
    """The layout of the first architecture a mirrored loader serves (None: none)."""
    return next((LAYOUTS[a] for a in architectures if a in LAYOUTS), None)
