"""The official ``openai`` client against the simulator, as an operator's own tooling would use it.

A real process on loopback with an API key (the client sends ``Authorization: Bearer``): completions and
chat, streaming (real SSE: the client yields chunks) and not, ``models.list`` and ``models.retrieve``,
structured output, and the errors the client maps to its exception types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.sim_process import SimProcess, sim_process, wait_healthy

KEY = "sim-openai-key-42"
MODEL = "/models/Ling-3.0-flash-fp4"

if TYPE_CHECKING:
    import openai


def _openai() -> Any:
    """The package, imported once a test here runs: its half second of imports is not paid by every xdist
    worker that collects the suite."""
    import openai

    return openai


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    tmp = tmp_path_factory.mktemp("openai")
    key_file = tmp / "key"
    key_file.write_text(KEY + "\n")
    with sim_process(
        tmp, "--scenario", "auth-required", "--api-key-file", str(key_file), "--seed", "3"
    ) as sim:
        wait_healthy(sim.url)
        yield sim


@pytest.fixture(scope="module")
def client(server: SimProcess) -> Iterator[openai.OpenAI]:
    with _openai().OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=30) as c:
        yield c


def test_completions_plain_and_streamed_agree(client: openai.OpenAI) -> None:
    plain = client.completions.create(model=MODEL, prompt="Say something", max_tokens=20, temperature=0)
    assert plain.object == "text_completion" and plain.model == MODEL
    assert plain.usage is not None and plain.usage.completion_tokens == 20
    assert plain.choices[0].finish_reason == "length" and plain.choices[0].text
    stream = client.completions.create(
        model=MODEL, prompt="Say something", max_tokens=20, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) > 2  # several SSE chunks, not one JSON body
    assert "".join(texts) == plain.choices[0].text  # same request, same seed: same text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert (
        chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20
    )


def test_chat_plain_and_streamed_agree(client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "What is 2+2?"}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
    assert plain.object == "chat.completion"
    msg = plain.choices[0].message
    assert msg.role == "assistant" and msg.content
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0, stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(chunks) > 3 and content == msg.content
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_spec_details_come_back_in_sglext(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL, prompt="x", max_tokens=64, temperature=0, extra_body={"return_spec_tokens_details": True}
    )
    extra = r.model_extra or {}
    details = extra["sglext"]["spec_tokens_details"]
    assert (
        details["spec_verify_ct"] > 0 and details["spec_num_proposed_drafts"] == 3 * details["spec_verify_ct"]
    )


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    listed = client.models.list()
    assert [m.id for m in listed.data] == [MODEL]
    card = listed.data[0]
    assert card.object == "model" and card.owned_by == "sglang"
    got = client.models.retrieve(MODEL)
    assert got.id == MODEL
    with pytest.raises(_openai().NotFoundError) as err:
        client.models.retrieve("no-such-model")
    assert "does not exist" in str(err.value)


def test_structured_output_follows_the_json_schema(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                       "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "age", "tags"],
    }  # fmt: skip
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "a person"}], max_tokens=200,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
    )  # fmt: skip
    doc = json.loads(r.choices[0].message.content or "")
    assert set(doc) == {"name", "age", "tags"}
    assert isinstance(doc["name"], str) and isinstance(doc["age"], int) and isinstance(doc["tags"], list)
    assert r.choices[0].finish_reason == "stop"  # the grammar ended it, not max_tokens


def test_wrong_key_and_bad_request_map_to_the_clients_errors(server: SimProcess) -> None:
    with _openai().OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0, timeout=10) as bad:
        with pytest.raises(_openai().AuthenticationError) as err:
            bad.models.list()
        assert err.value.status_code == 401 and err.value.response.json() == {"error": "Unauthorized"}
    with _openai().OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=10) as good:
        with pytest.raises(_openai().BadRequestError) as bad_schema:
            good.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "x"}],
                extra_body={"response_format": {"type": "json_schema", "json_schema": {"schema": "nope"}}},
            )  # fmt: skip
        assert bad_schema.value.status_code == 400
