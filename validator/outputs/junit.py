"""``--format junit``: one testcase per check, for CI systems that read JUnit XML.

fail -> <failure>, error -> <error>, skip -> <skipped> (never a pass), warn -> a passing case whose
<system-out> carries the warning; the verdict, probe and pack go into <properties>.
"""

from __future__ import annotations

import json

from validator.outputs import output
from validator.outputs.safe import safe_dict
from validator.redact import neutralize_deep
from validator.report import Report


@output("junit", "JUnit XML, one testcase per check")
def render(report: Report, *, color: bool = False, secrets: tuple[str, ...] = ()) -> str:
    import xml.etree.ElementTree as ET  # here: every command loads the registry, few ask for XML

    data = neutralize_deep(safe_dict(report, secrets))  # XML 1.0 cannot hold a server's control bytes
    checks = data["checks"]

    def count(status: str) -> int:
        return sum(1 for c in checks if c["status"] == status)

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
        elif c["status"] == "error":
            ET.SubElement(case, "error", message=c["message"], type="evidence").text = detail
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=c["message"])
        elif c["status"] == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {c['message']}\n{detail}"
        elif c["status"] == "info":
            ET.SubElement(case, "system-out").text = f"INFO: {c['message']}\n{detail}"
        else:
            ET.SubElement(case, "system-out").text = c["message"]
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
