"""The attestation the in-process plugin would write for the simulated server, built and written by the same
code as the real plugin (``validator.attestation``), so ``check`` judges it exactly as a real one; the
simulator process is the writer. The broken trap shows as the plugin sees it: ``UnquantizedEmbeddingMethod``
over an unscaled ``float8_e4m3fn`` tensor, ``shared_module`` false, ``shared_weight`` true.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from validator import TOOL_NAME, __version__
from validator.attestation import location
from validator.attestation import schema as fmt
from validator.sim.scenarios import HIDDEN, HOT_TOKENS, MOE_LAYERS, TARGET_CLASS, VOCAB, Scenario
from validator.sim.server_args import SGLANG_VERSION


def _moe(scenario: Scenario, layers: int) -> fmt.Moe:
    method = (
        "Mxfp4HummingMoEMethod" if scenario.moe_backend == "humming" else "Mxfp4FlashinferCutlassMoEMethod"
    )
    return fmt.Moe(
        layers=layers, quant_methods={method: layers}, runner_backends={scenario.moe_backend: layers}
    )


def _head(fp8: bool, *, own_method: bool) -> fmt.LmHead:
    """``own_method``: the draft's own unquantized method sitting on whatever tensor it was given."""
    quantized = fp8 and not own_method
    return fmt.LmHead(
        module_class="ParallelLMHead",
        quant_method="Fp8LinearMethod" if quantized else "UnquantizedEmbeddingMethod",
        weight_dtype="float8_e4m3fn" if fp8 else "bfloat16",
        weight_shape=[VOCAB, HIDDEN],
        has_weight_scale=quantized,
        has_input_scale=False,
    )


def build(
    scenario: Scenario,
    *,
    pid: int,
    start_time: float,
    host: str,
    port: int,
    load_weight_s: float | None = None,
    tp_size: int = 1,
) -> fmt.Attestation:
    """The document for ``scenario``, written by process ``pid`` serving on ``host:port``, whose weights
    loaded in ``load_weight_s`` (what ``/server_info`` reports as ``startup_time.load_weight``)."""
    fp8 = scenario.fp8_head
    draft: fmt.ModelInfo | None = None
    if scenario.spec:
        draft = fmt.ModelInfo(
            model_class=scenario.draft_class,
            lm_head=_head(fp8, own_method=not scenario.module_shared),
            moe=_moe(scenario, 1),
        )
    return fmt.Attestation(
        schema=fmt.SCHEMA,
        written_at=fmt.utc_now(),
        writer=fmt.Writer(tool=TOOL_NAME, version=__version__),
        process=fmt.Process(
            pid=pid,
            start_time=start_time,
            hostname=socket.gethostname(),
            uid=os.geteuid(),
            tp_rank=0,
            tp_size=tp_size,  # the launch's --tp (rank 0 writes this file; a TP=2 head says 2)
            load_weight_s=load_weight_s,
        ),
        server=fmt.Server(host=host, port=port),
        sglang=fmt.SGLangInfo(
            version=SGLANG_VERSION,
            declares_fp8_lm_head=scenario.build_declares_fp8,
            nextn_has_set_lm_head_from_target=scenario.build_shares_module,
        ),
        env={
            "SGLANG_ENABLE_FP8_LM_HEAD": "1" if scenario.fp8_env else None,
            "SPARK_VALIDATE_SHARE_LM_HEAD": None,
            "SGLANG_PLUGINS": None,
            "HUMMING_CACHE_DIR": None,
            "HUMMING_TMP_DIR": None,
        },
        target=fmt.ModelInfo(
            model_class=TARGET_CLASS, lm_head=_head(fp8, own_method=False), moe=_moe(scenario, MOE_LAYERS)
        ),
        draft=draft,
        lm_head=fmt.LmHeadSharing(
            shared_module=scenario.module_shared,
            shared_weight=scenario.spec,
            remedy_applied=False,
            worker=("DSparkWorkerV2" if scenario.dspark else "EagleDraftWorker") if scenario.spec else None,
            own_vocab_modules=False if scenario.dspark else None,  # LingDSparkModel shares the target's
            shared_embed=True if scenario.dspark else None,
            hot_token_count=HOT_TOKENS if scenario.token_map else None,
        ),
        hooks={
            "model_loaded": fmt.RAN,
            "init_lm_head": fmt.RAN if scenario.spec else fmt.NOT_REACHED,
        },
        errors=[],
    )


def default_path(port: int) -> Path | None:
    """Where the simulator writes without ``--attestation``: the plugin's own location rules, one file per
    port (``attestation.PORT.json``) unless ``$SPARK_VALIDATE_ATTESTATION`` names the file. Two simulators
    on one host (as root both reach ``/run/spark-validate``) would otherwise overwrite each other's, and
    the first server's check would read the second's document."""
    base = location.attestation_path(0)
    if base is None or os.environ.get(location.ENV_PATH, "").strip():
        return base
    return base.with_name(f"{base.stem}.{port}{base.suffix or '.json'}")
