"""``--docker-cmd STRING``: a ``docker run`` (or ``podman run``) command line -> the container's launch.

The command line shows the server's argv after the image (or ``--entrypoint``), its environment (``-e``,
``--env-file``) and the mounts mapping the model path to the host. What is inside the image (SGLang,
humming-kernels, ``ENV``, ``ENTRYPOINT``) is not: reported unproven (``error``), never read from the host's
Python. A ``docker exec CONTAINER CMD`` runs CMD in a container started earlier, whose image, mounts and
environment are none of them visible here: CMD is judged, with only its own ``-e`` known. Mount options
and the ``--env-file`` format are shared with ``compose``; the container both describe is
``validator.sources.container.ContainerSpec``.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

from validator.bounded_files import TEXT_CAP, read_trusted_bounded
from validator.errors import InputError, UnresolvedLaunch
from validator.facts import ENVIRONMENT_UNKNOWN
from validator.sources.container import ContainerSpec, Mount
from validator.sources.launch.command import Launcher, launch_from_argv
from validator.sources.launch.shell.command_line import split_command_line

# docker run / podman run options that take no value (docker 28's `docker run --help`, podman 4's extras).
_BOOLEAN = {
    "-d", "--detach", "--disable-content-trust", "--help", "--init", "-i", "--interactive",
    "--no-healthcheck", "--oom-kill-disable", "--privileged", "-P", "--publish-all", "-q", "--quiet",
    "--read-only", "--rm", "--sig-proxy", "-t", "--tty", "--use-api-socket",
    "--replace", "--rmi", "--env-host", "--http-proxy", "--read-only-tmpfs", "--tls-verify",
}  # fmt: skip
_SHORT_WITH_VALUE = set("acehlmpuvw")
# Options that take a value (the same `docker run --help`, and podman's own).
_WITH_VALUE = {
    "--add-host", "--annotation", "--attach", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-count", "--cpu-percent",
    "--cpu-period", "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime", "--cpu-shares", "--cpus",
    "--cpuset-cpus", "--cpuset-mems", "--detach-keys", "--device", "--device-cgroup-rule",
    "--device-read-bps", "--device-read-iops", "--device-write-bps", "--device-write-iops", "--dns",
    "--dns-option", "--dns-search", "--domainname", "--entrypoint", "--env", "--env-file", "--expose",
    "--gpus", "--group-add", "--health-cmd", "--health-interval", "--health-retries",
    "--health-start-interval", "--health-start-period", "--health-timeout", "--hostname",
    "--io-maxbandwidth", "--io-maxiops", "--ip", "--ip6", "--ipc", "--isolation", "--kernel-memory",
    "--label", "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt", "--mac-address",
    "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount", "--name",
    "--network", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform", "--publish",
    "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal", "--stop-timeout",
    "--storage-opt", "--sysctl", "--tmpfs", "--ulimit", "--user", "--userns", "--uts", "--volume",
    "--volume-driver", "--volumes-from", "--workdir", "--net", "--pod", "--secret", "--systemd", "--tz",
    "--umask", "--uidmap", "--gidmap", "--hooks-dir", "--cgroups", "--arch", "--os", "--variant",
    "--sdnotify", "--timeout", "--requires", "--seccomp-policy", "--passwd-entry", "--init-path",
    "--image-volume", "--log-level", "--cgroup-conf", "--decryption-key", "--chrootdirs", "--preserve-fds",
    "--personality", "--rdt-class", "--conmon-pidfile",
}  # fmt: skip
_RUNTIMES = {"docker", "podman", "nvidia-docker"}
# docker exec's options (the Docker CLI reference, `docker container exec`)
_EXEC_BOOLEAN = {"-d", "--detach", "-i", "--interactive", "-t", "--tty", "--privileged"}
_EXEC_WITH_VALUE = {"--detach-keys", "--env", "--env-file", "--user", "--workdir"}
_EXEC_SHORT_WITH_VALUE = set("euw")


def env_file_lines(path: Path | str) -> Iterator[tuple[int, str]]:
    """The numbered lines of a container env file (``--env-file``, Compose's ``env_file`` and ``.env``)
    that are neither blank nor ``#`` comments, leading white space removed; the file read within
    ``TEXT_CAP`` like every input, and only when nobody but root and the reading user could have written it
    or a directory above it. Trailing white space is kept: ``docker run`` keeps it in a value."""
    data = read_trusted_bounded(path, TEXT_CAP, "env file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = data.count(b"\n", 0, exc.start) + 1
        raise InputError(str(path), f"env file is not valid UTF-8 (byte {exc.start})", at) from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if line and not line.startswith("#"):
            yield number, line


def read_docker_env_file(path: Path | str, host_env: Mapping[str, str]) -> dict[str, str]:
    """``docker run --env-file``: ``KEY=value`` lines taken literally (no quotes, no expansion), ``#``
    comment lines, a bare ``KEY`` copies the host's value (and is dropped when the host has none)."""
    where = str(path)
    out: dict[str, str] = {}
    for number, line in env_file_lines(path):
        key, eq, value = line.partition("=")
        if not key or any(c.isspace() for c in key):
            # a line without '=' is never quoted: it may be a pasted token (SECURITY.md, Secrets)
            shown = (
                f"variable {key[:60]!r} contains whitespaces" if eq else "a line without '=' has white space"
            )
            raise InputError(where, shown, number)
        if eq:
            out[key] = value
        elif key in host_env:
            out[key] = host_env[key]
    return out


# /proc/self, /dev/fd/N, /dev/stdin...: the files of whichever process opens the name (docker's, the
# daemon's, at run time), never those of this one (its working directory, its environment)
_OWN_PROCESS = re.compile(r"/(?:proc/(?:self|thread-self)|dev/(?:fd|stdin|stdout|stderr))(?:/|$)")


def _of_the_reader(path: str) -> bool:
    return _OWN_PROCESS.match(posixpath.normpath(path)) is not None


def parse_volume(spec: str, where: str, base: str | None) -> Mount:
    """``-v SRC:DST[:OPTS]`` / compose's short syntax. A SRC that is a path is a bind mount (relative to
    ``base`` for compose); a bare name is a named volume; a lone DST is an anonymous volume."""
    parts = spec.split(":")
    if len(parts) == 1:
        return Mount(None, parts[0])
    if len(parts) > 3:
        raise InputError(where, f"invalid volume specification {spec!r}")
    source, target = parts[0], parts[1]
    opts = parts[2].split(",") if len(parts) == 3 else []
    read_only = "ro" in opts or "readonly" in opts
    if not target.startswith("/"):
        raise InputError(where, f"volume target {target!r} is not an absolute path (in {spec!r})")
    if source.startswith(("/", ".", "~")):
        if source.startswith(".") and base is not None:
            source = os.path.normpath(os.path.join(base, source))
        return Mount(source, target, read_only=read_only)
    return Mount(None, target, volume=source, read_only=read_only)


def parse_mount(spec: str, where: str) -> Mount:
    """``--mount type=bind,source=/x,target=/y,readonly``."""
    fields: dict[str, str] = {}
    for item in spec.split(","):
        key, eq, value = item.partition("=")
        fields[key.strip()] = value if eq else "true"
    target = fields.get("target") or fields.get("destination") or fields.get("dst")
    if not target:
        raise InputError(where, f"--mount {spec!r} names no target")
    source = fields.get("source") or fields.get("src")
    read_only = fields.get("readonly", fields.get("ro", "false")).lower() in ("true", "1")
    kind = fields.get("type", "volume")
    if kind == "bind":
        return Mount(source, target, read_only=read_only)
    return Mount(None, target, volume=source if kind == "volume" else None, read_only=read_only)


def parse_docker_cmd(text: str, host_env: Mapping[str, str]) -> ContainerSpec:
    """``docker run [OPTIONS] IMAGE [COMMAND] [ARG...]`` as the operator's shell would split it."""

    return parse_docker_words(split_command_line(text, "--docker-cmd", host_env), host_env, "--docker-cmd")


def is_container_run(words: list[str], sub: str = "run") -> bool:
    """``[sudo] docker|podman [container] run ...`` (``sub``: ``exec``, the same for ``docker exec``)."""
    while words and words[0] in ("sudo", "exec"):
        words = words[1:]
    if not words or Path(words[0]).name not in _RUNTIMES:
        return False
    rest = words[1:3]
    return rest[:1] == [sub] or rest == ["container", sub]


def _run_options(
    words: list[str], where: str, take: Callable[[str, str], None], sub: str = "run"
) -> list[str]:
    """Read ``[sudo] docker|podman [container] run [OPTIONS] IMAGE ...`` (``sub``: ``exec``, ``... exec
    [OPTIONS] CONTAINER ...``) as docker does: ``take`` is told each option that has a value, in order;
    returns IMAGE (CONTAINER) and what follows it. Raises InputError for what is not a container run (or
    exec), an option not understood, or one missing its value."""
    while words and words[0] in ("sudo", "exec"):
        words = words[1:]
    if not words or Path(words[0]).name not in _RUNTIMES:
        raise InputError(where, "expected 'docker run ...', 'podman run ...' or 'docker exec ...'")
    i = 1
    if i < len(words) and words[i] == "container":
        i += 1
    if i >= len(words) or words[i] != sub:
        raise InputError(
            where, f"'{Path(words[0]).name} {' '.join(words[1 : i + 1])}' does not run a container"
        )
    boolean, with_value, short_with_value = (
        (_BOOLEAN, _WITH_VALUE, _SHORT_WITH_VALUE)
        if sub == "run"
        else (_EXEC_BOOLEAN, _EXEC_WITH_VALUE, _EXEC_SHORT_WITH_VALUE)
    )
    i += 1
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        i += 1
        if word.startswith("--"):
            name, eq, inline = word.partition("=")
            value, known, shown = (inline if eq else None), name in with_value, name
        else:  # -it, -dit, -e X=1, -eX=1, -v/a:/b
            name, rest = word[:2], word[2:]
            while name in boolean and rest:
                name, rest = "-" + rest[0], rest[1:]
            value = rest.removeprefix("=") if rest else None
            known, shown = name[1:] in short_with_value, word
        if name in boolean:
            continue
        if not known:
            raise InputError(where, f"docker {sub} option {shown!r} is not understood by spark-validate")
        if value is None:
            if i >= len(words):
                raise InputError(where, f"option {name} needs a value")
            value, i = words[i], i + 1
        take(name, value)
    return words[i:]


# the options whose values ``parse_docker_words`` reads; the others' values do not reach a check
_READ = {"-e", "--env", "--env-file", "-v", "--volume", "--mount", "--entrypoint", "-w", "--workdir"}


# the value docker run gives a container's variable where the launcher computes it at run time (``-e
# "NAME=$(cmd)"``): the prefix, then why; a NUL, which no argv word can hold, marks it as no real value
RUNTIME_VALUE = "\0known only at run time: "


def _env_assignment(lead: str, attached: bool) -> str | None:
    """The text up to and including ``NAME=`` of a ``-e``/``--env`` value whose NAME is known (``lead``:
    the word's known text before its first unknown part; ``attached``: the option is in the word,
    ``--env=NAME=...``, ``-eNAME=...``), else None."""
    option = ""
    if attached:
        if lead.startswith("--env="):
            option = "--env="
        elif lead.startswith("-e") and len(lead) > 2:
            option = "-e"
        else:
            return None
    key, eq, _ = lead[len(option) :].partition("=")
    if not eq or not key or any(c.isspace() for c in key):
        return None
    return f"{option}{key}="


def runtime_env_values(words: list[str | None], leads: list[str]) -> dict[int, str]:
    """The positions, in a container run whose unknown words are None (``leads``: each word's known text
    before its first unknown part), of the ``-e``/``--env`` values that set one known variable to a value
    known only at run time (``-e "NAME=$(cmd)"``, ``--env=NAME=$x``) -> the word's text up to ``NAME=``:
    docker sets NAME in the container (the Docker CLI reference, ``--env``), and nothing else. Empty when
    the words are not a container run."""
    known = [w if w is not None else "" for w in words]
    if not is_container_run(known):
        return {}
    i = known.index("run") + 1
    out: dict[int, str] = {}
    while i < len(words):
        word = words[i]
        if word is None:
            assignment = _env_assignment(leads[i], attached=True)
            if assignment is None:
                break
            out[i], i = assignment, i + 1
            continue
        if word == "--" or not word.startswith("-") or word == "-":
            break
        i += 1
        name = word.partition("=")[0] if word.startswith("--") else word[:2]
        if name in _BOOLEAN or "=" in word or (not word.startswith("--") and len(word) > 2):
            continue
        if name in _WITH_VALUE or name[1:] in _SHORT_WITH_VALUE:
            if name in ("-e", "--env") and i < len(words) and words[i] is None:
                assignment = _env_assignment(leads[i], attached=False)
                if assignment is not None:
                    out[i] = assignment
            i += 1
        else:
            break
    return out


def unread_values(words: list[str | None], known_names: Collection[int] = ()) -> set[int]:
    """The positions, in a container run whose unknown words are None, of the values of options before the
    image that nothing here reads (``--group-add "$gid"``, ``--name``): such a word can be known only at run
    time without hiding anything the launch is judged by. Empty when the words are not a container run.
    ``known_names``: unknown words that are options all the same (``runtime_env_values``)."""
    known = [w if w is not None else "" for w in words]
    if not is_container_run(known):
        return set()
    i = known.index("run") + 1
    out: set[int] = set()
    while i < len(words):
        word = words[i]
        if word is None and i in known_names:
            i += 1
            continue
        if word is None or word == "--" or not word.startswith("-") or word == "-":
            break
        i += 1
        name = word.partition("=")[0] if word.startswith("--") else word[:2]
        if name in _BOOLEAN or "=" in word or (not word.startswith("--") and len(word) > 2):
            continue  # no value, or its value in the same word
        if name in _WITH_VALUE or name[1:] in _SHORT_WITH_VALUE:
            if name not in _READ and i < len(words):
                out.add(i)
            i += 1
        else:
            break
    return out


def runs_inline_code(words: list[str]) -> bool:
    """The container runs inline code (``--entrypoint python3 IMAGE -c CODE``, ``IMAGE python3 -c CODE``):
    a one-off job such as a download, not the server, as ``python3 -c`` on the host is not (the server is
    started by its entry point). False where the options cannot be read: the container may be the server."""
    entrypoint = ""

    def take(name: str, value: str) -> None:
        nonlocal entrypoint
        if name == "--entrypoint":
            entrypoint = value

    try:
        rest = _run_options(words, "docker run", take)
    except InputError:
        return False
    argv = ([entrypoint] if entrypoint else []) + rest[1:]
    return (
        len(argv) > 1
        and re.fullmatch(r"python[0-9.]*", posixpath.basename(argv[0])) is not None
        and (argv[1] == "-c")
    )


def parse_docker_words(
    words: list[str],
    host_env: Mapping[str, str],
    where: str,
    base: str | None = None,
    base_unknown: str | None = None,
) -> ContainerSpec:
    """A ``docker run`` command as words (``base``: where relative ``--env-file`` and bind sources start,
    the shell's cwd; ``base_unknown``: why a script's shell's cwd is known only at run time, when it is,
    so that no relative name is read from this process's own directory)."""
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    # the variables of the env files, which every -e overrides wherever it stands: docker reads the files
    # first and appends the -e ones "to allow override" (docker/cli opts/parse.go readKVStrings)
    file_env: dict[str, str] = {}
    file_origin: dict[str, str] = {}
    unresolved: dict[str, str] = {}
    mounts: list[Mount] = []
    entrypoint: str | None = None
    workdir: str | None = None

    def take(name: str, value: str) -> None:
        nonlocal entrypoint, workdir
        if name in ("-e", "--env"):
            key, eq, val = value.partition("=")
            if eq:
                env[key], origin[key] = val, f"{where} -e"
            elif key in host_env:
                env[key], origin[key] = host_env[key], f"{where} -e (from the host's environment)"
        elif name == "--env-file":  # relative to the shell's cwd, as docker reads it (a script's: base)
            why = None
            named = os.path.join(base, value) if base and not os.path.isabs(value) else value
            if base_unknown is not None and not os.path.isabs(value):
                why = (
                    f"is relative to the script's working directory, known only at run time ({base_unknown})"
                )
            elif _of_the_reader(named):
                why = (
                    "names the files of the process that reads it (docker's own, at run time), not this one's"
                )
            if why is not None:
                unresolved["*"] = (
                    f"--env-file {value} {why}: which variables it sets, and their values, are unknown"
                )
                return
            for key, val in read_docker_env_file(named, host_env).items():
                file_env[key], file_origin[key] = val, f"--env-file {value}"
        elif name in ("-v", "--volume"):
            if base_unknown is not None and value.startswith(".") and ":" in value:
                mount = parse_volume(value, where, "/")
                mounts.append(Mount(None, mount.target, read_only=mount.read_only, unknown=base_unknown))
                return
            mount = parse_volume(value, where, base or os.getcwd())
            if mount.source is not None and _of_the_reader(mount.source):
                why = f"{mount.source} names the files of the process that reads it, not this one's"
                mount = Mount(None, mount.target, read_only=mount.read_only, unknown=why)
            mounts.append(mount)
        elif name == "--mount":
            mounts.append(parse_mount(value, where))
        elif name == "--entrypoint":
            entrypoint = value
        elif name in ("-w", "--workdir"):
            workdir = value

    sub = "exec" if is_container_run(words, "exec") else "run"
    rest = _run_options(words, where, take, sub)
    env, origin = {**file_env, **env}, {**file_origin, **origin}
    if sub == "exec":
        spec = _exec_spec(rest, env, origin, workdir, where)
        spec.unresolved.update(unresolved)
        return spec
    if not rest:
        raise InputError(where, "no image named")
    image, command = rest[0], rest[1:]
    argv = ([entrypoint] if entrypoint else []) + command
    return ContainerSpec(
        where=where,
        image=image,
        argv=argv,
        entrypoint_overridden=entrypoint is not None,
        env=env,
        env_origin=origin,
        mounts=mounts,
        workdir=workdir,
        unresolved=unresolved,
    )


def _exec_spec(
    rest: list[str], env: dict[str, str], origin: dict[str, str], workdir: str | None, where: str
) -> ContainerSpec:
    """``docker exec [OPTIONS] CONTAINER CMD...``: CMD in a container started earlier. Its process gets
    the container's environment (what it was created with, its image's ``ENV``: not visible here) with
    the ``-e`` given over it, so every other variable is unresolved."""
    if len(rest) < 2:
        raise InputError(where, "docker exec needs a container and the command to run in it")
    name = rest[0]
    return ContainerSpec(
        where=where,
        image=None,
        argv=rest[1:],
        entrypoint_overridden=False,
        env=env,
        env_origin=origin,
        workdir=workdir,
        existing=name,
        unresolved={
            ENVIRONMENT_UNKNOWN: f"docker exec runs it in the container {name}, started earlier: the "
            "environment it was created with (its docker run -e, its image's ENV) is not visible here"
        },
    )


def image_note(spec: ContainerSpec) -> str:
    """Why the install cannot be read from outside the container."""
    if spec.existing is not None:
        return (
            f"the SGLang install is inside the container {spec.existing} (started earlier: its image is "
            "not named here), not visible from outside the container"
        )
    what = "an image built from a Dockerfile" if spec.built_locally else f"the image {spec.image}"
    return f"the SGLang install is inside {what}, not visible from outside the container"


IMAGE_REMEDY = (
    "Run `spark-validate launch -- python3 -m sglang.launch_server ...` as the container's command (as "
    "deploy/compose does: it checks inside the image, then execs), or preflight inside the container "
    "(`docker run --rm IMAGE spark-validate preflight --launch-cmd ...`)."
)


def launch_from_container(spec: ContainerSpec) -> Launcher:
    """The server command a container runs. Its environment is what the command line or service gives the
    container; an image's ``ENV`` and ``ENTRYPOINT`` are not visible from outside (a variable set only
    there reads as unset: set it explicitly, or validate inside with ``launch``)."""

    if not spec.argv:
        raise UnresolvedLaunch(
            f"{spec.where}: no command given, so the image's default command runs ({spec.image}): "
            "not visible from outside; give the server command explicitly"
        )
    launcher = launch_from_argv(
        list(spec.argv),
        origin=spec.where,
        env=spec.env,
        env_origin=spec.env_origin,
        base_dir=Path(spec.workdir) if spec.workdir else None,
    )
    launcher.facts.unresolved.update(spec.unresolved)
    if spec.existing is not None:  # docker exec: what it (and its command's env prefix) sets is known
        launcher.facts.env_set_over = set(launcher.facts.env) - set(launcher.facts.unresolved)
    launcher.facts.warnings.extend(spec.warnings)
    launcher.container = spec
    return launcher
