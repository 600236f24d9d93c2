"""The container a docker, Compose or Kubernetes launch runs the server in (``ContainerSpec``), as the launch
readers parse it and every reader after them is given it (``Gathering.container``), and where a path
inside it lies on the host (the checkpoint's reader follows ``--model-path`` through the mounts)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    source: str | None  # host path of a bind mount; None for a named or anonymous volume
    target: str  # path inside the container
    volume: str | None = None  # the named volume, when it is one
    read_only: bool = False
    unknown: str | None = None  # a bind mount whose host path is known only at run time: why


@dataclass
class ContainerSpec:
    """What a container runtime is told to run; everything else comes from the image."""

    where: str  # "--docker-cmd", "compose:/path/compose.yaml#sglang"
    image: str | None
    argv: list[str]  # entrypoint (when overridden) + command, as the container's process gets it
    entrypoint_overridden: bool
    env: dict[str, str] = field(default_factory=dict)
    env_origin: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    built_locally: bool = False  # compose `build:`: an image made from a Dockerfile here
    # docker exec: the container, started earlier, whose image, mounts and environment are not visible
    existing: str | None = None
    # what only the runtime fills in (a Kubernetes valueFrom): variable -> why; and notes for the report
    unresolved: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def host_path(container_path: str, mounts: list[Mount]) -> tuple[Path | None, str]:
    """Where a path inside the container lives on the host, through the deepest mount that covers it;
    (None, why) when it is in a volume or the image."""
    path = posixpath.normpath(container_path)
    best: Mount | None = None
    for m in mounts:
        target = posixpath.normpath(m.target)
        if (path == target or path.startswith(target.rstrip("/") + "/")) and (
            best is None or len(target) > len(posixpath.normpath(best.target))
        ):
            best = m
    if best is None:
        return None, f"{container_path} is not mounted from the host (it is inside the image)"
    if best.unknown is not None:
        return None, f"{container_path} is mounted from a host path known only at run time ({best.unknown})"
    if best.source is None:
        what = f"the named volume {best.volume!r}" if best.volume else "an anonymous volume"
        return None, f"{container_path} is in {what}, not visible from outside the container"
    rest = posixpath.relpath(path, posixpath.normpath(best.target))
    source = Path(best.source)
    return (source if rest == "." else source / rest), f"mounted from {best.source}"


def on_host(container_path: str, spec: ContainerSpec) -> tuple[Path | None, str]:
    """``host_path`` through the container's mounts; for a container started earlier (``docker exec``)
    none, since what it mounts is not visible here."""
    if spec.existing is not None:
        return (
            None,
            f"{container_path} is in the container {spec.existing}, whose mounts are not visible here",
        )
    return host_path(container_path, spec.mounts)


def config_on_host(name: str, spec: ContainerSpec) -> Path:
    """Where the server's ``--config NAME`` lies on the host: SGLang opens it inside the container (a
    relative name from its working directory), so it is read only through a bind mount; a file of the
    image, of a container started earlier (``docker exec``) or relative to a working directory the image
    sets is not visible here, and the launch is unresolved rather than read from whatever the host has at
    that path."""
    from validator.errors import UnresolvedLaunch

    if not name.startswith("/") and not spec.workdir:
        raise UnresolvedLaunch(
            f"{spec.where}: --config {name} is relative to the image's working directory, not visible here"
        )
    inside = posixpath.join(spec.workdir or "/", name)
    found, why = on_host(inside, spec)
    if found is None:
        raise UnresolvedLaunch(
            f"{spec.where}: --config {name}: {why}; the server's settings there are not known"
        )
    return found
