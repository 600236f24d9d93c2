"""Every live source, declared once, in the order a live check reads them (``live.gather_live`` loops over
``LIVE``): a ``Source`` of ``validator.source_table`` whose reader is a coroutine given a ``LiveGathering``.
Apart from the preflight table so that preflight imports no live reader (httpx, the probe)."""

from __future__ import annotations

from collections.abc import Awaitable

from validator import facts as f
from validator import probe
from validator.source_table import Source
from validator.sources.live_gathering import LiveGathering
from validator.sources.server import (
    attestation,
    identity,
    live_log,
    metrics,
    progress,
    readiness,
    weights_checker,
)

LiveSource = Source[LiveGathering, Awaitable[None]]


def _attestation(g: LiveGathering) -> bool:
    return g.inputs.attestation is not None


def _log(g: LiveGathering) -> bool:
    return g.log_reader is not None


def _weights(g: LiveGathering) -> bool:
    return g.inputs.weights_checker


def _probed(g: LiveGathering) -> bool:
    """The probe was asked for and the server decodes speculatively (on a plain server ``spec.accept_length``
    reports it: a probe would only measure plain decoding), and is not stalled (its requests would only
    wait out the probe's time cap)."""
    stalled = g.facts.progress is not None and g.facts.progress.state is f.Progress.STALLED
    return g.run_probe and bool(g.server.server_info.get("speculative_algorithm")) and not stalled


# In this order: the files and the log are read whether or not the server answered (a server that never
# became ready is explained by them); /metrics before the probe, so that the probe's own tokens never count
# as the server's traffic; the log again after it, to see a server that died while it was probed.
LIVE: tuple[LiveSource, ...] = (
    Source(f.SERVER, readiness.gather),
    Source(f.ATTESTATION, attestation.gather, applies=_attestation),
    Source(f.LOG, live_log.gather, applies=_log),
    Source("metrics", metrics.gather, needs=(f.SERVER,)),  # cited as the server
    Source("listener", identity.gather, needs=(f.SERVER,)),  # the identity's
    Source(f.PROGRESS, progress.gather, needs=(f.SERVER,)),
    Source(f.WEIGHTS, weights_checker.gather, needs=(f.SERVER,), applies=_weights),
    Source(f.PROBE, probe.gather, needs=(f.SERVER,), applies=_probed),
    Source(
        "log_after_probe",
        live_log.gather_after_probe,
        needs=(f.SERVER, f.LOG),
        applies=_probed,  # asked for, whatever the probe found
    ),
)
