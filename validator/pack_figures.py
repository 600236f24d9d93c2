"""Figures in a pack's prose: a number in a check's text that is one of the pack's expectations should be
that expectation's template field, so a pack for another recipe never prints this one's numbers.

``rules lint`` reports a *disagreement* (error: a text quoting the extended pack's value of an expectation
this pack changed) and a *hint* (a text quoting the pack's own value). Integers below 10 are left alone:
"3 steps" and "topk 1" are too common in prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from validator.pack_schema import RulePack
from validator.pack_templates import check_templates, expect_fields

# a decimal number standing alone: not inside a word, a template field or a version string
_NUMBER = re.compile(r"(?<![\w.{}])(\d+(?:\.\d+)?)(?![\w}]|\.\d)")


@dataclass(frozen=True)
class Figure:
    check: str
    key: str  # the text's key in the check: why, remedy, remedies.auto, ...
    literal: str
    field: str  # the expectation it is: expect.accept_length_min
    value: object  # this pack's value of it
    base_value: object | None = None  # the extended pack's value, for a disagreement

    @property
    def disagrees(self) -> bool:
        return self.base_value is not None


def _numeric(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _figures_of(fields: dict[str, object]) -> dict[float, list[tuple[str, object]]]:
    """The expectations worth quoting as figures, by their number: (field, value) pairs."""
    out: dict[float, list[tuple[str, object]]] = {}
    for name, value in fields.items():
        number = _numeric(value)
        if number is not None and not (number.is_integer() and abs(number) < 10):
            out.setdefault(number, []).append((name, value))
    return out


def literal_figures(pack: RulePack, base: RulePack | None = None) -> list[Figure]:
    """Every expectation a check's text writes as a number; with ``base`` (the extended pack), the ones
    quoting its value where this pack's differs are disagreements."""
    fields = expect_fields(pack.expect)
    own = _figures_of(fields)
    base_fields = expect_fields(base.expect) if base is not None else {}
    changed = _figures_of({name: value for name, value in base_fields.items() if fields.get(name) != value})
    found: list[Figure] = []
    for spec in pack.checks:
        for key, text in check_templates(spec).items():
            for m in _NUMBER.finditer(text):
                number = float(m.group(1))
                for name, base_value in changed.get(number, []):
                    found.append(Figure(spec.id, key, m.group(1), name, fields.get(name), base_value))
                for name, value in own.get(number, []):
                    if name not in {f for f, _ in changed.get(number, [])}:
                        found.append(Figure(spec.id, key, m.group(1), name, value))
    return found
