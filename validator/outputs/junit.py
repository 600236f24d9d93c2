"""``--format junit``: one testcase per check, for CI systems that read JUnit XML.

fail -> <failure>, error -> <error>, skip -> <skipped> (never a pass), warn -> a passing case whose
<system-out> carries the warning; the verdict, ``partial``, coverage, probe and pack go into <properties>.
A critical check that could not be proven, on a verdict that passed anyway (``--allow-partial``), is
<skipped> with its reason and the input that would prove it: the run passed, and the case says it was not
proven; on any other verdict it stays an <error> (the run did not pass).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from validator.outputs import output
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep
from validator.report import Report


def _junit_status(c: dict[str, Any], unproven: dict[str, Any], accepted: bool) -> str:
    """The check's status as the JUnit case shows it (an accepted unproven check is a skip)."""
    if c["waived"]:
        return "pass"
    if c["id"] in unproven and accepted:
        return "skip"
    return str(c["status"])


@output("junit", "JUnit XML, one testcase per check", rank=2)
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    data = neutralize_deep(safe_dict(report, secrets))  # XML 1.0 cannot hold a server's control bytes
    checks = data["checks"]

    coverage = data.get("coverage") or {}
    unproven = {m["id"]: m for m in coverage.get("missing") or ()}
    accepted = data["verdict"] == "pass"  # --allow-partial accepted what could not be proven

    def count(status: str) -> int:
        return sum(1 for c in checks if _junit_status(c, unproven, accepted) == status)

    suite = ET.Element(
        "testsuite",
        name=f"spark-validate.{report.mode}",
        tests=str(len(checks)),
        failures=str(count("fail")),
        errors=str(count("error")),
        skipped=str(count("skip")),
        time=f"{report.duration_s:.3f}",
        timestamp=report.started_at,
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", data["verdict"]),
        ("partial", "true" if data.get("partial") else "false"),
        ("coverage", f"{coverage.get('proven', 0)}/{coverage.get('critical', 0)}"),
        ("rule_pack", data["rule_pack"]),
        ("version", data["version"]),
        ("target", data.get("target") or ""),
    ):
        ET.SubElement(props, "property", name=name, value=str(value))
    if data.get("probe"):
        ET.SubElement(props, "property", name="probe", value=json.dumps(data["probe"], sort_keys=True))
    for c in checks:
        case = ET.SubElement(
            suite, "testcase", classname=f"spark-validate.{c['id'].split('.')[0]}", name=c["id"]
        )
        detail = "\n".join(
            f"{k}: {v}"
            for k, v in (
                ("severity", c["severity"]),
                ("why", c.get("why")),
                ("remedy", c.get("remedy")),
                ("evidence", json.dumps(c["evidence"], sort_keys=True)),
                ("sources", ", ".join(c["sources"])),
                ("waived", c.get("waived")),
            )
            if v
        )
        if c["waived"]:
            ET.SubElement(case, "system-out").text = f"WAIVED {c['status']}: {c['message']}\n{detail}"
        elif c["status"] == "fail":
            ET.SubElement(case, "failure", message=c["message"], type=c["severity"]).text = detail
        elif c["id"] in unproven and accepted:
            m = unproven[c["id"]]
            needs = f"; needs {m['input']}" if m.get("input") else ""
            ET.SubElement(case, "skipped", message=f"not proven: {m['reason']}{needs}").text = detail
        elif c["status"] == "error":
            ET.SubElement(case, "error", message=c["message"], type="evidence").text = detail
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=c["message"])
        elif c["status"] in ("warn", "info"):
            ET.SubElement(case, "system-out").text = f"{c['status'].upper()}: {c['message']}\n{detail}"
        else:
            ET.SubElement(case, "system-out").text = c["message"]
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
