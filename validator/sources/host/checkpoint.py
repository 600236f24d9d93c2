"""Evidence from the checkpoint directory: config.json plus the safetensors headers that matter.

Mirrors how SGLang 0.5.23 reads a checkpoint: MXFP4 routed experts from
``quantization_config.routed_experts_quant_method`` (``srt/configs/model_config.py``; sampled weights must be
I8/U8), the FP8 skip list from ``ignored_layers`` else ``modules_to_not_convert`` (``Fp8Config.from_config``),
the NEXTN layer and experts where ``validator.loader_layouts`` says for the ``architectures`` (none mirrored:
``nextn_tensor_count`` None). Only the shards holding the tensors the checks need are opened.
"""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from validator.bounded_files import JSON_CAP, load_json_file, look, looks_like, names_in
from validator.errors import InputError
from validator.facts import CHECKPOINT, HOST, LAUNCH, CheckpointFacts, LaunchFacts, TensorInfo
from validator.loader_layouts import BAILING_MOE_V3, LoaderLayout, layout_for
from validator.sources.container import ContainerSpec, on_host
from validator.sources.gathering import Gathering, preflight_source
from validator.sources.host import hf_cache
from validator.sources.host.safetensors_header import read_header
from validator.trusted_files import read_as

INDEX_FILE = "model.safetensors.index.json"
LM_HEAD = "lm_head.weight"
MXFP4_PACKED_DTYPES = frozenset({"U8", "I8"})  # fp8.py's packed int8 for MXFP4 experts


def nextn_layer_id(num_hidden_layers: int) -> int:
    """Bailing V3's ``resolve_nextn_layer_id``."""
    return BAILING_MOE_V3.nextn_layer_id(num_hidden_layers)


def read_checkpoint(model_dir: Path | str) -> CheckpointFacts:
    d = Path(model_dir)
    st = look(d, "the model directory")  # walked: never a look through another user's link by name
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise InputError(str(d), "model directory does not exist or is not a directory")
    config = _load_json_object(d / "config.json")
    quant = config.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise InputError(str(d / "config.json"), "quantization_config must be an object")
    quant = quant or {}
    layers = _opt_int(config, "num_hidden_layers", d)
    architectures = _str_list(config.get("architectures"), "architectures", d) or []
    layout = layout_for(architectures)
    nextn_prefix = (
        f"model.layers.{layout.nextn_layer_id(layers)}."
        if layout is not None and layers is not None
        else None
    )

    weight_map, files = _weight_map(d)
    nextn_names = sorted(n for n in weight_map if nextn_prefix and n.startswith(nextn_prefix))
    expert_sample = (
        min((n for n in weight_map if _is_routed_expert(layout, n, nextn_prefix)), default=None)
        if layout is not None
        else None
    )
    spec_parts = layout.nextn_spec_parts if layout is not None else ()
    wanted = [LM_HEAD, *(n for n in nextn_names if any(f".{part}." in n for part in spec_parts))]
    if nextn_names:
        wanted.append(nextn_names[0])
    if expert_sample:
        wanted.append(expert_sample)
    tensors = _read_tensors(d, weight_map, [n for n in dict.fromkeys(wanted) if n in weight_map])

    routed_mxfp4 = quant.get("routed_experts_quant_method") == "mxfp4"
    if routed_mxfp4 and expert_sample is not None:
        routed_mxfp4 = tensors[expert_sample].dtype in MXFP4_PACKED_DTYPES

    return CheckpointFacts(
        model_dir=d,
        architectures=architectures,
        config=config,
        num_nextn_predict_layers=_opt_int(config, "num_nextn_predict_layers", d),
        num_hidden_layers=layers,
        hidden_size=_opt_int(config, "hidden_size", d),
        vocab_size=_opt_int(config, "vocab_size", d),
        quant_method=quant.get("quant_method") if isinstance(quant.get("quant_method"), str) else None,
        modules_to_not_convert=_skip_list(quant, d),
        routed_experts_mxfp4=routed_mxfp4 if quant else None,
        tensors=tensors,
        tensor_count=len(weight_map),
        nextn_tensor_count=len(nextn_names) if layout is not None else None,
        files=files,
    )


def _load_json_object(path: Path) -> dict[str, Any]:
    """A bounded read (regular file, size cap: ``config.json -> /dev/zero`` is refused) of a JSON object."""
    where = str(path)
    if look(path, path.name) is None:
        raise InputError(where, "missing")
    doc = load_json_file(path, JSON_CAP, path.name)
    if not isinstance(doc, dict):
        raise InputError(where, f"must be a JSON object, got {type(doc).__name__}")
    return doc


def _weight_map(d: Path) -> tuple[dict[str, str], list[str]]:
    """Tensor name -> shard file name, from the index when there is one, else from every shard's header."""
    index = d / INDEX_FILE
    if look(index, INDEX_FILE) is not None:
        doc = _load_json_object(index)
        wm = doc.get("weight_map")
        if not isinstance(wm, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in wm.items()
        ):
            raise InputError(str(index), "weight_map must map tensor names to shard file names")
        for shard in set(wm.values()):
            if Path(shard).name != shard or shard in ("", ".", ".."):
                raise InputError(
                    str(index), f"shard {shard!r} must be a file name inside the model directory"
                )
        return dict(wm), sorted(set(wm.values()))
    names = names_in(d, "the model directory")  # as the launch's owner could list it, never as root for them
    shards = sorted(
        n for n in names if n.endswith(".safetensors") and not n.startswith(".") and not _is_dir(d / n)
    )
    wm = {}
    for shard in shards:
        for name in read_header(d / shard).entries:
            wm[name] = shard
    return wm, shards


def _read_tensors(d: Path, weight_map: dict[str, str], names: Iterable[str]) -> dict[str, TensorInfo]:
    by_shard: dict[str, list[str]] = {}
    for n in names:
        by_shard.setdefault(weight_map[n], []).append(n)
    out: dict[str, TensorInfo] = {}
    for shard, wanted in sorted(by_shard.items()):
        path = d / shard
        st = look(path, "safetensors file")
        if st is None or not stat.S_ISREG(st.st_mode):
            raise InputError(str(path), f"missing, but {INDEX_FILE} places {wanted[0]!r} in it")
        header = read_header(path)
        for n in wanted:
            entry = header.entries.get(n)
            if entry is None:
                raise InputError(str(path), f"does not hold {n!r}, which {INDEX_FILE} places in it")
            out[n] = TensorInfo(dtype=entry.dtype, shape=list(entry.shape), file=shard)
    return out


def _is_routed_expert(layout: LoaderLayout, name: str, nextn_prefix: str | None) -> bool:
    return bool(layout.routed_expert.match(name)) and not (nextn_prefix and name.startswith(nextn_prefix))


def _opt_int(config: dict[str, Any], key: str, d: Path) -> int | None:
    v = config.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise InputError(str(d / "config.json"), f"{key} must be a non-negative integer, got {v!r}")
    return v


def _str_list(v: object, key: str, d: Path) -> list[str] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InputError(str(d / "config.json"), f"{key} must be a list of strings")
    return list(v)


def _skip_list(quant: dict[str, Any], d: Path) -> list[str] | None:
    """Fp8Config.from_config: ``ignored_layers`` if present, else ``modules_to_not_convert``."""
    for key in ("ignored_layers", "modules_to_not_convert"):
        if quant.get(key) is not None:
            return _str_list(quant[key], f"quantization_config.{key}", d)
    return None


@preflight_source(CHECKPOINT, 80, needs=(LAUNCH, HOST))
def gather(g: Gathering) -> None:
    """The checkpoint the server will load: --model-dir, else a local --model-path (for a container, the
    host directory mounted there), else a Hugging Face repo id's snapshot in the server's hub cache. A
    malformed file is recorded in ``g.malformed`` (and as this source's error) so the other checks still
    run; with no ``g.malformed`` it is raised."""
    facts, launch, inputs, container = g.facts, g.launch, g.inputs, g.container
    if container is not None and g.hidden_install is not None:
        _container_model_error(g, launch, container)
    model_path = launch.args.get("model_path")
    if (
        inputs.model_dir is None
        and container is None
        and isinstance(model_path, str)
        and not model_path.startswith("/")
        and launch.working_directory is None
        and "working_directory" in launch.unresolved
    ):
        # a relative path is the server's working directory's, which only the run tells: never this
        # process's own (where preflight happens to stand)
        facts.errors[CHECKPOINT] = (
            f"--model-path {model_path} is relative and the server's working directory is known only at run "
            f"time ({launch.unresolved['working_directory']}); give --model-dir"
        )
        return
    model_dir = inputs.model_dir or _local_model_path(launch, container)
    if model_dir is None and launch.origin.startswith("unit:") and str(model_path).startswith("~"):
        facts.errors[CHECKPOINT] = (
            f"--model-path {model_path}: systemd does not expand '~' in ExecStart= (the server would look "
            "for a directory literally named '~'); write the absolute path"
        )
    if model_dir is None and "model_path" in launch.unresolved:
        facts.errors[CHECKPOINT] = f"--model-path is set at run time: {launch.unresolved['model_path']}"
    elif model_dir is None and isinstance(model_path, str):
        model_dir = _hub_snapshot(g, launch, model_path, container)
    if model_dir is None:
        return
    # --model-dir is the operator's own word, not the launch's: read as this user, whoever wrote the launch
    with read_as({}) if inputs.model_dir is not None else contextlib.nullcontext():
        _read_into(g, model_dir)


def _read_into(g: Gathering, model_dir: Path) -> None:
    facts = g.facts
    if not looks_like(model_dir, stat.S_ISDIR):  # a refused link: read_checkpoint says why
        facts.errors[CHECKPOINT] = f"{model_dir}: model directory not found"
        return
    try:
        facts.checkpoint = read_checkpoint(model_dir)
    except InputError as exc:
        facts.errors[CHECKPOINT] = str(exc)
        if g.malformed is None:
            raise
        g.malformed.append(exc)


def _container_model_error(g: Gathering, launch: LaunchFacts, container: ContainerSpec) -> None:
    """Where a container's --model-path is on the host (through its mounts), or why it is not here."""
    model = launch.args.get("model_path")
    if isinstance(model, str) and model.startswith("/"):
        found, why = on_host(model, container)
        if found is None:
            g.facts.errors[CHECKPOINT] = f"--model-path {why}; give --model-dir with its host path"
        elif not looks_like(found / "config.json", stat.S_ISREG):
            g.facts.errors[CHECKPOINT] = f"--model-path {model} is {why}: {found} holds no config.json"


def _hub_snapshot(
    g: Gathering, launch: LaunchFacts, model_path: str, container: ContainerSpec | None = None
) -> Path | None:
    """A ``--model-path`` that is a Hugging Face repo id (not a directory where the server starts): the
    snapshot the server would load from its hub cache (``sources/host/hf_cache``; in ``container``, the
    cache its environment names, through the mount that holds it), or, not cached or not visible, why there
    is nothing here to check (recorded as the checkpoint's error)."""
    revision, download_dir = launch.args.get("revision"), launch.args.get("download_dir")
    rev = revision if isinstance(revision, str) else None
    download = download_dir if isinstance(download_dir, str) else None
    if container is not None:
        if model_path.startswith("/") or not hf_cache.looks_like_repo_id(model_path):
            return None
        inside = hf_cache.container_lookup(model_path, rev, container, launch.env, download)
        if isinstance(inside, str):
            g.facts.errors[CHECKPOINT] = (
                f"--model-path {model_path} is a Hugging Face repo id, read inside the container: {inside}; "
                "give --model-dir with the snapshot's host path"
            )
            return None
        found = inside
    else:
        cwd = launch.working_directory
        if Path(model_path).is_absolute() or (cwd is not None and looks_like(cwd / model_path, stat.S_ISDIR)):
            return None
        if not hf_cache.looks_like_repo_id(model_path) or looks_like(model_path, stat.S_ISDIR):
            return None
        host_home = g.facts.host.home if g.facts.host is not None else None
        home = launch.env.get("HOME") if not g.service_user and launch.env.get("HOME") else host_home
        found = hf_cache.lookup(model_path, rev, launch.env, str(home) if home else None, download)
    if found.snapshot is not None:
        return found.snapshot
    then = (
        "the server would fail at start (HF_HUB_OFFLINE is set)"
        if hf_cache.offline(launch.env)
        else "the server would download it from the Hugging Face Hub when it starts (every weight file)"
    )
    g.facts.errors[CHECKPOINT] = (
        f"--model-path {model_path} is a Hugging Face repo id, {found.describe()}: {then}, so there is no "
        f"checkpoint here to check; download it first as the server's user (`hf download {model_path}"
        f"{' --revision ' + found.revision if found.revision != 'main' else ''}`) or give --model-dir"
    )
    return None


def _local_model_path(launch: LaunchFacts, container: ContainerSpec | None = None) -> Path | None:
    """Without --model-dir, the launch command's --model-path when it names a local directory (for a
    container, the host directory mounted there). A relative one (``./m`` or ``m``) is the server's
    working directory's, when the launch says which (a script's, a unit's), as the program's is
    (``launch.program``)."""
    value = launch.args.get("model_path")
    if not isinstance(value, str) or not value:
        return None
    path: Path | None = Path(value)
    if container is not None:
        if not value.startswith(("/", ".")):
            return None
        path, _ = on_host(value, container)
    elif not value.startswith("/"):
        path = Path(value) if launch.working_directory is None else launch.working_directory / value
        # one without ./ is a directory there when one is (SGLang decides on the filesystem, ``os.path.isdir``
        # in sglang/srt/utils/common.py), else a Hugging Face repo id (``_hub_snapshot``)
        if not value.startswith(".") and not looks_like(path, stat.S_ISDIR):
            return None
    if path is not None and looks_like(path / "config.json", stat.S_ISREG):
        return path
    return None


def _is_dir(path: Path) -> bool:
    st = look(path, "safetensors file")
    return st is not None and stat.S_ISDIR(st.st_mode)
