"""The attestation reader: strict schema, bounded and non-blocking reads, one-line errors naming the file,
and the binding that decides whether a document describes the server being checked. Files are real,
written by the plugin's own writer; the PIDs are real processes."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validator.attestation import schema, writer
from validator.attestation.trust import binding_problems
from validator.checks.attestation import attestation_trust
from validator.checks.base import CheckContext, Outcome
from validator.errors import InputError, UnavailableError
from validator.facts import Facts, ServerFacts
from validator.pack_schema import Expectations
from validator.plugin.state import PluginState
from validator.procinfo import process_start_time
from validator.report import Status
from validator.rulepack import load_pack
from validator.sources.server.attestation import parse_document, read_attestation, read_trusted

# This test process is the "server": it listens on PORT and writes the documents, so the binding's
# listener lookup finds it and its own PID is the writer.
_SERVER = socket.socket()
_SERVER.bind(("127.0.0.1", 0))
_SERVER.listen()
PORT: int = _SERVER.getsockname()[1]
URL = f"http://127.0.0.1:{PORT}"
INFO: dict[str, Any] = {"host": "127.0.0.1", "port": PORT, "version": "0.5.23", "tp_size": 1}


def _doc(**process: Any) -> schema.Attestation:
    state = PluginState(host="127.0.0.1", port=PORT, tp_rank=0, tp_size=1)
    doc = state.document(env={})
    doc = dataclasses.replace(doc, sglang=dataclasses.replace(doc.sglang, version="0.5.23"))
    return dataclasses.replace(doc, process=dataclasses.replace(doc.process, **process))


def _write(tmp_path: Path, doc: schema.Attestation | str | bytes) -> Path:
    path = tmp_path / "att" / "attestation.json"
    if isinstance(doc, schema.Attestation):
        writer.write_document(path, doc)
    else:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(doc.encode() if isinstance(doc, str) else doc)
    return path


def _raw(doc: schema.Attestation) -> dict[str, Any]:
    return json.loads(schema.to_json(doc))


def test_reads_what_the_plugin_writes(tmp_path: Path) -> None:
    att = read_attestation(_write(tmp_path, _doc()))
    assert att.process.pid == os.getpid() and att.hooks["init_lm_head"] == "not_reached"
    assert att.draft is None and att.lm_head.remedy_applied is False
    assert att.process.uid == os.geteuid() and att.server == schema.Server(host="127.0.0.1", port=PORT)
    assert att.process.start_time == process_start_time(os.getpid())


def _deep(n: int) -> str:
    return '{"schema": "spark-validate.attestation/v2", "x": ' + "[" * n + "]" * n + "}"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"schema": "other/v9"}), "schema is 'other/v9'"),
        (json.dumps({"schema": "spark-validate.attestation/v1"}), "expected 'spark-validate.attestation/v2'"),
        (json.dumps({"schema": {"a": 1}}), "schema is a dict"),
        ('{"schema": "spark-validate.attestation/v2", "pid": ' + "9" * 5000 + "}", "4300"),
        (_deep(50_000), "nested"),
        (_deep(40), "nested"),
        (b'{"schema": "\xc3\x28"}', "UTF-8"),
    ],
)
def test_malformed_files_are_input_errors(tmp_path: Path, content: str | bytes, needle: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(InputError) as info:
        read_attestation(path)
    assert str(path) in str(info.value) and needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("section", "key", "value", "needle"),
    [
        ("hooks", "init_lm_head", "maybe", "hooks.init_lm_head"),
        ("process", "pid", "1234", "process.pid"),  # strict: no "1234" for 1234
        ("lm_head", "remedy_applied", 1, "lm_head.remedy_applied"),  # strict: no 1 for true
        ("process", "smuggled", True, "process.smuggled"),  # no unknown fields
    ],
)
def test_wrong_field_is_named(tmp_path: Path, section: str, key: str, value: Any, needle: str) -> None:
    doc = _raw(_doc())
    doc[section][key] = value
    with pytest.raises(InputError, match=rf"attestation.json: {needle}"):
        read_attestation(_write(tmp_path, json.dumps(doc)))


def test_missing_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="no attestation file"):
        read_attestation(tmp_path / "nope.json")


_READ_FIFO = """
import sys, time
from validator.errors import UnavailableError
from validator.sources.server.attestation import read_attestation
t0 = time.monotonic()
try:
    read_attestation(sys.argv[1])
except UnavailableError as exc:
    print("refused", round(time.monotonic() - t0, 3), exc)
"""


def test_fifo_at_the_path_is_refused_without_blocking(tmp_path: Path) -> None:
    """``open()`` of a FIFO waits for a writer; the reader must answer at once."""
    path = tmp_path / "att" / "attestation.json"
    path.parent.mkdir(mode=0o700)
    os.mkfifo(path)
    proc = subprocess.run(
        [sys.executable, "-c", _READ_FIFO, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("refused") and "a FIFO, not a regular file" in proc.stdout
    assert float(proc.stdout.split()[1]) < 5


@pytest.mark.parametrize("kind", ["symlink-to-device", "symlink-to-file", "directory", "oversize"])
def test_only_small_regular_files_are_read(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "att" / "attestation.json"
    path.parent.mkdir(mode=0o700)
    real = tmp_path / "real.json"
    writer.write_document(real, _doc())
    if kind == "symlink-to-device":
        path.symlink_to("/dev/zero")
    elif kind == "symlink-to-file":
        path.symlink_to(real)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b" " * (schema.MAX_BYTES + 1))
    t0 = time.monotonic()
    with pytest.raises(UnavailableError) as info:
        read_attestation(path)
    assert time.monotonic() - t0 < 5
    reason = {
        "symlink-to-device": "a symbolic link",
        "symlink-to-file": "a symbolic link",
        "directory": "a directory",
        "oversize": "over the",
    }[kind]
    assert reason in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("target", "mode"), [("file", 0o666), ("file", 0o664), ("dir", 0o777), ("dir", 0o1777)]
)
def test_files_or_directories_others_can_write_are_refused(tmp_path: Path, target: str, mode: int) -> None:
    path = _write(tmp_path, _doc())
    os.chmod(path if target == "file" else path.parent, mode)
    with pytest.raises(UnavailableError, match="writable by its group or others"):
        read_attestation(path)


# ---- the binding: does this document describe the server at URL? ----


def _problems(path: Path, url: str | None = URL, info: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    observed = read_trusted(path, url=url, **kw)
    return binding_problems(observed, url, INFO if info is None else info)


def test_fresh_attestation_of_this_process_binds(tmp_path: Path) -> None:
    path = _write(tmp_path, _doc(load_weight_s=52.5))
    info = {**INFO, "internal_states": [{"startup_time": {"load_weight": 52.5}}]}
    assert _problems(path, info=info) == []
    assert _problems(path, url=f"http://localhost:{PORT}", info=info) == []  # loopback names are one host


def test_attestation_trust_reports_the_live_jobs_judgement_and_never_passes_an_unjudged_one(
    tmp_path: Path,
) -> None:
    """The check shows what the live job found when it read the file (``unbound``), and a document the
    job never judged against this server (no job leaves one so: a guard) is an error, not a pass."""
    info = {**INFO, "internal_states": [{"startup_time": {"load_weight": 52.5}}]}
    trust = read_trusted(_write(tmp_path, _doc(load_weight_s=52.5)), url=URL)
    spec = next(c for c in load_pack(None).pack.checks if c.id == "attestation.trust")
    ctx = CheckContext(spec=spec, expect=Expectations(), mode="check")
    server = ServerFacts(url=URL, healthy=True, server_info=info)

    def judged(unbound: tuple[str, ...] | None) -> Outcome:
        trusted = dataclasses.replace(trust, unbound=unbound)
        return attestation_trust(Facts(server=server, attestation_trust=trusted), ctx)

    assert judged(tuple(binding_problems(trust, URL, info))).status is Status.PASS
    refused = judged(("written by a server on port 1, the URL is port 2",))
    assert refused.status is Status.ERROR
    assert refused.message == (
        "the attestation is not bound to this server: written by a server on port 1, the URL is port 2"
    )
    unjudged = judged(None)
    assert unjudged.status is Status.ERROR and "not judged against this server" in unjudged.message


def test_wildcard_bind_accepts_any_url_host_but_not_another_port(tmp_path: Path) -> None:
    doc = _doc()
    doc = dataclasses.replace(doc, server=schema.Server(host="0.0.0.0", port=PORT))
    path = _write(tmp_path, doc)
    info = {**INFO, "host": "0.0.0.0"}
    # 10.1.2.3 is not this host: nothing listens there, so the server's user is declared
    me = os.geteuid()
    assert _problems(path, url=f"http://10.1.2.3:{PORT}", info=info, server_uid=me) == []
    assert any(
        f"port {PORT}, the URL is port {PORT + 1}" in p
        for p in _problems(path, f"http://10.1.2.3:{PORT + 1}", info, server_uid=me)
    )


def test_foreign_hostname_and_nulls_are_never_a_reason_to_skip(tmp_path: Path) -> None:
    """As found once: a file naming another host, with nulls, was accepted as fresh."""
    doc = _raw(_doc())
    doc["process"].update(hostname="elsewhere", start_time=None, tp_size=None, load_weight_s=None)
    doc["server"].update(host=None, port=None)
    doc["sglang"]["version"] = None
    problems = _problems(_write(tmp_path, json.dumps(doc)))
    text = "; ".join(problems)
    assert "written on host 'elsewhere'" in text
    assert "records no start time" in text
    assert "no HTTP host and port" in text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_start_time_is_malformed_not_a_match(tmp_path: Path, value: str) -> None:
    """``abs(x - NaN) > tolerance`` is False: a NaN start time must never get as far as the comparison."""
    text = schema.to_json(_doc()).decode()
    text = re.sub(r'"start_time": [0-9.e+-]+', f'"start_time": {value}', text, count=1)
    with pytest.raises(InputError, match=r"process\.start_time"):
        read_attestation(_write(tmp_path, text))


def test_real_pid_and_start_time_do_not_bind_another_port(tmp_path: Path) -> None:
    """The forger's second try: the real server's PID and its start time (world-readable in /proc)."""
    path = _write(tmp_path, _doc())
    assert _problems(path) == []
    other = {**INFO, "port": PORT + 1}
    problems = _problems(path, url=f"http://127.0.0.1:{PORT + 1}", info=other)
    assert any(f"the URL is port {PORT + 1}" in p for p in problems)
    assert any(f"/server_info reports 127.0.0.1:{PORT + 1}" in p for p in problems)
    assert any("/server_info does not report" in p for p in _problems(path, info={"version": "0.5.23"}))
    assert any("not available" in p for p in binding_problems(read_trusted(path, url=URL), URL, None))


def test_owner_must_be_the_servers_user_or_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        # Unprivileged: a file owned by us is not owned by root nor by the writer UID the document names.
        doc = _doc(uid=os.geteuid() + 1)
        problems = _problems(_write(tmp_path, doc))
        assert any("the file is owned by UID" in p for p in problems)
        return
    path = _write(tmp_path, _doc())
    os.chown(path, 54321, -1)  # another user's file, in a directory it could not write
    problems = _problems(path)
    assert any(
        "the file is owned by UID 54321, neither the server's user (UID 0) nor root" in p for p in problems
    )
    os.chown(path, 0, -1)
    os.chown(path.parent, 54321, -1)
    assert any(f"directory {path.parent} is owned by UID 54321" in p for p in _problems(path))


def test_previous_run_is_not_this_server(tmp_path: Path) -> None:
    here = socket.gethostname()
    gone = _write(tmp_path, _doc(pid=2**22 + 12345, hostname=here))
    assert any("is not running on this host" in p for p in _problems(gone))
    me = process_start_time(os.getpid())
    assert me is not None
    reused = _write(tmp_path, _doc(start_time=me - 3600))
    assert any("now belongs to a process started at" in p for p in _problems(reused))
    other_load = _write(tmp_path, _doc(load_weight_s=52.5, tp_rank=0))
    info = {**INFO, "internal_states": [{"startup_time": {"load_weight": 61.0}}]}
    assert any("another server run" in p for p in _problems(other_load, info=info))
    assert any(
        "SGLang 0.5.23, the server reports 0.5.24" in p
        for p in _problems(other_load, info={**INFO, "version": "0.5.24"})
    )
    assert any(
        "tp_size 1, the server reports 2" in p for p in _problems(other_load, info={**INFO, "tp_size": 2})
    )


def test_another_users_process_is_not_the_writer(tmp_path: Path) -> None:
    """A document naming a live PID whose UID differs from the writer UID it records."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = None
        for _ in range(100):
            started = process_start_time(child.pid)
            if started is not None:
                break
            time.sleep(0.05)
        assert started is not None
        doc = _doc(pid=child.pid, start_time=started, uid=os.geteuid() + 7)
        problems = _problems(_write(tmp_path, doc))
        assert any(f"PID {child.pid} runs as UID {os.geteuid()}" in p for p in problems), problems
    finally:
        child.kill()
        child.wait(10)


# ---- any bytes, any document: a valid attestation or one InputError, never another exception ----

_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
_JSON = st.recursive(
    _LEAF,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _paths(v, (*prefix, i))
    return found


_VALID = _raw(PluginState(host="127.0.0.1", port=30000).document(env={}))
_PATHS = [p for p in _paths(_VALID) if p]


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(_PATHS), value=_JSON)
def test_a_mutated_document_is_valid_or_one_input_error(path: tuple[Any, ...], value: Any) -> None:
    doc = json.loads(json.dumps(_VALID))
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    try:
        att = parse_document(json.dumps(doc).encode(), "att.json")
    except InputError as exc:
        assert str(exc).startswith("att.json") and "\n" not in str(exc)
    else:
        assert att.schema == schema.SCHEMA
        floats = [att.process.start_time, att.process.load_weight_s]
        assert all(f is None or math.isfinite(f) for f in floats)  # NaN would compare equal to nothing


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300) | _JSON.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_a_document_or_one_input_error(data: bytes) -> None:
    with pytest.raises(InputError):
        parse_document(data, "att.json")


# ---- the listener: the document's PID must be the process serving the URL, or below it ----


def test_a_process_outside_the_listeners_tree_is_not_the_writer(tmp_path: Path) -> None:
    """PID 1 is running, its start time and UID are world-readable: all a forger needs, but it is not the
    process listening on the URL's port nor one of its children."""
    init_start = process_start_time(1)
    assert init_start is not None
    path = _write(tmp_path, _doc(pid=1, start_time=init_start, uid=os.geteuid()))
    problems = _problems(path)
    assert any(
        f"PID 1 is neither the process listening on port {PORT} (PID {os.getpid()})" in p for p in problems
    ), problems


def test_no_visible_listener_needs_a_declared_server_user(tmp_path: Path) -> None:
    idle = socket.socket()
    idle.bind(("127.0.0.1", 0))  # bound, not listening: no server on that port
    port = idle.getsockname()[1]
    try:
        doc = dataclasses.replace(_doc(), server=schema.Server(host="127.0.0.1", port=port))
        path = _write(tmp_path, doc)
        url, info = f"http://127.0.0.1:{port}", {**INFO, "port": port}
        problems = _problems(path, url=url, info=info)
        assert any("name the server's user with --server-user" in p for p in problems), problems
        assert _problems(path, url=url, info=info, server_uid=os.geteuid()) == []
        other = _problems(path, url=url, info=info, server_uid=os.geteuid() + 1)
        assert any(f"the server runs as UID {os.geteuid() + 1}" in p for p in other), other
    finally:
        idle.close()


def test_a_declared_server_user_must_be_the_listeners(tmp_path: Path) -> None:
    path = _write(tmp_path, _doc())
    problems = _problems(path, server_uid=os.geteuid() + 1)
    assert any(
        f"runs as UID {os.geteuid()}, not the declared --server-user (UID {os.geteuid() + 1})" in p
        for p in problems
    ), problems


# ---- a corpus of hostile files, each read as a real file: what the user is told, exactly ----
# Recorded from the reader before pydantic validated the pack and the report too (1,072 files, the same
# outcome for every one; the wording changed only as listed in that commit: an index is ``[0]``, an unknown
# field is "Extra inputs are not permitted", a key is cut at 60 characters).

_TEXT = json.dumps({**_VALID, "errors": ["e1"], "process": {**_VALID["process"], "load_weight_s": 1.5}})
_B = _TEXT.encode()


def _with(section: str, key: str, value: Any) -> bytes:
    doc = json.loads(_TEXT)
    doc[section][key] = value
    return json.dumps(doc).encode()


_HOSTILE: dict[str, tuple[bytes, str]] = {
    "empty": (b"", ":1: invalid JSON: Expecting value (column 1)"),
    "null": (b"null", ": not a JSON object"),
    "truncated": (_B[:200], ":1: invalid JSON: Unterminated string starting at (column "),
    "byte-order mark": (b"\xef\xbb\xbf" + _B, ": (document): Invalid JSON: expected value at line 1 "),
    "UTF-16": (_TEXT.encode("utf-16"), ": (document): Invalid JSON: expected value at line 1 column 1"),
    "not UTF-8": (_B.replace(b'"e1"', b'"e\xff1"'), f": JSON is not valid UTF-8 (byte {_B.find(b'e1') + 1})"),
    "lone surrogate": (_B.replace(b'"e1"', b'"\\ud800"'), ": (document): Invalid JSON: unexpected end of "),
    "NaN": (_B.replace(b'"load_weight_s": 1.5', b'"load_weight_s": NaN'), ": process.load_weight_s: Input "
            "should be a finite number"),
    "-Infinity": (_B.replace(b'"load_weight_s": 1.5', b'"load_weight_s": -Infinity'), ": process."
                  "load_weight_s: Input should be a finite number"),
    "1e400": (_B.replace(b'"load_weight_s": 1.5', b'"load_weight_s": 1e400'), ": process.load_weight_s: "
              "Input should be a finite number"),
    "5,000 digits": (_B.replace(b'"load_weight_s": 1.5', b'"load_weight_s": ' + b"9" * 5000), ": invalid "
                     "JSON: Exceeds the limit (4300 digits) for integer string conversion"),
    "13 deep": (b'{"schema": "x", "x": ' + b"[" * 13 + b"]" * 13 + b"}", ": JSON nested more than 12 "),
    "trailing data": (_B + b" x", f":1: invalid JSON: Extra data (column {len(_B) + 2})"),
    "control character": (_B.replace(b'"e1"', b'"e\x011"'), ":1: invalid JSON: Invalid control character"),
    "schema null": (_B.replace(b'"spark-validate.attestation/v2"', b"null"), ": schema is None, expected "
                    "'spark-validate.attestation/v2'"),
    "schema with a newline": (_B.replace(b'"spark-validate.attestation/v2"', b'"a\\nb"'), ": schema is "
                              "'a\\nb', expected 'spark-validate.attestation/v2'"),
    "only the schema": (b'{"schema": "spark-validate.attestation/v2"}', ": written_at: Field required (and 9 "
                        "more)"),
    "key with a newline": (_with("process", "a\nb\x1b[31m", 1), ": process.a\\nb\\x1b[31m: Extra inputs "
                           "are not permitted"),
    "10,000-character key": (_with("process", "k" * 10_000, 1), f": process.{'k' * 60}...: Extra inputs are "
                             "not permitted"),
    "string for an int": (_with("process", "pid", "1"), ": process.pid: Input should be a valid integer"),
    "bool for an int": (_with("process", "pid", True), ": process.pid: Input should be a valid integer"),
    "float for an int": (_with("process", "pid", 1.0), ": process.pid: Input should be a valid integer"),
    "int for a bool": (_with("lm_head", "remedy_applied", 1), ": lm_head.remedy_applied: Input should be a "
                       "valid boolean"),
    "string for a float": (_with("process", "start_time", "1"), ": process.start_time: Input should be a "
                           "valid number"),
    "list for a record": (_with("sglang", "version", []), ": sglang.version: Input should be a valid string"),
    "unknown hook state": (_with("hooks", "other", "maybe"), ": hooks.other: Input should be 'ran', "
                           "'not_reached' or 'failed'"),
    "null in a list": (_B.replace(b'["e1"]', b"[null]"), ": errors[0]: Input should be a valid string"),
    # one value per field: never the last of two (both parsers took the last one, silently, before)
    "a key twice": (_B.replace(b'"pid":', b'"pid": 1, "pid":', 1), ": invalid JSON: duplicate key 'pid'"),
    "the schema twice": (b'{"schema": "x", ' + _B[1:], ": invalid JSON: duplicate key 'schema'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(_HOSTILE))
def test_hostile_files_are_one_line_naming_the_file_and_the_field(tmp_path: Path, name: str) -> None:
    data, said = _HOSTILE[name]
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as info:
        read_attestation(path)
    assert str(info.value).startswith(str(path) + said), (str(info.value), said)
    assert "\n" not in str(info.value)


def test_files_at_and_over_the_cap(tmp_path: Path) -> None:
    at_cap = _B[:-1] + b" " * (schema.MAX_BYTES - len(_B)) + b"}"
    assert (
        len(at_cap) == schema.MAX_BYTES and read_attestation(_write(tmp_path, at_cap)).schema == schema.SCHEMA
    )
    with pytest.raises(UnavailableError, match=f"is {schema.MAX_BYTES + 1} bytes, over the "):
        read_attestation(_write(tmp_path, at_cap[:-1] + b" }"))
