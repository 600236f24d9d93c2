"""PyYAML's safe loader whose scalar constructors fail as YAML errors: a decimal integer of more digits than
Python converts (``int`` refuses over 4,300), a timestamp that is no date (``2001-13-45``: ``datetime``'s
``ValueError``) were ``internal error``, exit 1, from one line of a Compose file, a Kubernetes manifest, a
``--config`` file another user's launcher names, or a rule pack. Here each is a ``ConstructorError`` (a
``MarkedYAMLError``) at the scalar, which every reader already turns into one line naming the file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


def _guarded(tag: str) -> Callable[[Any, Any], Any]:
    real = SafeConstructor.yaml_constructors[tag]
    kind = tag.rsplit(":", 1)[-1]

    def construct(loader: Any, node: Any) -> Any:
        try:
            return real(loader, node)
        except (ValueError, OverflowError) as exc:
            reason = str(exc).split(";")[0][:120]
            raise ConstructorError(None, None, f"invalid {kind}: {reason}", node.start_mark) from None

    return construct


class SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the scalar constructors above."""


class FastSafeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """``yaml.CSafeLoader`` (libyaml, where present) with the scalar constructors above."""


for _tag in _TAGS:
    SafeLoader.add_constructor(_tag, _guarded(_tag))
    FastSafeLoader.add_constructor(_tag, _guarded(_tag))


def safe_load(text: str) -> Any:
    """``yaml.safe_load``, its scalar errors ``ConstructorError``."""
    return yaml.load(text, Loader=SafeLoader)  # a safe loader


def safe_load_all(text: str) -> list[Any]:
    """``yaml.safe_load_all`` (every document), its scalar errors ``ConstructorError``."""
    return list(yaml.load_all(text, Loader=SafeLoader))  # a safe loader


__all__ = ["FastSafeLoader", "SafeLoader", "safe_load", "safe_load_all"]
