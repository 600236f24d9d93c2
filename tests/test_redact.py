from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from validator.redact import REDACTED, collect_secrets, is_secret_key, redact, redact_text

KEY = "sk-live-7f3a9c2e"


def test_server_info_keys_and_launch_command_are_scrubbed() -> None:
    info = {
        "api_key": KEY,
        "admin_api_key": "adm-0042-xyz",
        "launch_command": f"python -m sglang.launch_server --api-key {KEY} --speculative-num-draft-tokens 4",
        "internal_states": [{"api_key": KEY, "avg_spec_accept_length": 2.7}],
        "max_new_tokens": 32,
        "speculative_num_draft_tokens": 4,
        "tokenizer_path": "/models/ling",
    }
    out = redact(info)
    text = json.dumps(out)
    assert KEY not in text and "adm-0042-xyz" not in text
    assert out["api_key"] == REDACTED and out["internal_states"][0]["api_key"] == REDACTED
    assert "--speculative-num-draft-tokens 4" in out["launch_command"]
    assert out["max_new_tokens"] == 32 and out["tokenizer_path"] == "/models/ling"
    assert info["api_key"] == KEY  # the input is not modified


def test_token_counts_stay_but_string_tokens_go() -> None:
    assert not is_secret_key("max_new_tokens", 5)
    assert not is_secret_key("hot_token_id", 3)
    assert not is_secret_key("speculative_token_map", "/maps/x.pt")
    assert is_secret_key("hf_token", "hf_abc")
    assert (
        is_secret_key("wandb_key", "w")
        and not is_secret_key("num_keys", 3)
        and not is_secret_key("key_len", "8")
    )
    said = redact_text("unrecognized arguments: --wandb_key HORSEKEY99 --max-new-tokens 5 WANDB_KEY=H2")
    assert "HORSEKEY99" not in said and "H2" not in said and "--max-new-tokens 5" in said, said
    assert (
        is_secret_key("wandbKey", "w") and is_secret_key("HfToken", "t") and not is_secret_key("keyLen", "8")
    )
    said = redact_text("--WandbKey CAMELKEY77 --hfToken=T0K --numKeys 3 --KeyLen 8")
    assert "CAMELKEY77" not in said and "T0K" not in said and "--numKeys 3 --KeyLen 8" in said, said
    assert is_secret_key("db_password", "x") and is_secret_key("client_secret", "x")
    assert is_secret_key("watermark_seed", "x", extra_keys=["WATERMARK_SEED"])
    assert redact({"api_key": None})["api_key"] is None


def test_redact_text_literal_and_flags() -> None:
    line = f"error calling with key {KEY}; cmd --admin-api-key=abcdefgh --hf-token hf_123 --max-new-tokens 8"
    out = redact_text(line, [KEY, None, ""])
    assert KEY not in out and "abcdefgh" not in out and "hf_123" not in out
    assert "--max-new-tokens 8" in out
    assert redact_text("server_args={'api_key': None}") == "server_args={'api_key': None}"


def test_pack_given_keys() -> None:
    out = redact({"nested": {"license_code": "LC-99887"}, "n": 1}, extra_keys=["license_code"])
    assert out == {"nested": {"license_code": REDACTED}, "n": 1}
    assert collect_secrets({"a": [{"password": "pw12345"}]}) == {"pw12345"}


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
        max_leaves=20,
    )
)
def test_secret_never_survives(obj: object) -> None:
    doc = {"payload": obj, "api_key": KEY, "echo": f"key={KEY}"}
    assert KEY not in json.dumps(redact(doc))
