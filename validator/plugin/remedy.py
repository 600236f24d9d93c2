"""Opt-in remediation: let the stock Bailing NextN draft share the target's whole LM-head module.

Stock SGLang 0.5.23's ``EagleDraftWorker.init_lm_head`` already calls
``draft.set_lm_head_from_target(target_lm_head)`` when the draft class has that method;
``BailingMoeForCausalLMNextN`` lacks it, so only the weight tensor is shared. With
``SPARK_VALIDATE_SHARE_LM_HEAD=1`` the plugin adds the method (``self.lm_head = lm_head``, exactly the
Ling-3.0 patch) to the draft's class once the draft model is loaded, before the worker shares heads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

ENV_SHARE = "SPARK_VALIDATE_SHARE_LM_HEAD"
NEXTN_CLASS = "BailingMoeForCausalLMNextN"
METHOD = "set_lm_head_from_target"
_TRUE = frozenset({"1", "true", "yes", "on"})


def remedy_enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ENV_SHARE, "").strip().lower() in _TRUE


def set_lm_head_from_target(self: Any, lm_head: Any) -> None:
    """Share the target's LM-head module (weights, quant method and scales) with this draft."""
    self.lm_head = lm_head


def needs_remedy(model: Any) -> bool:
    """True for a Bailing NextN draft whose class cannot share the head module."""
    cls = type(model)
    return cls.__name__ == NEXTN_CLASS and not hasattr(cls, METHOD)


def apply_share_method(model: Any) -> bool:
    """Add ``set_lm_head_from_target`` to the draft's class when it lacks it; True when added."""
    if not needs_remedy(model):
        return False
    setattr(type(model), METHOD, set_lm_head_from_target)
    return True


def share_now(target: Any, draft: Any) -> bool:
    """For workers that never call ``set_lm_head_from_target`` (multi-layer EAGLE, frozen-KV MTP): do what
    ``maybe_share_target_lm_head`` does, under its same conditions. True when the module is now shared."""
    target_head = getattr(target, "lm_head", None)
    share = getattr(draft, METHOD, None)
    if target_head is None or share is None or getattr(draft, "hot_token_id", None) is not None:
        return False
    if getattr(draft, "lm_head", None) is not target_head:
        share(target_head)
    return getattr(draft, "lm_head", None) is target_head
