"""``--kube-manifest FILE [--kube-container NAME]``: the SGLang container of a Kubernetes manifest.

Read as the kubelet execs it: ``command`` then ``args``, with ``$(VAR)`` replaced from earlier ``env``
entries (``$$`` literal, undefined left as written); ``valueFrom``/``envFrom`` are run-time values, reported
unresolved (a server flag whose value refers to one is unresolved, not parsed as written); only ``hostPath``
volumes are paths on this host. The containers are a workload's pod template's, and a LeaderWorkerSet's
leader and worker templates' (each pod a rank of one multi-node server, with the variables LWS injects).
The container is the one ``--kube-container`` names, else the only one running SGLang or
``spark-validate launch``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validator.bounded_files import read_text_bounded
from validator.errors import InputError, UnresolvedLaunch
from validator.sources.container import ContainerSpec, Mount
from validator.sources.launch.command import SHELLS, placeholder, required, takes_value
from validator.sources.launch.shell.programs import is_server_command

MANIFEST_CAP = 4 * 1024 * 1024
EXPANDED_CAP = 4 * MANIFEST_CAP  # the kubelet's expansions of one container's env, command and args together
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass(frozen=True)
class Lws:
    """A pod of a LeaderWorkerSet: its role and what the LWS controller makes its environment from."""

    name: str
    size: object  # spec.leaderWorkerTemplate.size as written (LWS API: default 1)
    role: str  # "leader", "worker", or both where the worker template serves for the leader too


@dataclass(frozen=True)
class Rbg:
    """A pod of a RoleBasedGroup (sgl-project/rbg) role: the role's name, and why the pod the controller
    makes is not the template as written (a strategic-merge patch or a referenced template), if it is not."""

    name: str
    role: str
    patched: str | None


# what a role's pod template may be patched by, or taken from, before the controller makes the pod (rbg's
# API: v1alpha2 RoleSpec's standalonePattern/leaderWorkerPattern, v1alpha1 RoleSpec's template)
_RBG_PATCHES = ("templateRef", "templatePatch", "leaderTemplatePatch", "workerTemplatePatch")
_RBG_LWS_PATCHES = ("patchLeaderTemplate", "patchWorkerTemplate")
# the variables the RoleBasedGroup controller injects (rbg's api/workloads/constants/env.go)
_RBG_VARIABLES = (
    "RBG_GROUP_NAME", "RBG_ROLE_NAME", "RBG_ROLE_INDEX", "RBG_ROLE_INSTANCE_NAME", "RBG_COMPONENT_NAME",
    "RBG_COMPONENT_INDEX", "RBG_LWP_LEADER_ADDRESS", "RBG_LWP_WORKER_INDEX", "RBG_LWP_GROUP_SIZE",
)  # fmt: skip


def _rbg_roles(doc: dict[str, Any], spec: dict[str, Any]) -> list[tuple[dict[str, Any], Rbg]]:
    """The pod specs of a RoleBasedGroup's roles: v1alpha2's ``standalonePattern.template`` or
    ``leaderWorkerPattern.template``, v1alpha1's ``template`` (``leaderWorkerSet`` patches it per rank)."""
    meta = doc.get("metadata")
    name = str(meta.get("name")) if isinstance(meta, dict) else ""
    out: list[tuple[dict[str, Any], Rbg]] = []
    for role in spec.get("roles") or []:
        if not isinstance(role, dict):
            continue
        pattern = next(
            (role[k] for k in ("standalonePattern", "leaderWorkerPattern") if isinstance(role.get(k), dict)),
            role,
        )
        lws = role.get("leaderWorkerSet")
        patches = [k for k in _RBG_PATCHES if pattern.get(k) or role.get(k)]
        patches += [f"leaderWorkerSet.{k}" for k in _RBG_LWS_PATCHES if isinstance(lws, dict) and lws.get(k)]
        template = pattern.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            pod = template["spec"]
            if isinstance(pod.get("containers"), list):
                out.append((pod, Rbg(name, str(role.get("name")), ", ".join(patches) or None)))
    return out


def _pod_specs(doc: object) -> list[tuple[dict[str, Any], Lws | Rbg | None]]:
    """The pod specs of a Pod, of the pod template of a workload, of a LeaderWorkerSet's templates
    (LWS API: ``leaderTemplate``, when given, makes the leader pod, else ``workerTemplate`` makes it too),
    or of a RoleBasedGroup's roles."""
    if not isinstance(doc, dict):
        return []
    spec = doc.get("spec")
    if doc.get("kind") == "RoleBasedGroup" and isinstance(spec, dict):
        return list(_rbg_roles(doc, spec))
    lws = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    if isinstance(lws, dict):
        meta = doc.get("metadata")
        name = str(meta.get("name")) if isinstance(meta, dict) else ""
        size = lws.get("size", 1)
        leader = lws.get("leaderTemplate")
        templates = [("leader", leader), ("worker", lws.get("workerTemplate"))]
        if not isinstance(leader, dict):
            templates = [("leader or worker", lws.get("workerTemplate"))]
        return [
            (t["spec"], Lws(name, size, role))
            for role, t in templates
            if isinstance(t, dict)
            and isinstance(t.get("spec"), dict)
            and isinstance(t["spec"].get("containers"), list)
        ]
    if isinstance(spec, dict) and isinstance(spec.get("jobTemplate"), dict):  # CronJob
        spec = spec["jobTemplate"].get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        spec = spec["template"].get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        return []
    return [(spec, None)]


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


# the server's entry points as a shell string names them (a candidate only: the shell reader then reads it)
_SERVER_IN_STRING = re.compile(r"\bsglang\.launch_server\b|\bsglang\s+serve\b|\bspark-validate\s+launch\b")


def _shell_string(words: list[str]) -> str | None:
    """STRING of ``bash|sh|dash [OPTIONS] -c STRING [NAME [ARG...]]`` (bash(1): after the options, a lone
    ``-`` or ``--`` ending them), else None."""
    if not words or posixpath.basename(words[0]) not in SHELLS:
        return None
    i, command = 1, False
    while i < len(words) and words[i][:1] in ("-", "+") and words[i] not in ("-", "--"):
        command = command or (words[i][0] == "-" and not words[i].startswith("--") and "c" in words[i][1:])
        i += 1
    if i < len(words) and words[i] in ("-", "--"):
        i += 1
    return words[i] if command and i < len(words) else None


def _starts_server_in_shell(c: Mapping[str, Any], where: str) -> bool:
    """The container's command is a shell's ``-c`` string that names the server's entry point (SGLang's own
    ``k8s-sglang-distributed-sts.yaml``): the candidate, whose string the shell reader then reads."""
    string = _shell_string(
        [*_words(c.get("command"), "command", where), *_words(c.get("args"), "args", where)]
    )
    return string is not None and _SERVER_IN_STRING.search(string) is not None


def _shown(c: Mapping[str, Any], kind: Lws | Rbg | None) -> str:
    """The container's name as the report and ``--kube-container`` give it: ``ROLE/NAME`` in a
    RoleBasedGroup, whose roles may name their containers alike."""
    return f"{kind.role}/{c.get('name')}" if isinstance(kind, Rbg) else str(c.get("name"))


def select_container(
    path: Path, container: str | None
) -> tuple[dict[str, Any], dict[str, Any], Lws | Rbg | None]:
    """The SGLang container of the manifest (multi-document YAML) and its pod spec, exit 65 naming the file
    when the manifest is not one or the container cannot be told."""
    import yaml

    from validator.yaml_safe import safe_load_all

    where = str(path)
    text = read_text_bounded(path, MANIFEST_CAP, "Kubernetes manifest", names=True)
    try:
        docs = safe_load_all(text)
    except RecursionError:
        raise InputError(where, "nested too deeply: not a Kubernetes manifest") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(where, "not valid YAML", mark.line + 1 if mark is not None else None) from None
    found: list[tuple[dict[str, Any], dict[str, Any], Lws | Rbg | None]] = []
    for doc in docs:
        for pod, kind in _pod_specs(doc):
            found += [(c, pod, kind) for c in pod["containers"] if isinstance(c, dict)]
    names = ", ".join(_shown(c, kind) for c, _, kind in found) or "none"
    if container is not None:
        chosen = [f for f in found if container in (f[0].get("name"), _shown(f[0], f[2]))]
        if not chosen:
            raise InputError(where, f"no container {container!r} (containers: {names})")
    else:
        chosen = [f for f in found if _runs_server(f[0], where)]
        if not chosen:  # none runs it directly: a shell -c string that does
            chosen = [f for f in found if _starts_server_in_shell(f[0], where)]
    if len(chosen) != 1:
        raise InputError(
            where,
            f"cannot tell which container runs SGLang (containers: {names}): none or several run "
            "sglang.launch_server, sglang serve or spark-validate launch (directly or in a shell's -c "
            "string); name it with --kube-container",
        )
    return chosen[0]


# what the LeaderWorkerSet controller adds to every container of its pods (LWS reference, "Environment
# Variables"; pkg/utils/pod: put first, replacing the template's own of the same name)
_LWS_VARIABLES = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


def _lws_env(lws: Lws, where: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The variables LWS injects into a pod of ``lws`` (env, origin, unresolved): the group size is the
    template's ``size``; the leader's address names the group, and the worker index the pod in it, which
    only the controller knows when it creates the pod."""
    controller = "set by the LeaderWorkerSet controller when it creates the pod"
    unresolved = {
        "LWS_LEADER_ADDRESS": f"{where}: the leader's address ({lws.name}-GROUP.{lws.name}.NAMESPACE), "
        + controller,
        "LWS_WORKER_INDEX": f"{where}: the pod's index in its group (the {lws.role}: 0 for the leader, 1 up "
        f"for a worker; LWS before 0.6 sets none), {controller}",
    }
    if isinstance(lws.size, int) and not isinstance(lws.size, bool) and lws.size >= 1:
        return (
            {"LWS_GROUP_SIZE": str(lws.size)},
            {"LWS_GROUP_SIZE": f"{where} LeaderWorkerSet size"},
            unresolved,
        )
    # the API server admits a size of at least 1 only (LWS's CRD: minimum 1)
    unresolved["LWS_GROUP_SIZE"] = f"{where}: leaderWorkerTemplate.size {lws.size!r} is not a group size"
    return {}, {}, unresolved


def _argv(words: list[str], env: Mapping[str, str], unresolved: dict[str, str], budget: Budget) -> list[str]:
    """The kubelet's argv: each word expanded; a server flag whose value refers to a variable only the
    kubelet knows has that value unresolved (``unresolved[dest]``), never parsed as its ``$(NAME)`` text (a
    required one stands as ``placeholder``); any other such word is kept as written (``$(NAME)`` noted)."""
    out: list[str] = []
    for raw in words:
        refs = sorted(r for r in references(raw) if r in unresolved)
        word = budget.expand(raw, env)
        if not refs:
            out.append(word)
            continue
        why = f"{raw!r} refers to $({refs[0]}): {unresolved[refs[0]]}"
        flag, eq, _ = word.partition("=")
        if word.startswith("--") and eq and (dest := takes_value(flag)) is not None:
            unresolved[dest] = why
            if required(flag):
                out.append(f"{flag}={placeholder(dest)}")
            continue
        if out and out[-1].startswith("-") and (dest := takes_value(out[-1])) is not None:
            unresolved[dest] = why
            if required(out[-1]):
                out.append(placeholder(dest))
            else:
                out.pop()
            continue
        out.append(word)
    return out


class Budget:
    """What the kubelet's expansions of one container may add up to (``EXPANDED_CAP``): each ``$(VAR)``
    copies a variable, which may itself be copies, so 40 lines of ``A1=$(A0)$(A0)``, ``A2=$(A1)$(A1)``...
    double to terabytes (red team 19: MemoryError, exit 1, or the OOM killer)."""

    def __init__(self, where: str) -> None:
        self.left, self.where = EXPANDED_CAP, where

    def expand(self, text: str, env: Mapping[str, str]) -> str:
        try:
            out = expand(text, env, limit=self.left)
        except OverflowError:
            raise InputError(
                self.where, f"its $(VAR) references expand past {EXPANDED_CAP} bytes for one container"
            ) from None
        self.left -= len(out)
        return out


def expand(text: str, env: Mapping[str, str], *, limit: int | None = None) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined variables replaced, ``$$`` to ``$``, the rest kept;
    OverflowError past ``limit`` characters, measured before anything is joined."""
    parts: list[str] = []
    size, pos = 0, 0
    for m in _REF.finditer(text):
        name = m.group(1)
        value = "$" if m.group(0) == "$$" else (env[name] if name in env else m.group(0))
        parts += [text[pos : m.start()], value]
        size += m.start() - pos + len(value)
        pos = m.end()
        if limit is not None and size > limit:
            raise OverflowError(limit)
    parts.append(text[pos:])
    if limit is not None and size + len(text) - pos > limit:
        raise OverflowError(limit)
    return "".join(parts)


def references(text: str) -> set[str]:
    """The variable names ``text`` refers to with ``$(VAR)``."""
    return {m.group(1) for m in _REF.finditer(text) if m.group(1)}


def load_kube_container(path: Path, container: str | None) -> ContainerSpec:
    """The SGLang container as the kubelet will run it (``unresolved``: what only the kubelet knows)."""
    c, pod, owner = select_container(path, container)
    where = f"kubernetes:{path}#{_shown(c, owner)}"
    if isinstance(owner, Rbg) and owner.patched:
        raise UnresolvedLaunch(
            f"{where}: the RoleBasedGroup controller makes role {owner.role}'s pods from its template with "
            f"{owner.patched} applied (a strategic merge or another template): the container it runs is not "
            "read here"
        )
    lws = owner if isinstance(owner, Lws) else None
    budget = Budget(str(path))
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    unresolved: dict[str, str] = {}
    warnings: list[str] = []
    if lws is not None:
        env, origin, unresolved = _lws_env(lws, where)
    elif isinstance(owner, Rbg):
        unresolved = dict.fromkeys(
            _RBG_VARIABLES,
            f"{where}: set by the RoleBasedGroup controller when it creates the pod (which of these its "
            "version sets, and their values, are known only then)",
        )
    for entry in c.get("env") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise InputError(str(path), f"container {c.get('name')}: an env entry without a name")
        name = entry["name"]
        if lws is not None and name in _LWS_VARIABLES:
            continue  # LWS puts its own first and drops the template's of the same name
        if isinstance(owner, Rbg) and name.startswith("RBG_"):
            continue  # the controller's own: a template's of that prefix is not what the pod gets
        if "valueFrom" in entry:
            source = entry["valueFrom"]
            kind = next(iter(source), "valueFrom") if isinstance(source, dict) else "valueFrom"
            unresolved[name] = f"{where}: {name} comes from {kind}, filled in by the kubelet at run time"
            env.pop(name, None)
            continue
        value = entry.get("value", "")
        env[name] = budget.expand(str(value) if value is not None else "", env)
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
    command = _words(c.get("command"), "command", where)
    args = _words(c.get("args"), "args", where)
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
        argv=_argv([*command, *args], env, unresolved, budget) if command else [],
        entrypoint_overridden=bool(command),
        env=env,
        env_origin=origin,
        mounts=mounts,
        workdir=str(c["workingDir"]) if isinstance(c.get("workingDir"), str) else None,
        unresolved=unresolved,
        warnings=warnings,
    )
