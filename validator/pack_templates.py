"""Message templates of a rule pack: plain named fields only (``{expect.moe_runner_backend}``), looked up in
a table and never evaluated; and that table, the pack's expectations as fields (``value_from`` names them).

Not ``string.Formatter().parse``: it accepts attribute access, indexing, conversions and format specs a
pack must not hold, and reports a stray brace without saying where; here the author is told which field or
character is wrong.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from validator.pack_schema import CheckSpec, Expect, Expectations

_FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# a literal brace pair, a field up to the first closing brace, or a lone brace (an error)
_BRACES_RE = re.compile(r"\{\{|\}\}|\{([^}]*)\}|[{}]")


def _scan(text: str) -> list[tuple[str, str]]:
    """Split a template into ("text", s) and ("field", name) parts. ``{{`` and ``}}`` are literal braces.
    A field is a plain (dotted) name looked up in a table, never evaluated: no attribute access, no
    indexing, no conversion or format spec, no dunder names."""
    parts: list[tuple[str, str]] = []
    buf: list[str] = []
    at = 0
    for m in _BRACES_RE.finditer(text):
        buf.append(text[at : m.start()])
        at = m.end()
        token, name = m.group(0), m.group(1)
        if token in ("{{", "}}"):
            buf.append(token[0])
        elif name is not None:
            if not _FIELD_RE.fullmatch(name) or "__" in name:
                raise ValueError(f"'{{{name}}}' is not a plain field name")
            parts += [("text", "".join(buf)), ("field", name)]
            buf = []
        elif token == "{":
            raise ValueError(f"unclosed '{{' at character {m.start() + 1} (write '{{{{' for a literal brace)")
        else:
            raise ValueError(f"single '}}' at character {m.start() + 1} (write '}}}}' for a literal brace)")
    buf.append(text[at:])
    parts.append(("text", "".join(buf)))
    return parts


def template_fields(text: str) -> list[str]:
    """The field names a template uses; ValueError when it is not a valid template."""
    return [v for kind, v in _scan(text) if kind == "field"]


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return str(list(value))
    return str(value)


def render_template(text: str, values: Mapping[str, object]) -> str:
    """Fill a (linted) template; a field without a value stays as written, so a gap is visible."""
    try:
        parts = _scan(text)
    except ValueError:
        return text
    return "".join(
        v if kind == "text" else (_show(values[v]) if v in values else "{" + v + "}") for kind, v in parts
    )


def expect_fields(expect: Expectations) -> dict[str, object]:
    """Every expectation the pack gives, as a template field: ``expect.speculative.num_steps`` -> 3. A
    reader computes it once per pack and passes it on."""
    out: dict[str, object] = {}

    def walk(prefix: str, record: object) -> None:
        for f in dataclasses.fields(record):  # type: ignore[arg-type]
            value = getattr(record, f.name)
            if dataclasses.is_dataclass(value):
                walk(f"{prefix}{f.name}.", value)
            elif value is not None:
                out[prefix + f.name] = value

    walk("expect.", expect)
    return out


def expect_value(expect: Expect, fields: Mapping[str, object]) -> object:
    """The value an ``expect`` check compares with: its own, or the expectation it names (``fields``:
    :func:`expect_fields` of the pack)."""
    if expect.value_from is None:
        return expect.value
    return fields.get(f"expect.{expect.value_from}")


def check_templates(spec: CheckSpec) -> dict[str, str]:
    """Every text of the check that is a template, by its key in the pack."""
    out = {"title": spec.title, "why": spec.why, "remedy": spec.remedy}
    out.update({f"remedies.{k}": v for k, v in spec.remedies.items()})
    if spec.pass_message is not None:
        out["pass_message"] = spec.pass_message
    if spec.fail_message is not None:
        out["fail_message"] = spec.fail_message
    return out
