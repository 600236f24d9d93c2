"""A node in a PID namespace of its own: a real server, decoys, then the CLI commands to judge them.

Run as ``unshare --pid --fork --mount-proc python -m tests.support.node_scenario SPEC`` (root in CI), so
that the commands see only the processes started here, never another test's or another checkout's
simulators on the same host. ``SPEC`` is JSON::

    {"scenario": "backend-auto",  # the simulator's scenario for the real server (null: no server)
     "decoys": 10, "decoy_user": "second",  # "same" (this user) or "second" (tests/support/second_user)
     "listen": true,  # decoys listen on their --port and never answer (false: they hold no socket)
     "commands": [["npd", "--timeout", "20"], ...]}  # spark-validate arguments, run one after another

It prints one JSON object: the server's and the decoys' PIDs and, per command, its exit status, output
and wall time. Everything it started ends with it (the namespace's init takes its processes along).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.support.decoys import FP8, remove, start_decoy, stub_dir
from tests.support.loopback import free_port, stop, wait_listening
from tests.support.second_user import ensure_user
from tests.support.sim_process import REPO


def main(spec: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {"decoys": [], "results": []}
    procs: list[subprocess.Popen[bytes]] = []
    top = stub_dir(listen=bool(spec.get("listen", True)))
    try:
        user = ensure_user() if spec.get("decoy_user") == "second" else None
        decoys = []
        for _ in range(int(spec.get("decoys", 0))):  # type: ignore[call-overload]
            port = free_port()
            decoy = start_decoy(top, port, user=user)
            procs.append(decoy)
            if spec.get("listen", True):
                wait_listening(port, decoy, what="decoy", timeout=30)
            decoys.append(decoy.pid)
        out["decoys"] = decoys
        env = {**os.environ, "PYTHONPATH": str(REPO), **FP8}
        if spec.get("scenario"):
            port = free_port()
            cmd = [sys.executable, "-m", "validator", "sim", "--port", str(port), "--speed", "1000"]
            cmd += ["--startup-seconds", "0.1", "--scenario", str(spec["scenario"])]
            server = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            procs.append(server)
            wait_listening(port, server, what="simulator", timeout=30)
            out["server"] = server.pid
        results = []
        for args in spec.get("commands", []):  # type: ignore[attr-defined]
            t0 = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "validator", *args],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            results.append(
                {
                    "rc": done.returncode,
                    "stdout": done.stdout,
                    "stderr": done.stderr[-3000:],
                    "seconds": round(time.monotonic() - t0, 2),
                }
            )
        out["results"] = results
    finally:
        for proc in procs:
            stop(proc, kill=True)
        remove(top)
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
