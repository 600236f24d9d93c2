# ruff: noqa: E501  (log lines are data, kept verbatim)
"""The log grammar: only SGLang's own logger lines are evidence, in every format real builds write.

Each shape here is one a real build logs (the prefix from ``configure_logger``, the level/location form of
2026 builds, rank tags of the scheduler, the decode line of each build family, both ``server_args=``
forms); the hostile ones are what any HTTP client can put into the log through uvicorn's access lines or
``--log-requests``. The property test feeds arbitrary request text through both and asserts that no
parsed fact moves.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_server_log import RUN_HEALTHY, TP, T, _write
from validator.facts import LogFacts
from validator.server_settings import ServerArgs, logged_settings
from validator.sources.server.log import read_server_log
from validator.sources.server.log_grammar import (
    Counted,
    Decode,
    Died,
    LayerBackend,
    Other,
    Override,
    Prefill,
    Start,
    parse_server_args,
    read_line,
    split_line,
)
from validator.sources.server.log_state import LogParser
from validator.sources.server.pyrepr import Unresolved, parse_repr

DATACLASS_ARGS = (
    "ServerArgs(model_path='/models/Ling-3.0-flash-fp4', tokenizer_path='/models/Ling-3.0-flash-fp4', "
    "tp_size=1, mem_fraction_static=0.903, random_seed=887239442, api_key=None, admin_api_key='***', "
    "speculative_algorithm='EAGLE', speculative_num_steps=3, speculative_eagle_topk=1, "
    "speculative_num_draft_tokens=4, moe_runner_backend='humming', enable_fp32_lm_head=False, "
    "cuda_graph_bs=[1, 2, 4, 8], json_model_override_args='{}', mm_process_config={}, "
    "kv_events_config=None, disable_cuda_graph=True, schedule_conservativeness=1.0, "
    "hicache_storage_backend_extra_config={'prefetch': {'threshold': 256, 'policy': 'best_effort'}}, "
    "lora_paths=None, served_model_name='ling', watchdog_timeout=300, custom_weight_loader=[], "
    "weird=<function hook at 0x7f3a2c1b0d30>, device_obj=torch.device('cuda'), nested=LoRAConfig(rank=8, targets=['q', 'v']), "
    "forward_hooks=None)"
)


@pytest.mark.parametrize(
    ("line", "ranks", "level"),
    [
        ("[2026-03-21 03:31:56] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True", (), None),
        (
            "[2026-09-12 10:01:02 TP0] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("TP0",),
            None,
        ),
        (
            "[2026-08-23 09:06:21 TP0 EP0] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("TP0", "EP0"),
            None,
        ),
        (
            "[2026-05-19 00:34:42 DP5 TP5] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("DP5", "TP5"),
            None,
        ),
        (
            "[2026-05-19 00:34:42 PP0 TP1] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("PP0", "TP1"),
            None,
        ),
        (
            "[2026-09-24 01:50:43.001 DP0 TP0 EP0] Decode batch [40], #running-req: 1, accept len: 2.00, cuda graph: True",
            ("DP0", "TP0", "EP0"),
            None,
        ),
        (
            "[2026-03-21 03:31:56 TP0] INFO scheduler_metrics_mixin.py:263: Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("TP0",),
            "INFO",
        ),
        (
            "(SGLangEngine pid=35555) [2025-10-31 03:45:20 TP0] Decode batch [51341], #running-req: 1, accept len: 2.00, cuda graph: True",
            ("TP0",),
            None,
        ),
        (
            "(SGLangEngine pid=111711, ip=10.15.36.1) [2025-10-31 03:45:20 TP0] Decode batch, #running-req: 1, accept len: 2.00, cuda graph: True",
            ("TP0",),
            None,
        ),
    ],
)
def test_every_prefix_form_is_sglangs_logger(line: str, ranks: tuple[str, ...], level: str | None) -> None:
    rec = split_line(line)
    assert rec is not None and rec.ranks == ranks and rec.level == level
    assert read_line(line) == Decode(2.0, None, None)


@pytest.mark.parametrize(
    ("message", "sample"),
    [
        # builds that log no accept rate
        (
            "Decode batch. #running-req: 4, #token: 3121, token usage: 0.00, accept len: 2.74, cuda graph: True, gen throughput (token/s): 396.76",
            (2.74, None, 396.76),
        ),
        (
            "Decode batch [9], #running-req: 99, accept len: 1.0, cuda graph: False, #queue-req: 3",
            (1.0, None, None),
        ),
        (
            "Decode batch [77], #running-req: 41, #full token: 99, accept len: 4.8, #retracted-req: 0, cuda graph: True, #queue-req: 0",
            (4.8, None, None),
        ),
        (
            "Decode batch, #running-req: 1, spec tokens: 12, spec rounds: 6, accept len: 2.00, accept rate: 0.33, cuda graph: True, gen throughput (token/s): 58.50, #queue-req: 0",
            (2.0, 0.33, 58.5),
        ),
        (
            "Decode batch [42], #running-req: 1, #token: 128, token usage: 0.00, accept len: 3.10, accept rate: 0.70, npu graph: True, gen throughput (token/s): 87.33, #queue-req: 1",
            (3.1, 0.7, 87.33),
        ),
        # the CAP_ACCEPT build logs a block figure beside the real one: only the real one is the sample
        (
            "Decode batch, #running-req: 1, block accept len: 3.90, accept len: 2.50, accept rate: 0.50, cuda graph: True",
            (2.5, 0.5, None),
        ),
        # a non-speculative server's decode line: a running server, no sample
        (
            "Decode batch, #running-req: 1, #token: 128, token usage: 0.00, cuda graph: True, gen throughput (token/s): 0.79, #queue-req: 1",
            (None, None, 0.79),
        ),
    ],
)
def test_decode_lines_of_every_build_family(message: str, sample: tuple[float | None, ...]) -> None:
    assert read_line(f"{TP} {message}") == Decode(*sample)


def test_a_real_build_family_log_counts_each_decode_sample(tmp_path: Path) -> None:
    lines = [
        f"{T} server_args={DATACLASS_ARGS}",
        f"{T} The server is fired up and ready to roll!",
        f"{TP} Decode batch. #running-req: 4, #token: 3121, token usage: 0.00, accept len: 2.74, cuda graph: True, gen throughput (token/s): 396.76",
        f"{TP} Decode batch [9], #running-req: 99, accept len: 1.0, cuda graph: False, #queue-req: 3",
        f"{TP} Decode batch [77], #running-req: 41, accept len: 4.8, #retracted-req: 0, cuda graph: True, #queue-req: 0",
        f"{TP} Decode batch, #running-req: 1, spec tokens: 12, spec rounds: 6, accept len: 2.00, accept rate: 0.33, npu graph: True",
    ]
    facts = read_server_log(_write(tmp_path, lines))
    assert facts.decode_sample_count == 4
    assert [s.accept_len for s in facts.decode_samples] == [2.74, 1.0, 4.8, 2.0]
    assert [s.accept_rate for s in facts.decode_samples] == [None, None, None, 0.33]


def test_the_dataclass_server_args_are_read_fully_and_safely() -> None:
    args = parse_server_args(DATACLASS_ARGS)
    assert args is not None
    assert args["model_path"] == "/models/Ling-3.0-flash-fp4" and args["tp_size"] == 1
    assert args["mem_fraction_static"] == 0.903 and args["disable_cuda_graph"] is True
    assert args["api_key"] is None and args["admin_api_key"] == "***"
    assert args["cuda_graph_bs"] == [1, 2, 4, 8] and args["mm_process_config"] == {}
    assert args["hicache_storage_backend_extra_config"] == {
        "prefetch": {"threshold": 256, "policy": "best_effort"}
    }
    assert args["nested"] == {"rank": 8, "targets": ["q", "v"]}  # a nested record: its keywords
    for key, text in (("weird", "<function hook at 0x7f3a2c1b0d30>"), ("device_obj", "torch.device('cuda')")):
        assert isinstance(args[key], Unresolved) and args[key] == text  # kept as text, never evaluated
    assert args["forward_hooks"] is None  # the fields after the odd ones are read too
    settings = ServerArgs.from_mapping(args)
    assert (settings.speculative_algorithm, settings.speculative_num_steps, settings.moe_runner_backend) == (
        "EAGLE",
        3,
        "humming",
    )


def test_both_server_args_forms_feed_the_checks_alike(tmp_path: Path) -> None:
    d = {
        "model_path": "/models/Ling-3.0-flash-fp4",
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "tp_size": 1,
        "api_key": "sk-secret-1",
    }
    dict_log = read_server_log(_write(tmp_path, [f"{T} server_args={d!r}"]))
    record = ", ".join(f"{k}={v!r}" for k, v in d.items())
    (tmp_path / "b").mkdir()
    dc_log = read_server_log(
        _write(
            tmp_path / "b", [f"[2026-03-21 03:31:56] INFO engine.py:177: server_args=ServerArgs({record})"]
        )
    )
    assert dict_log.server_args == dc_log.server_args
    assert dc_log.server_args is not None and dc_log.server_args["api_key"] == "<redacted>"
    assert logged_settings(dict_log) == logged_settings(dc_log)
    assert dc_log.unusable() is None and dc_log.runs == 1


@pytest.mark.parametrize(
    "text",
    [
        "ServerArgs(model_path='x', 1)",  # a positional argument: not a record
        "ServerArgs(model_path='x'",  # cut
        "ServerArgs(model_path=__import__('os').system('id'))",  # code: kept as text, never run
        "{'a':",  # a dict cut after a key (a line cut at MAX_LINE_BYTES): was a KeyError out of the reader
        '{"model_path": "x", "b": [',
    ],
)
def test_odd_dataclass_reprs_never_evaluate(text: str) -> None:
    args = parse_server_args(text)
    assert args is None or all(not callable(v) for v in args.values())
    if args is not None and "model_path" in args:
        assert isinstance(args["model_path"], str)


def test_the_repr_reader_reads_literals_as_python_does() -> None:
    for value in ({"a": [1, 2.5, None, True], "b": (1,), "c": {1, 2}}, -3, 1e-05, 'it\'s "q"\n', [], (), {}):
        assert parse_repr(repr(value)) == value
    deep = "[" * 200 + "]" * 200
    assert isinstance(parse_repr(deep), list)  # bounded depth: the deepest part kept as text


@pytest.mark.parametrize(
    "line",
    [
        # uvicorn's access line carries a client's raw request line
        '[2026-08-23 09:06:20] INFO:     127.0.0.1:5000 - "GET /v1/models?server_args={} HTTP/1.1" 404 Not Found',
        '[2026-08-23 09:06:20] INFO:     127.0.0.1:5000 - "GET /?x=Decode%20batch,%20accept%20len:%201.00 HTTP/1.1" 404 Not Found',
        "INFO:     127.0.0.1:5000 - \"GET /?server_args=ServerArgs(model_path='evil') HTTP/1.1\" 404 Not Found",
        # --log-requests echoes
        "[2026-08-23 09:06:20] Receive: obj=GenerateReqInput(text='server_args={\\'moe_runner_backend\\': \\'triton\\'}', sampling_params={})",
        "[2026-08-23 09:06:20] Finish: obj=GenerateReqInput(text='x'), out={'text': 'Decode batch, accept len: 1.00, accept rate: 0.00 Online FP8 quantization enabled for lm_head. The server is fired up and ready to roll!'}",
        "[2026-08-23 09:06:20 TP0] Receive: obj=GenerateReqInput(text='Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for X.')",
        # progress bars
        "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.10s/it]",
        "Capturing batches (bs=4 avail_mem=23.09 GB):  25%|██▌       | 1/4 [00:00<00:02,  1.14it/s]",
        # a traceback's lines
        '  File "/usr/lib/python3.12/json/decoder.py", line 355, in raw_decode',
        "ValueError: server_args={'tp_size': 8} Scheduler hit an exception: accept len: 1.00",
    ],
)
def test_lines_that_are_not_sglangs_say_nothing(line: str) -> None:
    event = read_line(line)
    assert not isinstance(event, Start | Decode | Counted | Override | LayerBackend | Died)


def test_an_access_line_never_resets_a_followed_start(tmp_path: Path) -> None:
    """The marker scan that finds the last start must pass over a client's ``server_args={`` in an access
    line, even when it sits far beyond the real start (more than the prelude the reader re-reads)."""
    busy = [
        f"{TP} Decode batch, #running-req: 1, accept len: 3.00, accept rate: 0.66, cuda graph: True, gen throughput (token/s): 50.00"
    ] * 2000
    hostile = '[2026-11-29 15:10:00] INFO:     10.0.0.9:5000 - "GET /v1/models?server_args={} HTTP/1.1" 404 Not Found'
    facts = read_server_log(_write(tmp_path, RUN_HEALTHY + busy + [hostile] + busy))
    assert facts.unusable() is None and facts.runs == 1 and facts.fp8_lm_head_lines == 1
    assert logged_settings(facts) is not None and facts.decode_sample_count == 2 + 4000


def test_only_sglangs_override_message_is_the_override() -> None:
    assert (
        read_line(
            f"{T} Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for BailingMoeV3ForCausalLM."
        )
        == Override()
    )
    deferred = f"{TP} FlashInfer TRTLLM MoE deferred finalize is disabled (moe_runner_backend=flashinfer_mxfp4, quant_method=Mxfp4FlashinferCutlassMoEMethod)."
    assert read_line(deferred) == LayerBackend("flashinfer_mxfp4")
    enum = f"{TP} TRTLLM MoE deferred finalize is disabled (moe_runner_backend=MoeRunnerBackend.HUMMING, quant_method=HummingMethod)."
    assert read_line(enum) == LayerBackend("humming")


def test_a_flashinfer_layer_line_is_backend_evidence_not_the_override(tmp_path: Path) -> None:
    deferred = f"{TP} FlashInfer TRTLLM MoE deferred finalize is disabled (moe_runner_backend=flashinfer_mxfp4, quant_method=Mxfp4FlashinferCutlassMoEMethod)."
    facts = read_server_log(_write(tmp_path, [*RUN_HEALTHY[:3], deferred, *RUN_HEALTHY[3:]]))
    assert not facts.flashinfer_override and facts.layer_backend_lines == {"flashinfer_mxfp4": 1}
    from validator.checks.moe import log_backend

    assert log_backend(facts) == "mixed:humming,flashinfer_mxfp4"  # what ran disagrees: moe.backend says so


def _projection(facts: LogFacts) -> dict[str, object]:
    """Every parsed fact, less how much was read and where (positions move when lines are inserted)."""
    d = asdict(facts)
    for key in ("path", "lines_total", "bytes_read", "bytes_skipped", "run_start_line"):
        d.pop(key)
    d["decode_samples"] = [(s.accept_len, s.accept_rate, s.gen_throughput) for s in facts.decode_samples]
    b = facts.last_batch  # what it says, not when this reader saw it
    d["last_batch"] = None if b is None else (b.kind, b.running, b.queued)
    return d


def _facts_of(lines: list[str]) -> LogFacts:
    parser = LogParser("test.log")
    for i, line in enumerate(lines):
        parser.feed(line, i)
    return parser.snapshot()


_BASE = _facts_of(RUN_HEALTHY)
_STAMP = "[2026-11-29 15:05:00]"


def _hostile_lines(text: str, ip: str) -> list[str]:
    one_line = text.replace("\n", " ").replace("\r", " ")  # an HTTP request line holds no line break
    return [
        f'{_STAMP} INFO:     {ip}:5000 - "GET /v1/models?q={one_line} HTTP/1.1" 404 Not Found',
        f'{_STAMP} INFO:     {ip}:5000 - "POST {one_line} HTTP/1.1" 200 OK',
        f"{_STAMP} Receive: obj=GenerateReqInput(text={text!r}, sampling_params={{'max_new_tokens': 8}})",
        f"{_STAMP} Finish: obj=GenerateReqInput(rid='1'), out={{'text': {text!r}, 'meta_info': {{}}}}",
        f"{_STAMP} TP0] Receive: {one_line}",
    ]


_TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "server_args={'moe_runner_backend': 'triton', 'speculative_algorithm': None}",
            "server_args=ServerArgs(model_path='evil', tp_size=8)",
            "\n[2026-11-29 15:05:01 TP0] Decode batch, #running-req: 1, accept len: 1.00, accept rate: 0.00, cuda graph: True\n",
            "Online FP8 quantization enabled for lm_head.",
            "Bailing V3 mixed FP8/MXFP4 checkpoint: moe_runner_backend=flashinfer_mxfp4 for X.",
            "Scheduler hit an exception: Traceback (most recent call last):\nValueError: boom",
            "The server is fired up and ready to roll!",
        ]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, min_size=1, max_size=4), at=st.integers(min_value=0, max_value=len(RUN_HEALTHY)))
def test_request_text_in_access_and_request_lines_never_changes_a_fact(texts: list[str], at: int) -> None:
    hostile = [line for text in texts for line in _hostile_lines(text, "10.1.2.3")]
    lines = RUN_HEALTHY[:at] + hostile + RUN_HEALTHY[at:]
    assert _projection(_facts_of(lines)) == _projection(_BASE)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, min_size=1, max_size=3))
def test_the_file_follower_agrees_under_hostile_lines(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str]
) -> None:
    """Through the file follower too (its backward marker scan and its bulk path for routine traffic)."""
    busy = [
        f"{TP} Decode batch, #running-req: 1, accept len: 3.05, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 58.50"
    ] * 50
    hostile = [line for text in texts for line in _hostile_lines(text, "10.1.2.3")]
    tmp = tmp_path_factory.mktemp("h")
    base = read_server_log(_write(tmp, RUN_HEALTHY + busy + busy))
    (tmp / "x").mkdir()
    facts = read_server_log(_write(tmp / "x", RUN_HEALTHY + busy + hostile + busy))
    assert _projection(facts) == _projection(base)


def test_other_prefixed_lines_are_read_for_nothing() -> None:
    for msg in ("Memory pool end. avail mem=40.00 GB", "Receive: obj=x", "Prefill batchx, #queue-req: 1"):
        assert read_line(f"{TP} {msg}") == Other()
    # a prefill line is the scheduler's batch (server.progress reads its counts), nothing else
    assert read_line(f"{TP} Prefill batch, #new-seq: 1, #new-token: 2304, cuda graph: False") == Prefill()


def test_a_pathological_server_args_line_costs_a_bounded_parse() -> None:
    """400 KB of unclosed brackets: every nesting level fails and would re-scan the rest; the reader's
    budget gives up after a few passes instead of one per level."""
    import time

    for text in ("ServerArgs(a=" + "(" * 400_000, "{'a': " + "[" * 400_000):
        began = time.perf_counter()
        assert parse_server_args(text) is None
        assert time.perf_counter() - began < 5.0
