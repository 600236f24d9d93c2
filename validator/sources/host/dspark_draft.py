"""The DSpark draft checkpoint's ``config.json``: is it a DSpark model, and what is its block size?

The verify width is the block size plus one, and the KDA ReplaySSM ring must be a power of two of at least
twice it; SGLang checks that only after weight loading (``srt/mem_cache/memory_pool.py`` l.818-832). Fields
are read with 0.5.23's precedence (``dspark_config.parse_dspark_draft_config`` over
``dflash_utils.parse_dflash_draft_config``); the draft is found as ``_handle_dspark`` does (a local
directory, a Hub id through the local cache only, else the target's ``dspark/`` subfolder).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from validator.bounded_files import load_json_file, looks_like
from validator.errors import InputError
from validator.facts import DSPARK_DRAFT, LAUNCH, DSparkDraftFacts
from validator.sources.container import ContainerSpec, on_host
from validator.sources.gathering import Gathering, preflight_source
from validator.sources.host import hf_cache

CONFIG_CAP = 4 * 1024 * 1024  # a draft config.json is a few KB
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def locate_draft(
    draft_path: str | None,
    model_path: str | None,
    *,
    revision: str | None,
    env: Mapping[str, str],
    cwd: Path | None = None,
    cwd_unknown: str | None = None,
) -> tuple[str, Path | None, str]:
    """(the path as SGLang would use it, the local config.json or None, how it was found). A relative
    path is the server's working directory's (``cwd``; ``cwd_unknown``: why that is known only at run
    time, and nothing is then read for it), never this process's own."""
    if cwd is None and cwd_unknown is not None:
        for given in (draft_path, None if draft_path else model_path):
            if given and not os.path.isabs(os.path.expanduser(given)):
                return given, None, f"{given} is relative to the server's working directory ({cwd_unknown})"

    def here(given: str) -> Path:
        path = Path(os.path.expanduser(given))
        return path if path.is_absolute() or cwd is None else cwd / path

    if draft_path is None:
        if model_path and looks_like(here(model_path), stat.S_ISDIR):
            sub = here(model_path) / "dspark"
            if looks_like(sub / "config.json", stat.S_ISREG):
                return str(sub), sub / "config.json", "the target checkpoint's dspark/ subfolder"
        return "", None, "no draft path given and no dspark/ subfolder in the model directory"
    local = here(draft_path)
    if looks_like(local, stat.S_ISDIR):
        config = local / "config.json"
        return draft_path, (config if looks_like(config, lambda _: True) else None), "local directory"
    if _REPO_ID.match(draft_path):
        found = hf_cache.lookup(draft_path, revision, env, env.get("HOME") or os.path.expanduser("~"))
        if found.snapshot is not None and found.commit is not None:
            root = found.cache / ("models--" + draft_path.replace("/", "--"))
            how = f"Hugging Face cache {root} ({found.revision} = {found.commit[:12]})"
            return draft_path, found.snapshot / "config.json", how
        return draft_path, None, f"Hugging Face repo {draft_path} is not in the local hub cache"
    return draft_path, None, f"{draft_path} is not a directory"


def read_dspark_draft(
    draft_path: str | None,
    model_path: str | None,
    *,
    revision: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    cwd_unknown: str | None = None,
) -> DSparkDraftFacts:
    """The draft's facts; a config.json that exists but is malformed raises ``InputError`` (exit 65)."""
    shown, config, how = locate_draft(
        draft_path, model_path, revision=revision, env=env or {}, cwd=cwd, cwd_unknown=cwd_unknown
    )
    if config is None:
        return DSparkDraftFacts(path=shown, config_path=None, located_by=how, note=how)
    doc = load_json_file(config, CONFIG_CAP, "DSpark draft config.json")
    if not isinstance(doc, dict):
        raise InputError(str(config), "config.json must be a JSON object")
    where = str(config)
    dflash = _section(doc, "dflash_config", where)
    dspark = {**dflash, **_section(doc, "dspark_config", where)}
    text = _section(doc, "text_config", where) or doc
    block, key = _first_int(
        where,
        ("dspark_block_size", doc.get("dspark_block_size")),
        ("dflash_config.block_size", dflash.get("block_size")),
        ("block_size", doc.get("block_size")),
    )

    def layered(prefixed: str, name: str) -> int | None:
        """SGLang's one precedence for ``markov_rank`` and ``mask_token_id``: the prefixed top-level key,
        then ``dspark_config`` (over ``dflash_config``), then ``text_config``, then the top level."""
        value, _ = _first_int(
            where,
            (prefixed, doc.get(prefixed)),
            (f"dspark_config.{name}", dspark.get(name)),
            (f"text_config.{name}", text.get(name)),
            (name, doc.get(name)),
        )
        return value

    markov = layered("dspark_markov_rank", "markov_rank")
    mask = layered("dspark_noise_token_id", "mask_token_id")
    layers, _ = _first_int(where, ("num_hidden_layers", text.get("num_hidden_layers")))
    vocab, _ = _first_int(
        where, ("text_config.vocab_size", text.get("vocab_size")), ("vocab_size", doc.get("vocab_size"))
    )
    hidden, _ = _first_int(
        where, ("text_config.hidden_size", text.get("hidden_size")), ("hidden_size", doc.get("hidden_size"))
    )
    arch = doc.get("architectures")
    architectures = [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []
    return DSparkDraftFacts(
        path=shown,
        config_path=config,
        architectures=architectures,
        block_size=block,
        block_size_key=key,
        markov_rank=markov,
        mask_token_id=mask,
        num_hidden_layers=layers,
        vocab_size=vocab,
        hidden_size=hidden,
        located_by=how,
    )


def _section(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(where, f"{key} must be an object, not {type(value).__name__}")
    return value


def _first_int(where: str, *candidates: tuple[str, Any]) -> tuple[int | None, str | None]:
    """The first candidate that is set, as an int (SGLang's ``int(...)``: a bool or a string is refused
    here, since SGLang would either crash on it or read something the author did not mean)."""
    for key, value in candidates:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(where, f"{key} must be an integer, not {value!r}"[:200])
        return value, key
    return None, None


def _dspark(g: Gathering) -> bool:
    return str(g.launch.args.get("speculative_algorithm") or "").upper() == "DSPARK"


@preflight_source(DSPARK_DRAFT, 50, needs=(LAUNCH,), applies=_dspark)
def gather(g: Gathering) -> None:
    """The draft a DSPARK launch names (or the one SGLang would default to); for a server in a container,
    found where the container finds it, through its mounts (``in_container``)."""
    args = g.launch.args
    draft = args.get("speculative_draft_model_path")
    revision = args.get("speculative_draft_model_revision")
    model_path = args.get("model_path")
    draft_path = draft if isinstance(draft, str) else None
    model = model_path if isinstance(model_path, str) else None
    rev = revision if isinstance(revision, str) else None
    if g.container is not None:
        g.facts.dspark_draft = in_container(draft_path, model, g.container, revision=rev, env=g.launch.env)
        return
    g.facts.dspark_draft = read_dspark_draft(
        draft_path,
        model,
        revision=rev,
        env=g.launch.env,
        cwd=g.launch.working_directory,
        cwd_unknown=g.launch.unresolved.get("working_directory")
        if g.launch.working_directory is None
        else None,
    )


def in_container(
    draft_path: str | None,
    model_path: str | None,
    spec: ContainerSpec,
    *,
    revision: str | None,
    env: Mapping[str, str],
) -> DSparkDraftFacts:
    """The draft of a server in the container ``spec``: SGLang opens the path there, so an absolute one
    (or the model's ``dspark/`` subfolder) is read on the host through the bind mount that holds it, a Hub
    id through the cache the container's environment names (``hf_cache.container_lookup``); what is in
    the image, a volume, or under the image's working directory is not read (the note says why)."""

    def unread(shown: str, why: str) -> DSparkDraftFacts:
        return DSparkDraftFacts(path=shown, config_path=None, located_by=why, note=why)

    if draft_path is None:
        if model_path is None or not model_path.startswith("/"):
            return unread(
                "",
                f"no draft path given; the model's dspark/ subfolder ({model_path}) is not "
                "an absolute path in the container, not read here",
            )
        host, why = on_host(posixpath.join(model_path, "dspark"), spec)
        if host is None:
            return unread("", f"no draft path given, and the model's dspark/ subfolder: {why}")
        found = read_dspark_draft(str(host), None)
        if found.config_path is None:  # no dspark/ there: SGLang has no draft either
            return unread("", f"no draft path given and no dspark/ subfolder in the model directory ({why})")
        return replace(
            found, path=posixpath.join(model_path, "dspark"), located_by=f"the target's dspark/ ({why})"
        )
    if draft_path.startswith("/"):
        host, why = on_host(draft_path, spec)
        if host is None:
            return unread(draft_path, f"--speculative-draft-model-path {why}")
        found = read_dspark_draft(str(host), None)
        return replace(found, path=draft_path, located_by=f"{found.located_by} ({why})")
    if _REPO_ID.match(draft_path):
        lookup = hf_cache.container_lookup(draft_path, revision, spec, env)
        if isinstance(lookup, str):
            return unread(
                draft_path,
                f"--speculative-draft-model-path {draft_path} is a Hugging Face repo "
                f"id, read inside the container: {lookup}",
            )
        if lookup.snapshot is None:
            return unread(draft_path, f"Hugging Face repo {draft_path} is {lookup.describe()}")
        found = read_dspark_draft(str(lookup.snapshot), None)
        return replace(found, path=draft_path, located_by=lookup.describe())
    return unread(
        draft_path,
        f"--speculative-draft-model-path {draft_path} is relative to the container's "
        "working directory, not read here",
    )
