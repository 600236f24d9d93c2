"""The recipe traps published launch scripts carry, on a running server: ``/server_info`` reports the
tool-call parser and the JSON model override as the server resolved them (SGLang 0.5.23 serves every
``ServerArgs`` field there), so ``check`` warns on another model's parser and a YaRN override as preflight
does. The documents are the simulator's NEXTN server's with the script's two settings
(ly01325/Ling3-Flash-DGX-Spark, scripts/dgx-spark/launch-optimized.sh at commit 8cbd8ed). The real ``check``
front door runs in this process against the document server on loopback (tests/support/in_process.py)."""

from __future__ import annotations

import pytest

from tests.support.document_server import document_server, sim_documents
from tests.support.in_process import check_in_process

PACK = "ling-3.0-flash-dgx-spark"
YARN = (
    '{"max_position_embeddings":262144,"rope_scaling":{"rope_type":"yarn","factor":2.0,'
    '"rope_theta":6000000,"partial_rotary_factor":0.5,"original_max_position_embeddings":131072}}'
)
LIVE_TRAPS = ("model.tool_call_parser_live", "model.rope_scaling_live")


@pytest.mark.parametrize(
    ("parser", "override", "expected"),
    [
        (None, "{}", {"model.tool_call_parser_live": "pass", "model.rope_scaling_live": "pass"}),
        ("ling3", "{}", {"model.tool_call_parser_live": "pass", "model.rope_scaling_live": "pass"}),
        ("qwen25", YARN, {"model.tool_call_parser_live": "warn", "model.rope_scaling_live": "warn"}),
    ],
)
def test_live_traps(parser: str | None, override: str, expected: dict[str, str]) -> None:
    info, model = sim_documents("healthy")
    info.update(tool_call_parser=parser, json_model_override_args=override)
    with document_server(info, model) as url:
        run = check_in_process(url, "--rules", PACK, "--no-probe", "--wait", "5")
    assert {c: run.check(c)["status"] for c in LIVE_TRAPS} == expected, run.explain()
    if parser == "qwen25":
        assert "parses tool calls with qwen25" in run.check("model.tool_call_parser_live")["message"]
        assert "rope_scaling" in run.check("model.rope_scaling_live")["message"]
