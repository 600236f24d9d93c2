"""The pack linter: what a rule pack's schema cannot say, checked against the code that will run it.

Needs the check registry, not the YAML: builtins run in their modes, expectations and remedy variants they
use exist, templates name only existing fields, a NEXTN-layer check is provable for the architecture.
Problems are ``(location, message)``, the location a path into the pack so the loader points at the YAML
line. ``rules lint`` also lists waivers past their day.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

from validator.checks.registry import builtins
from validator.loader_layouts import LAYOUTS, layout_for
from validator.pack_schema import RulePack, WaiverSpec
from validator.pack_templates import check_templates, expect_fields, template_fields
from validator.validation import Problem


def _checkpoint_layout_problems(pack: RulePack) -> list[Problem]:
    """checkpoint.layout counts a NEXTN layer only where the checkpoint reader mirrors the architecture's
    SGLang loader (``loader_layouts.LAYOUTS``): a pack needing one of another architecture could
    never be proven."""
    want = pack.expect.checkpoint
    if want is None or want.min_nextn_layers == 0 or all(c.id != "checkpoint.layout" for c in pack.checks):
        return []
    if layout_for([want.architecture]) is not None:
        return []
    known = ", ".join(sorted(LAYOUTS))
    return [
        (
            ("expect", "checkpoint", "architecture"),
            f"checkpoint.layout cannot count the NEXTN layer of {want.architecture}: the checkpoint reader "
            f"mirrors the SGLang loaders of {known} only (write min_nextn_layers: 0, or add the loader's "
            "layout to validator/loader_layouts.py)",
        )
    ]


def lint_pack(pack: RulePack) -> list[Problem]:
    """What the schema cannot say: each check without ``expect`` is a builtin that runs in the modes
    listed, the expectations and remedy variants it uses are given, and every template names only fields
    that exist. Returns ``(location, problem)`` pairs."""
    known = builtins()
    given = expect_fields(pack.expect)
    absent = {f.name for f in dataclasses.fields(pack.expect) if getattr(pack.expect, f.name) is None}
    out: list[Problem] = []
    needed: dict[str, list[str]] = {}  # a missing expectation -> the checks that need it: one line each
    for i, spec in enumerate(pack.checks):
        at: tuple[str | int, ...] = ("checks", i)
        params: set[str] = set()
        if spec.expect is not None:
            params = {"actual", "expected", "fact"}
            ref = spec.expect.value_from
            if ref is not None and f"expect.{ref}" not in given:
                out.append(((*at, "expect", "value_from"), f"{spec.id}: the pack has no expectation {ref!r}"))
        elif spec.id not in known:
            out.append(((*at, "id"), f"{spec.id}: no builtin check of that name and no 'expect'"))
        else:
            b = known[spec.id]
            params = set(b.params)
            for need in sorted(b.needs_in(spec.modes)):
                if need == "probe" and pack.probe is None:
                    needed.setdefault("probe", []).append(spec.id)
                elif need != "probe" and getattr(pack.expect, need) is None:
                    needed.setdefault(f"expect.{need}", []).append(spec.id)
            for mode in spec.modes:
                if mode not in b.forms:
                    out.append(
                        ((*at, "modes"), f"{spec.id} has no {mode} form (it runs in: {', '.join(b.forms)})")
                    )
            for variant in sorted(b.remedies_in(spec.modes) - set(spec.remedies)):
                out.append(((*at, "remedies"), f"{spec.id}: remedies.{variant} is missing"))
            for variant in sorted(set(spec.remedies) - b.remedies_in(b.forms)):
                uses = ", ".join(sorted(b.remedies_in(b.forms))) or "none"
                out.append(
                    (
                        (*at, "remedies", variant),
                        f"{spec.id} has no remedy variant {variant!r} (it uses: {uses})",
                    )
                )
        for key, text in check_templates(spec).items():
            loc = (*at, *key.split(".", 1))
            try:
                names = template_fields(text)
            except ValueError as exc:
                out.append((loc, f"{spec.id}: {exc}"))
                continue
            for name in dict.fromkeys(names):
                section = name.split(".")[1] if name.startswith("expect.") else None
                if section is not None and section in absent:
                    continue  # reported once, as the missing expectation
                if name not in given and name not in params:
                    out.append((loc, f"{spec.id}: unknown template field {{{name}}}"))
    out += _checkpoint_layout_problems(pack)
    missing = [((k.split(".")[0],), f"{k} is missing (needed by {', '.join(v)})") for k, v in needed.items()]
    return missing + out


def expired_waivers(pack: RulePack) -> list[WaiverSpec]:
    """The pack's waivers past their ``expires`` day: the engine no longer applies them, and ``rules lint``
    says so (a pack with one still loads: the check it waived is judged again)."""
    return [w for w in pack.waivers if _dt.date.today() > w.expires]
