"""``--compose FILE [--service NAME]``: a Compose service -> the container's launch (``ContainerSpec``).

Read the way Docker Compose does before it talks to a daemon (held to ``docker-compose config`` by
``tests/test_deploy_compose.py``): interpolation from the environment and the project's ``.env``,
``command``/``entrypoint`` as string or list, ``environment`` over ``env_file``, and short or long
``volumes`` with ``./`` and ``~`` resolved.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from validator.bounded_files import FileAbsent, lexists, read_text_bounded
from validator.errors import InputError, UsageError
from validator.sources.container import ContainerSpec, Mount
from validator.sources.launch.docker_run import env_file_lines, parse_volume
from validator.sources.launch.env_file import others_could_create
from validator.sources.launch.shell.programs import is_server_command

_VAR = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?\Z", re.DOTALL)
COMPOSE_CAP = 4 << 20


def read_dotenv(path: Path, where: str) -> dict[str, str]:
    """Compose's ``.env`` / ``env_file`` lines: ``[export ]KEY=value``, matching quotes removed, a ``#``
    after whitespace starts a comment in an unquoted value."""
    out: dict[str, str] = {}
    for number, lstripped in env_file_lines(path):
        line = lstripped.rstrip()
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            # a line without '=' is never quoted: it may be a pasted token (SECURITY.md, Secrets)
            raise InputError(
                where, f"not KEY=VALUE: {key[:40]!r}" if eq else "not KEY=VALUE (no '=')", number
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0]
        out[key] = value
    return out


MAX_NODES = 200_000  # a service is a few hundred; YAML aliases can make a small file a huge tree
MAX_NESTING = 64


def interpolate(value: Any, env: Mapping[str, str], where: str) -> Any:
    """Compose's variable substitution over every string of a document (bounded: aliases expanded by the
    walk count against ``MAX_NODES``, nesting against ``MAX_NESTING``)."""
    budget = [MAX_NODES]
    return _interpolate(value, env, where, budget, 0)


def _interpolate(value: Any, env: Mapping[str, str], where: str, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise InputError(where, f"more than {MAX_NODES} values (YAML aliases?): not a Compose service")
    if depth > MAX_NESTING:
        raise InputError(where, f"nested deeper than {MAX_NESTING} levels: not a Compose service")
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            bare = m.group("bare")
            if bare is not None:
                return env.get(bare, "")
            braced = _BRACED.match(m.group("braced") or "")
            if braced is None:
                raise InputError(where, f"invalid interpolation format {m.group(0)!r}")
            name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
            current = env.get(name)
            if op is None:
                return current or ""
            empty = current is None or (op.startswith(":") and current == "")
            if op.endswith("-"):
                return str(_interpolate(arg, env, where, budget, depth + 1)) if empty else str(current)
            if op.endswith("+"):
                return "" if empty else str(_interpolate(arg, env, where, budget, depth + 1))
            if empty:
                raise InputError(where, f"required variable {name} is missing a value: {arg}")
            return str(current)

        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [_interpolate(v, env, where, budget, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, env, where, budget, depth + 1) for k, v in value.items()}
    return value


def _words(value: Any, what: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise InputError(where, f"cannot split {what}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    raise InputError(where, f"{what} must be a string or a list of strings")


def _scalar(value: Any, name: str, where: str) -> str:
    if isinstance(value, bool):
        raise InputError(where, f"environment {name}: true/false must be quoted (Compose refuses a boolean)")
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InputError(where, f"environment {name}: not a string or a number")


def _absent_but_safe(path: Path, where: str, what: str, until: str) -> None:
    """A file Compose reads (``what``, at ``path``) that is not there is read as no file only where nobody
    but root and the reading user could create it before ``docker compose up`` reads it."""
    why = others_could_create(path, ())
    if why is not None:
        raise InputError(where, f"{what} is not there, but {why}: anyone could create it {until}")


def _project_dotenv(dotenv: Path) -> dict[str, str]:
    """The project's ``.env``, held to the trusted-file rule present or absent: another user who could write
    or plant it would choose every ``${VAR:-default}`` after this verdict. Anything there goes to the trusted
    reader; nothing there counts as no file only where nobody else could create one."""
    if lexists(dotenv, "the Compose project's .env"):  # as the Compose file's owner could look
        return read_dotenv(dotenv, str(dotenv))
    _absent_but_safe(
        dotenv,
        str(dotenv),
        "the Compose project's .env",
        "before `docker compose up` reads it (keep the Compose file in a directory only you and root "
        "can write)",
    )
    return {}


def _environment(
    service: dict[str, Any], base: Path, host: Mapping[str, str], where: str
) -> tuple[dict[str, str], dict[str, str]]:
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    files = service.get("env_file")
    entries: list[Any] = [] if files is None else files if isinstance(files, list) else [files]
    for entry in entries:
        required = True
        if isinstance(entry, dict):
            required = bool(entry.get("required", True))
            entry = entry.get("path")
        if not isinstance(entry, str):
            raise InputError(where, "env_file entries must be paths")
        # Not resolved: the trusted reader walks a link itself and judges the link's own directory too.
        path = base / os.path.expanduser(entry)
        try:  # never stat'ed first: the trusted walk says whether it is there, following no planted link
            values = read_dotenv(path, str(path))
        except FileAbsent:
            if required:
                raise
            _absent_but_safe(path, where, f"env_file {path} (required: false)", "before the service starts")
            continue
        for k, v in values.items():
            env[k], origin[k] = v, f"env_file {path}"
    given = service.get("environment")
    if isinstance(given, dict):
        items = [(str(k), v) for k, v in given.items()]
    elif isinstance(given, list):
        items = []
        for item in given:
            key, eq, val = str(item).partition("=")
            items.append((key, val if eq else None))
    elif given is None:
        items = []
    else:
        raise InputError(where, "environment must be a map or a list")
    for key, value in items:
        if value is None:
            if key in host:
                env[key], origin[key] = host[key], f"{where} environment (from the host's environment)"
            continue
        env[key], origin[key] = _scalar(value, key, where), f"{where} environment"
    return env, origin


def _mounts(service: dict[str, Any], base: Path, host: Mapping[str, str], where: str) -> list[Mount]:
    mounts: list[Mount] = []
    for item in service.get("volumes") or []:
        if isinstance(item, str):
            m = parse_volume(item, where, str(base))
        elif isinstance(item, dict):
            target = item.get("target")
            if not isinstance(target, str):
                raise InputError(where, "a volume's long syntax needs a target")
            source = item.get("source")
            kind = item.get("type", "volume")
            read_only = bool(item.get("read_only", False))
            if kind == "bind" and isinstance(source, str):
                m = Mount(source, target, read_only=read_only)
            else:
                m = Mount(None, target, volume=source if kind == "volume" else None, read_only=read_only)
        else:
            raise InputError(where, "volumes entries must be strings or maps")
        if m.source is not None:
            source = m.source
            if source.startswith("~"):
                source = (host.get("HOME") or os.path.expanduser("~")) + source[1:]
            m = Mount(os.path.normpath(os.path.join(base, source)), m.target, m.volume, m.read_only)
        mounts.append(m)
    return mounts


# Compose's default file names, and the override file ``docker compose up`` merges over each when it finds
# the file itself (the Compose specification: "compose.override.yaml"; the legacy docker-compose names)
_OVERRIDES = {
    "compose.yaml": ("compose.override.yaml", "compose.override.yml"),
    "compose.yml": ("compose.override.yaml", "compose.override.yml"),
    "docker-compose.yaml": ("docker-compose.override.yaml", "docker-compose.override.yml"),
    "docker-compose.yml": ("docker-compose.override.yaml", "docker-compose.override.yml"),
}


def _no_override(file: Path, where: str) -> None:
    """A default-named Compose file with an override beside it: ``docker compose up`` in that directory
    runs the two merged, which this reader does not do, so the file alone is not what runs."""
    for name in _OVERRIDES.get(file.name, ()):
        if lexists(file.parent / name, "a Compose override"):
            raise InputError(
                where,
                f"{file.parent / name} is beside it: `docker compose up` there merges it over this file, "
                "which spark-validate does not; give the resolved file (`docker compose config > "
                "resolved.yaml`, then --compose resolved.yaml)",
            )


def load_compose(path: Path | str, service: str | None, host_env: Mapping[str, str]) -> ContainerSpec:
    """The named service (or the one that runs SGLang) of a Compose file, as a ``ContainerSpec``."""
    import yaml

    from validator.yaml_safe import safe_load

    file = Path(path).absolute()
    where = str(file)
    text = read_text_bounded(file, COMPOSE_CAP, "Compose file", names=True)
    try:
        doc = safe_load(text)
    except RecursionError:
        raise InputError(where, "nested too deeply: not a Compose file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}", line) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict) or not doc["services"]:
        raise InputError(where, "no services: not a Compose file")
    base = file.parent
    _no_override(file, where)
    env = dict(host_env)
    for k, v in _project_dotenv(base / ".env").items():
        env.setdefault(k, v)  # the shell's environment wins over .env, as in Compose
    services: dict[str, Any] = doc["services"]
    if service is not None:
        if service not in services:
            raise UsageError(f"{where}: no service {service!r} (services: {', '.join(services)})")
        name = service
    else:
        runs = [
            n
            for n, s in services.items()
            if isinstance(s, dict)
            and is_server_command(
                [
                    *_words(s.get("entrypoint"), "entrypoint", where),
                    *_words(s.get("command"), "command", where),
                ]
            )
        ]
        if len(runs) != 1:
            found = (
                ", ".join(runs)
                if runs
                else "none runs sglang.launch_server, sglang serve or spark-validate launch"
            )
            raise UsageError(f"{where}: name the server's service with --service ({found})")
        name = runs[0]
    raw = services[name]
    if not isinstance(raw, dict):
        raise InputError(where, f"service {name!r} is not a map")
    for key in ("extends", "include"):
        if key in raw or key in doc:
            raise InputError(
                where,
                f"'{key}' is not read by spark-validate: give the resolved file "
                "(`docker compose config > resolved.yaml`, then --compose resolved.yaml)",
            )
    svc: dict[str, Any] = interpolate(raw, env, f"{where}#{name}")
    at = f"compose:{where}#{name}"
    entrypoint = _words(svc.get("entrypoint"), "entrypoint", at) if "entrypoint" in svc else None
    command = _words(svc.get("command"), "command", at)
    service_env, origin = _environment(svc, base, env, at)
    image = svc.get("image")
    return ContainerSpec(
        where=at,
        image=str(image) if image is not None else None,
        argv=[*(entrypoint or []), *command],
        entrypoint_overridden=entrypoint is not None,
        env=service_env,
        env_origin=origin,
        mounts=_mounts(svc, base, env, at),
        workdir=svc.get("working_dir"),
        built_locally="build" in svc,
    )
