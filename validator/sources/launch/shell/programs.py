"""What the reader knows of the programs a script runs that are not the shell's: which words start the
SGLang server, which programs only read the disk (so a later file test still holds) or make exactly the
files they name, and the file ``PATH`` finds for a name.

Apart from the evaluator's state because it is knowledge of the world outside bash, shared with the
sources that read a container's or a manifest's command (``compose``, ``kube_manifest``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from validator.sources.launch.docker_run import is_container_run, runs_inline_code
from validator.sources.launch.shell.values import Unknown, Value, process_file
from validator.trusted_files import UnsafeLocation, look_unplanted

# programs whose only effect on the disk is through their redirections (so a later file test still holds)
READ_ONLY = {
    "echo", "printf", "true", "false", "sleep", "test", "[", "which", "grep", "egrep", "head", "tail",
    "cat", "ls", "date", "uname", "id", "whoami", "hostname", "free", "df", "nproc", "ps", "pgrep",
    "dirname", "basename", "realpath", "readlink", "printenv", "wc", "cut", "tr", "seq", "stat", "du",
    "lscpu", "pwd",
}  # fmt: skip


# programs that run the command after their options, and the shells that run a script given by name
_WRAPPERS = {
    "env",
    "nohup",
    "setsid",
    "timeout",
    "nice",
    "stdbuf",
    "sudo",
    "exec",
    "time",
    "ionice",
    "taskset",
}
_SHELLS = {"bash", "sh", "dash"}


def script_run(words: list[Value]) -> str | None:
    """The other script a command runs, when it is one by its name (``./start.sh``, ``setsid nohup
    ./start.sh``, ``bash tune.sh``): for the message of a reading that starts no server (it does not follow
    that script). None otherwise."""
    k = 0
    while k < len(words):
        w = words[k]
        if isinstance(w, Unknown):
            return None
        name = os.path.basename(w)
        if name in _WRAPPERS:
            k += 1
            while k < len(words) and isinstance(words[k], str) and str(words[k]).startswith(("-", "+")):
                k += 1  # the wrapper's options (a value of one is not skipped: then no script is named)
            while k < len(words) and isinstance(words[k], str) and "=" in str(words[k]):
                k += 1  # env's assignments
            continue
        if name in _SHELLS:
            if "-c" in words[k + 1 :]:
                return None  # a command string, not a script
            rest = [x for x in words[k + 1 :] if not (isinstance(x, str) and x.startswith("-"))]
            return rest[0] if rest and isinstance(rest[0], str) else None
        return w if w.endswith(".sh") else None
    return None


def reads_only(name: str, args: list[Value]) -> bool:
    """The program changes nothing on the disk (beyond its redirections): one of READ_ONLY, ``awk`` whose
    program has no output redirection, pipe or ``system()``, ``nvidia-smi`` without ``-f``, ``sort``
    without ``-o``, ``uniq`` with one file at most. Anything else (python3, pip, a download) may write
    anything, so what the script reads from the disk afterwards is unknown."""
    if name in READ_ONLY:
        return True
    if any(isinstance(a, Unknown) for a in args):
        return False
    words = [str(a) for a in args]
    if name in ("awk", "gawk", "mawk"):
        program = next((w for w in words if not w.startswith("-")), "")
        return not any(c in program for c in (">", "|", "system", "fflush")) and "-f" not in words
    if name in ("docker", "podman"):  # the client's own state only; `run` mounts host directories
        return bool(words) and words[0] in _CLIENT_ONLY
    if name == "nvidia-smi":
        return not any(w.startswith(("-f", "--filename")) for w in words)
    if name == "sort":
        return not any(w.startswith(("-o", "--output")) for w in words)
    if name == "uniq":
        return len([w for w in words if not w.startswith("-")]) <= 1
    return False


# docker (and podman) subcommands that change no file on the host outside the runtime's own storage
_CLIENT_ONLY = {"ps", "pull", "rm", "inspect", "images", "info", "logs", "version", "stop", "kill", "wait"}

# programs that make exactly the directories or files named in their arguments
MAKERS = {"mkdir", "touch", "rm", "rmdir", "ln", "cp", "mv", "install", "chmod", "chown", "tee"}


def is_server_command(words: list[Value]) -> bool:
    """The words start the server: SGLang's entry points, spark-validate launch, or a container run."""
    known = [w for w in words if isinstance(w, str)]
    if is_container_run(known):
        return len(known) < len(words) or not runs_inline_code(known)
    for i, w in enumerate(known):
        name = Path(w).name
        if w in ("sglang.launch_server", "-msglang.launch_server"):
            return True
        if name == "sglang" and i + 1 < len(known) and known[i + 1] == "serve":
            return True
        if name == "spark-validate" and i + 1 < len(known) and known[i + 1] == "launch":
            return True
    return False


# Linux's bound on one argument or environment string (MAX_ARG_STRLEN: 32 pages), "PATH=" included
MAX_ARG_STRLEN = 131_072


def which(program: str, path: Value, cwd: Value) -> Value:
    """The file bash (or ``env``) runs for ``program`` with this ``PATH``: the first executable regular
    file; a name with a slash is itself."""
    if "/" in program:
        if program.startswith("/"):
            return program
        if isinstance(cwd, Unknown):
            return cwd
        return os.path.normpath(os.path.join(cwd, program))
    if isinstance(path, Unknown):
        return path
    if len(path) >= MAX_ARG_STRLEN:  # execve refuses such an environment string (E2BIG): nothing runs
        return Unknown(f"{program}: a PATH of {len(path)} bytes, which execve refuses")
    seen: set[str] = set()
    for d in path.split(":"):
        if not d.startswith("/"):
            if isinstance(cwd, Unknown):
                return cwd
            d = os.path.join(cwd, d or ".")
        if d in seen:  # the same directory again answers the same (a PATH of 100,000 ':' took minutes)
            continue
        seen.add(d)
        cand = os.path.join(d, program)
        if process_file(cand):
            return Unknown(f"{program}: {d} on PATH is a process's files, known only at run time")
        try:  # walked, never looked at by name: whether it is there may be the script owner's to know
            found = look_unplanted(cand, os.X_OK)
        except UnsafeLocation:
            return Unknown(f"{program}: {d} on PATH is not a place the script's owner could look")
        except OSError:
            continue
        if found is not None and stat.S_ISREG(found.st_mode):
            return cand
    return Unknown(f"{program} is not on PATH here")
