"""``npd``'s memory between runs: the previous ``/metrics`` reading of each server it judged, so two short
runs tell a stall (``server.progress``) as the sidecar's two readings do, without a request of ours.

``progress.json`` under ``--state-dir`` (``$STATE_DIRECTORY``, ``/var/lib/spark-validate/npd`` as root, else
the XDG state home), written 0600 with ``write_private`` and read with ``read_guarded`` within
:data:`MAX_BYTES`: whoever could write it could make a stalled server read as advancing. A refused or
foreign file is not used (said on stderr). Keyed by PID and start time; times are monotonic, per ``boot_id``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from validator.sources.server.metrics_reading import MetricsWatch
from validator.trusted_files import UnsafeLocation, chain_problems, read_guarded, write_private

FILE = "progress.json"
MAX_BYTES = 256 * 1024
MAX_SERVERS = 64
VERSION = 1


def default_dir() -> Path | None:
    """The state directory when ``--state-dir`` is not given (module docstring); None: nowhere known."""
    env = os.environ
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0]) / "npd"
    if os.geteuid() == 0:
        return Path("/var/lib/spark-validate/npd")
    base = env.get("XDG_STATE_HOME") or (
        str(Path(env["HOME"]) / ".local" / "state") if env.get("HOME") else ""
    )
    return Path(base) / "spark-validate" / "npd" if os.path.isabs(base) else None


def boot_id() -> str | None:
    """This boot's id (``/proc/sys/kernel/random/boot_id``): monotonic times compare only within it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            text = f.read(64).strip()
    except OSError:
        return None
    return text or None


class ProgressStore:
    """The servers' previous readings: loaded before a run, handed out as each server's ``MetricsWatch``,
    saved after it (only the servers this run saw: a server gone is forgotten)."""

    def __init__(self, directory: Path, stall_after_s: float) -> None:
        self.path = directory / FILE
        self.stall_after_s = stall_after_s
        self._loaded: dict[str, object] = {}
        self.watches: dict[str, MetricsWatch] = {}
        self._boot = boot_id()

    def load(self) -> str | None:
        """Read the file; why it is not used (None: used, or not there yet)."""
        try:
            data, facts = read_guarded(
                self.path, MAX_BYTES, what="npd state file", follow_last=False, private=True
            )
        except FileNotFoundError:
            return None
        except UnsafeLocation as exc:
            return f"{exc}; not used"
        problems = chain_problems(facts, {os.geteuid()})
        if problems:
            return f"{self.path}: another user could have written it ({problems[-1]}); not used"
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return f"{self.path}: not JSON; not used"
        servers = doc.get("servers") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(servers, dict):
            return f"{self.path}: not a state file of this version; not used"
        if self._boot is None or doc.get("boot_id") != self._boot:
            return None  # an earlier boot's readings: their clock is not this one's
        self._loaded = dict(list(servers.items())[:MAX_SERVERS])
        return None

    def watch_for(self, pid: int, start_time: float | None) -> MetricsWatch:
        """The server's watch, going on from its previous reading when this same process had one."""
        key = f"{pid}:{start_time!r}"
        watch = self.watches.get(key)
        if watch is None:
            watch = MetricsWatch(self.stall_after_s)
            if key in self._loaded:
                watch.restore(self._loaded[key])
            self.watches[key] = watch
        return watch

    def save(self) -> str | None:
        """Write this run's readings; why not (None: written)."""
        servers = {k: s for k, w in list(self.watches.items())[:MAX_SERVERS] if (s := w.export()) is not None}
        doc = {"version": VERSION, "boot_id": self._boot, "servers": servers}
        try:
            write_private(self.path, json.dumps(doc).encode(), mode=0o600, what="npd state file")
        except OSError as exc:  # UnsafeLocation included
            return f"{self.path}: not written: {exc}"
        return None
