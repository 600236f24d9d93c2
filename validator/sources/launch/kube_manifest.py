"""``--kube-manifest FILE [--kube-container NAME]``: the SGLang container of a Kubernetes manifest.

Read as the kubelet execs it: ``command`` then ``args``, with ``$(VAR)`` replaced from earlier ``env``
entries (``$$`` literal, undefined left as written); ``valueFrom``/``envFrom`` are run-time values, reported
unresolved; only ``hostPath`` volumes are paths on this host. The container is the one
``--kube-container`` names, else the only one running SGLang or ``spark-validate launch``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from validator.bounded_files import read_text_bounded
from validator.errors import InputError
from validator.sources.container import ContainerSpec, Mount
from validator.sources.launch.shell.programs import is_server_command

MANIFEST_CAP = 4 * 1024 * 1024
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _pod_spec(doc: object) -> dict[str, Any] | None:
    """The pod spec of a Pod, or of the pod template of a workload."""
    if not isinstance(doc, dict):
        return None
    spec = doc.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("jobTemplate"), dict):  # CronJob
        spec = spec["jobTemplate"].get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        spec = spec["template"].get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        return None
    return spec


def _words(value: object, key: str, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(w, (str, int, float)) for w in value):
        raise InputError(where, f"{key} must be a list of strings")
    return [str(w) for w in value]


def _runs_server(c: Mapping[str, Any], where: str) -> bool:

    return is_server_command(
        [*_words(c.get("command"), "command", where), *_words(c.get("args"), "args", where)]
    )


def select_container(path: Path, container: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The SGLang container of the manifest (multi-document YAML) and its pod spec, exit 65 naming the file
    when the manifest is not one or the container cannot be told."""
    import yaml

    where = str(path)
    text = read_text_bounded(path, MANIFEST_CAP, "Kubernetes manifest", names=True)
    try:
        docs = list(yaml.safe_load_all(text))
    except RecursionError:
        raise InputError(where, "nested too deeply: not a Kubernetes manifest") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(where, "not valid YAML", mark.line + 1 if mark is not None else None) from None
    found: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for doc in docs:
        pod = _pod_spec(doc)
        if pod is not None:
            found += [(c, pod) for c in pod["containers"] if isinstance(c, dict)]
    names = ", ".join(str(c.get("name")) for c, _ in found) or "none"
    if container is not None:
        chosen = [(c, p) for c, p in found if c.get("name") == container]
        if not chosen:
            raise InputError(where, f"no container {container!r} (containers: {names})")
    else:
        chosen = [(c, p) for c, p in found if _runs_server(c, where)]
    if len(chosen) != 1:
        raise InputError(
            where,
            f"cannot tell which container runs SGLang (containers: {names}): none or several run "
            "sglang.launch_server, sglang serve or spark-validate launch; name it with --kube-container",
        )
    return chosen[0]


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined variables replaced, ``$$`` to ``$``, the rest kept."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _REF.sub(sub, text)


def references(text: str) -> set[str]:
    """The variable names ``text`` refers to with ``$(VAR)``."""
    return {m.group(1) for m in _REF.finditer(text) if m.group(1)}


def load_kube_container(path: Path, container: str | None) -> ContainerSpec:
    """The SGLang container as the kubelet will run it (``unresolved``: what only the kubelet knows)."""
    c, pod = select_container(path, container)
    where = f"kubernetes:{path}#{c.get('name')}"
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    unresolved: dict[str, str] = {}
    warnings: list[str] = []
    for entry in c.get("env") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(str(path), f"container {c.get('name')}: an env entry without a name")
        name = entry["name"]
        if "valueFrom" in entry:
            source = entry["valueFrom"]
            kind = next(iter(source), "valueFrom") if isinstance(source, dict) else "valueFrom"
            unresolved[name] = f"{where}: {name} comes from {kind}, filled in by the kubelet at run time"
            env.pop(name, None)
            continue
        value = entry.get("value", "")
        env[name] = expand(str(value) if value is not None else "", env)
        origin[name] = f"{where} env"
        unresolved.pop(name, None)
    if c.get("envFrom"):
        warnings.append(
            f"{where}: envFrom (a ConfigMap or Secret) adds variables known only at run time; a recipe "
            "variable set only there reads as unset here: set it in env"
        )
    for key in ("command", "args"):
        for word in _words(c.get(key), key, where):
            for ref in references(word) & unresolved.keys():
                unresolved.setdefault(f"$({ref})", f"{key} refers to $({ref}): {unresolved[ref]}")
    command = [expand(w, env) for w in _words(c.get("command"), "command", where)]
    args = [expand(w, env) for w in _words(c.get("args"), "args", where)]
    volumes = {
        str(v.get("name")): v for v in pod.get("volumes") or [] if isinstance(v, dict) and v.get("name")
    }
    mounts: list[Mount] = []
    for m in c.get("volumeMounts") or []:
        if not isinstance(m, dict) or not isinstance(m.get("mountPath"), str):
            continue
        volume = volumes.get(str(m.get("name")), {})
        host = volume.get("hostPath")
        source = str(host.get("path")) if isinstance(host, dict) and host.get("path") else None
        mounts.append(
            Mount(
                source=source,
                target=m["mountPath"],
                volume=None if source else str(m.get("name")),
                read_only=bool(m.get("readOnly")),
            )
        )
    image = c.get("image")
    return ContainerSpec(
        where=where,
        image=str(image) if image is not None else None,
        # without `command` the image's ENTRYPOINT runs with `args` as its arguments: not visible here
        argv=[*command, *args] if command else [],
        entrypoint_overridden=bool(command),
        env=env,
        env_origin=origin,
        mounts=mounts,
        workdir=str(c["workingDir"]) if isinstance(c.get("workingDir"), str) else None,
        unresolved=unresolved,
        warnings=warnings,
    )
