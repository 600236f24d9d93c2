"""Every evidence source, declared once: its name (the key of ``Facts.errors`` and of a result's
``sources``), the input that would let an unproven check run, what it needs first, when it applies and
its reader.

``preflight.gather`` loops over ``PREFLIGHT`` and ``live.gather_live`` over ``LIVE``, in order: a source
needs only sources above it (``tests/test_source_table.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from validator import facts as f

if TYPE_CHECKING:
    from validator.sources.gathering import Gathering
    from validator.sources.live_gathering import LiveGathering

G = TypeVar("G")  # what the reader is given: ``Gathering`` (preflight) or ``LiveGathering`` (live)


@dataclass(frozen=True)
class Source(Generic[G]):
    name: str  # the facts key: ``facts.errors[name]``, a check result's ``sources``
    proven_by: str | None  # the input that would let an unproven check run (None: no check names it)
    reader: str | None = None  # the module whose ``gather(g)`` reads it (``module:function``: another)
    needs: tuple[str, ...] = ()  # sources that must have been read before it (their records are set)
    applies: Callable[[G], bool] | None = None  # None: whenever its needs are read


def _installed(g: Gathering) -> bool:
    """The server's own SGLang was read (its site directories are the server's)."""
    return g.sglang.root is not None


def _dspark(g: Gathering) -> bool:
    return str(g.launch.args.get("speculative_algorithm") or "").upper() == "DSPARK"


def _flashinfer_path(g: Gathering) -> bool:
    """FlashInfer's MoE kernels matter only on the flashinfer_mxfp4 path ('auto' resolves to it here)."""
    return _installed(g) and g.launch.args.get("moe_runner_backend") in ("flashinfer_mxfp4", "auto")


def _supervised(g: Gathering) -> bool:
    return g.inputs.kube_manifest is not None or g.inputs.unit is not None


_WHERE_IT_RUNS = "run preflight where the server runs"

PREFLIGHT: tuple[Source[Gathering], ...] = (
    Source(
        f.LAUNCH,
        "the full launch command (--launch-cmd, --unit, --script, or `launch -- CMD`)",
        "validator.sources.launch.source",
    ),
    Source(
        "plugin", None, "validator.sources.sglang.plugin_env", needs=(f.LAUNCH,), applies=_installed
    ),  # its checks cite the launch and the install
    Source(
        f.HUMMING,
        f"{_WHERE_IT_RUNS}, as or with --service-user for the server's account",
        "validator.sources.host.humming",
        needs=(f.LAUNCH,),
    ),
    Source(f.HOST, "run preflight on the server's host", "validator.sources.host.platform"),
    Source(
        f.DSPARK_DRAFT,
        "a local --speculative-draft-model-path",
        "validator.sources.host.dspark_draft",
        needs=(f.LAUNCH,),
        applies=_dspark,
    ),
    Source(
        f.FLASHINFER,
        _WHERE_IT_RUNS,
        "validator.sources.host.flashinfer",
        needs=(f.LAUNCH, f.HOST),
        applies=_flashinfer_path,
    ),
    Source(
        "start_budget", None, "validator.sources.launch.start_budget", needs=(f.LAUNCH,), applies=_supervised
    ),  # host.start_budget cites the launch
    Source(
        f.CHECKPOINT,
        "--model-dir (or a local --model-path)",
        "validator.sources.host.checkpoint",
        needs=(f.LAUNCH, f.HOST),
    ),
)


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
LIVE: tuple[Source[LiveGathering], ...] = (
    Source(
        f.SERVER,
        "a reachable, ready server (--url, --wait, --api-key-file)",
        "validator.sources.server.readiness",
    ),
    Source(
        f.ATTESTATION,
        "--attestation (the spark-validate plugin's file, written by the running server)",
        "validator.sources.server.attestation",
        applies=_attestation,
    ),
    Source(
        f.LOG,
        "--log (the file the running server writes) or --log journal:UNIT",
        "validator.sources.server.live_log",
        applies=_log,
    ),
    Source("metrics", None, "validator.sources.server.metrics", needs=(f.SERVER,)),  # cited as the server
    Source("listener", None, "validator.sources.server.identity", needs=(f.SERVER,)),  # the identity's
    Source(
        f.PROGRESS,
        "a ready server with --enable-metrics and traffic, its --log, or a full check (one bounded request)",
        "validator.sources.server.progress",
        needs=(f.SERVER,),
    ),
    Source(
        f.WEIGHTS,
        "--weights-checker on a server that serves /weights_checker",
        "validator.sources.server.weights_checker",
        needs=(f.SERVER,),
        applies=_weights,
    ),
    Source(
        f.PROBE,
        "a ready server with speculative decoding on (the acceptance probe)",
        "validator.probe",
        needs=(f.SERVER,),
        applies=_probed,
    ),
    Source(
        "log_after_probe",
        None,
        "validator.sources.server.live_log:gather_after_probe",
        needs=(f.SERVER, f.LOG),
        applies=_probed,  # asked for, whatever the probe found
    ),
)

# Read with the launch (``facts.sglang``) and by the running-process job.
_OTHERS: tuple[Source[Gathering], ...] = (
    Source(f.SGLANG, f"{_WHERE_IT_RUNS} (its interpreter must import sglang), or --sglang-root"),
)

SOURCES: tuple[Source[Gathering] | Source[LiveGathering], ...] = (*PREFLIGHT, *LIVE, *_OTHERS)
