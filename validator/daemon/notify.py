"""systemd's notify protocol over ``$NOTIFY_SOCKET``, with a plain datagram socket (no libsystemd).

``Type=notify`` units learn that the sidecar is serving (``READY=1``), what it currently thinks
(``STATUS=``), that its loop is alive (``WATCHDOG=1`` at half of ``WATCHDOG_USEC``) and that it is going
away (``STOPPING=1``). Outside systemd every call is a cheap no-op. A send that fails is ignored: telling
systemd is best effort and must never take the daemon down.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        if raw.startswith("@"):
            self.address = "\0" + raw[1:]  # abstract namespace
        elif raw.startswith("/"):
            self.address = raw
        # systemd's advice: ping at half the timeout
        self.watchdog_interval_s: float | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if usec.isascii() and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval_s = int(usec) / 1e6 / 2
        self._sock: socket.socket | None = None
        self.sent: int = 0

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        if self.address is None:
            return False
        msg = "\n".join(f.replace("\n", " ") for f in fields).encode("utf-8", "replace")
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(msg, self.address)
        except OSError:
            return False
        self.sent += 1
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def stopping(self, status: str = "stopping") -> bool:
        return self.send("STOPPING=1", f"STATUS={status}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
