"""A Hugging Face repo id (``--model-path inclusionAI/Ling-3.0-flash-fp4``) resolved to the snapshot the
server will load, through the local hub cache only (never the network; standard library only).

The cache is found as ``huggingface_hub.constants`` does (``--download-dir``, ``$HF_HUB_CACHE``,
``$HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``), the revision through ``refs/``; a repo not cached is nothing
to check beforehand (the server downloads it, or fails offline).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from validator.bounded_files import looks_like, read_bounded
from validator.errors import InputError
from validator.sources.container import ContainerSpec, on_host

# huggingface_hub's validate_repo_id: [namespace/]name of word characters, '-' and '.', no '--' or '..'
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]{1,96}$")
_REF_NAME = re.compile(r"^[\w.-]+(?:/[\w.-]+)*$")  # a branch or tag (refs/pr/1 included)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def looks_like_repo_id(value: str) -> bool:
    """``ORG/NAME`` as the Hub spells repo ids (a bare name is a local path here: SGLang's own examples
    always give the namespace)."""
    return "/" in value and bool(_REPO_ID.match(value)) and "--" not in value and ".." not in value


@dataclass(frozen=True)
class HubLookup:
    """Where the server would find a repo at ``revision``: ``snapshot`` when it is cached here."""

    revision: str
    cache: Path  # the hub cache directory the server reads
    cache_from: str  # which setting chose it ("HF_HOME", "--download-dir", ...)
    snapshot: Path | None
    commit: str | None

    def describe(self) -> str:
        """What was found, in one phrase, for evidence and messages."""
        if self.snapshot is not None:
            return f"Hugging Face cache {self.cache} ({self.cache_from}): {self.revision} = {self.commit}"
        return f"not in the Hugging Face cache {self.cache} ({self.cache_from}) at revision {self.revision}"


def hub_cache(env: Mapping[str, str], home: str | None, download_dir: str | None = None) -> tuple[Path, str]:
    """The hub cache directory the server reads, and the setting that chose it."""

    def expand(value: str) -> str:
        if value.startswith("~") and home:
            value = home + value[1:]
        return os.path.expandvars(value)

    if download_dir:
        return Path(expand(download_dir)), "--download-dir"
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return Path(expand(env[name])), name
    if env.get("HF_HOME"):
        return Path(expand(env["HF_HOME"])) / "hub", "HF_HOME"
    xdg = env.get("XDG_CACHE_HOME") or f"{home or '~'}/.cache"
    origin = "XDG_CACHE_HOME" if env.get("XDG_CACHE_HOME") else "the default ~/.cache/huggingface"
    return Path(expand(xdg)) / "huggingface" / "hub", origin


def lookup(
    repo: str,
    revision: str | None,
    env: Mapping[str, str],
    home: str | None,
    download_dir: str | None = None,
) -> HubLookup:
    """``repo`` at ``revision`` (default ``main``) in the server's hub cache."""
    cache, origin = hub_cache(env, home, download_dir)
    return _lookup_in(repo, revision, cache, origin)


def container_lookup(
    repo: str,
    revision: str | None,
    spec: ContainerSpec,
    env: Mapping[str, str],
    download_dir: str | None = None,
) -> HubLookup | str:
    """``lookup`` for a server in the container ``spec``: the hub cache its environment names (``env``,
    the run's own: an image's ENV is not visible here and reads as unset, as every variable of it does),
    read on the host through the bind mount that holds it; else why it cannot be read here. Without a
    cache setting the default is under the home of the image's user, which is not known here."""
    names = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    given = download_dir or next((env[n] for n in names if env.get(n)), None)
    if not given:
        return (
            "the container's Hugging Face cache is the default under its user's home "
            "(~/.cache/huggingface), which the image decides, not visible here; set HF_HOME in its "
            "environment"
        )
    inside, origin = hub_cache(env, None, download_dir)
    if "$" in given or not given.startswith("/"):
        return f"the container's Hugging Face cache ({origin}={given}) is not an absolute path known here"
    found, why = on_host(inside.as_posix(), spec)
    if found is None:
        return f"the container's Hugging Face cache {inside} ({origin}): {why}"
    return _lookup_in(repo, revision, found, f"{origin} {inside} in the container, {why}")


def _lookup_in(repo: str, revision: str | None, cache: Path, origin: str) -> HubLookup:
    rev = revision or "main"
    root = cache / ("models--" + repo.replace("/", "--"))
    commit: str | None = rev if _COMMIT.match(rev) else None
    if commit is None and _REF_NAME.match(rev):
        ref = root / "refs" / rev
        try:  # walked as every input is: never read through another user's link to where they cannot read
            text = read_bounded(ref, 128, "ref").decode("ascii", "replace").strip()
        except InputError:  # absent, refused, over the cap: no commit
            text = ""
        commit = text if _COMMIT.match(text) else None
    snapshot = root / "snapshots" / commit if commit else None
    if snapshot is not None and not looks_like(snapshot / "config.json", stat.S_ISREG):
        snapshot = None
    return HubLookup(rev, cache, origin, snapshot, commit)


def offline(env: Mapping[str, str]) -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it (1, ON, YES, TRUE)."""
    return env.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")
