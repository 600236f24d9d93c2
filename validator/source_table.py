"""Every evidence source, declared once: its name (the key of ``Facts.errors`` and of a check result's
``sources``), the input that lets a check it could not prove run (``validator.coverage`` names it in the
report), and, for a preflight source, what it needs read first, when it applies and where its reader is.

``preflight.gather`` is a loop over ``PREFLIGHT``, in this order: each source needs only sources above it.
A reader is named by its module, not imported here: preflight runs in the server's start-up and imports a
source's module only when it applies (the start budget's reader brings the systemd unit and Kubernetes
readers, a DSPARK launch's draft reader is of no use to a NEXTN one). The live sources are gathered by
``live.gather_live``; they are declared here for their names and inputs.

A new preflight source is its module under ``validator/sources/`` with a ``gather(g: Gathering) -> None``
reader, and its row here. ``tests/test_source_table.py`` fails for a module with a reader that no row
names, and for a row whose reader does not resolve or whose needs come after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from validator import facts as f

if TYPE_CHECKING:
    from validator.sources.gathering import Gathering


@dataclass(frozen=True)
class Source:
    name: str  # the facts key: ``facts.errors[name]``, a check result's ``sources``
    proven_by: str | None  # the input that would let an unproven check run (None: no check names it)
    reader: str | None = None  # a preflight source: the module whose ``gather(g)`` reads it
    needs: tuple[str, ...] = ()  # sources that must have been read before it (their records are set)
    applies: Callable[[Gathering], bool] | None = None  # None: whenever its needs are read


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

PREFLIGHT = (
    Source(
        f.LAUNCH,
        "the full launch command (--launch-cmd, --unit, --script, or `launch -- CMD`)",
        "validator.sources.launch",
    ),
    Source(
        "plugin", None, "validator.sources.plugin_env", needs=(f.LAUNCH,), applies=_installed
    ),  # its checks cite the launch and the install
    Source(
        f.HUMMING,
        f"{_WHERE_IT_RUNS}, as or with --service-user for the server's account",
        "validator.sources.humming",
        needs=(f.LAUNCH,),
    ),
    Source(f.HOST, "run preflight on the server's host", "validator.sources.host"),
    Source(
        f.DSPARK_DRAFT,
        "a local --speculative-draft-model-path",
        "validator.sources.dspark_draft",
        needs=(f.LAUNCH,),
        applies=_dspark,
    ),
    Source(
        f.FLASHINFER,
        _WHERE_IT_RUNS,
        "validator.sources.flashinfer",
        needs=(f.LAUNCH, f.HOST),
        applies=_flashinfer_path,
    ),
    Source(
        "start_budget", None, "validator.sources.start_budget", needs=(f.LAUNCH,), applies=_supervised
    ),  # host.start_budget cites the launch
    Source(
        f.CHECKPOINT,
        "--model-dir (or a local --model-path)",
        "validator.sources.checkpoint",
        needs=(f.LAUNCH, f.HOST),
    ),
)

# Read with the launch (``facts.sglang``), and by the live job.
_OTHERS = (
    Source(f.SGLANG, f"{_WHERE_IT_RUNS} (its interpreter must import sglang), or --sglang-root"),
    Source(f.SERVER, "a reachable, ready server (--url, --wait, --api-key-file)"),
    Source(f.ATTESTATION, "--attestation (the spark-validate plugin's file, written by the running server)"),
    Source(f.LOG, "--log (the file the running server writes) or --log journal:UNIT"),
    Source(f.PROBE, "a ready server with speculative decoding on (the acceptance probe)"),
    Source(f.WEIGHTS, "--weights-checker on a server that serves /weights_checker"),
)

SOURCES = (*PREFLIGHT, *_OTHERS)
