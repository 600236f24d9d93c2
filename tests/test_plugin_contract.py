"""Every dotted hook target and attribute the plugin relies on exists in SGLang 0.5.23's real source.

Read from the wheel PyPI serves (tests.support.sglang_wheel), with ``ast``; no hand-made copy. Where the
SGLang environment built by scripts/setup_sglang_env.sh exists, the registration also runs against the real
``HookRegistry`` in a subprocess, on stand-in classes and on SGLang's real classes (skipped locally
without it, required when CI=true).
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.prerequisite import missing
from validator.plugin import hooks, remedy

REPO = Path(__file__).resolve().parents[1]
SGLANG_PY = REPO / ".venv-sglang" / "bin" / "python"


def _module_file(root: Path, dotted: str) -> Path:
    rel = dotted.removeprefix("sglang.").replace(".", "/")
    return root / f"{rel}.py"


def _class(root: Path, module: str, name: str) -> ast.ClassDef:
    tree = ast.parse(_module_file(root, module).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"class {name} not found in {module}")


def _methods(cls: ast.ClassDef) -> set[str]:
    return {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _self_attrs(cls: ast.ClassDef) -> set[str]:
    """Attributes assigned as ``self.X = ...`` anywhere in the class, plus its properties."""
    found = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.add(t.attr)
    return found | _methods(cls)


def test_the_simulator_logs_the_targets_the_plugin_hooks() -> None:
    from validator.sim.server_log import PLUGIN_HOOK_TARGETS

    assert tuple(hooks.HOOKS) == PLUGIN_HOOK_TARGETS


@pytest.mark.parametrize("target", sorted(hooks.HOOKS))
def test_hook_target_exists(stock_sglang_root: Path, target: str) -> None:
    module, cls, method = target.rsplit(".", 2)
    assert method in _methods(_class(stock_sglang_root, module, cls)), target


def test_attributes_the_hooks_read(stock_sglang_root: Path) -> None:
    root = stock_sglang_root
    runner = _self_attrs(_class(root, "sglang.srt.model_executor.model_runner", "ModelRunner"))
    assert {"model", "is_draft_worker", "weight_load_time", "spec_algorithm", "draft_model_idx"} <= runner
    eagle = _self_attrs(_class(root, "sglang.srt.speculative.eagle_worker_v2", "EagleDraftWorker"))
    assert {"target_worker", "draft_runner", "draft_worker"} <= eagle
    multi = _self_attrs(
        _class(root, "sglang.srt.speculative.multi_layer_eagle_worker_v2", "MultiLayerEagleDraftWorker")
    )
    assert {"target_worker", "draft_runner_list"} <= multi
    frozen = _self_attrs(
        _class(root, "sglang.srt.speculative.frozen_kv_mtp_worker_v2", "FrozenKVMTPDraftWorker")
    )
    assert {"target_worker", "draft_model_runner"} <= frozen
    assert "runner_backend" in _self_attrs(
        _class(root, "sglang.srt.layers.moe.moe_runner.runner", "MoeRunner")
    )
    humming = _class(root, "sglang.srt.layers.quantization.mxfp4_humming_moe", "Mxfp4HummingMoEMethod")
    assert "runner" in _self_attrs(humming)
    fused = _class(root, "sglang.srt.layers.moe.fused_moe_triton.layer", "FusedMoE")
    assert "quant_method" in _self_attrs(fused)
    assert "quant_method" in _self_attrs(
        _class(root, "sglang.srt.layers.vocab_parallel_embedding", "VocabParallelEmbedding")
    )
    assert _class(root, "sglang.srt.layers.vocab_parallel_embedding", "ParallelLMHead")
    assert _class(root, "sglang.srt.layers.quantization.unquant", "UnquantizedEmbeddingMethod")
    values = {
        n.value.value
        for n in _class(root, "sglang.srt.layers.moe.utils", "MoeRunnerBackend").body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    }
    assert "humming" in values


def test_lm_head_sharing_path_is_as_the_plugin_assumes(stock_sglang_root: Path) -> None:
    root = stock_sglang_root
    nextn = _class(root, "sglang.srt.models.bailing_moe_nextn", remedy.NEXTN_CLASS)
    assert "set_embed_and_head" in _methods(nextn)
    assert remedy.METHOD not in _methods(nextn)  # the stock build lacks it: the remedy's reason to exist
    src = ast.unparse(_class(root, "sglang.srt.speculative.eagle_worker_v2", "EagleDraftWorker"))
    assert f'hasattr(self.draft_runner.model, "{remedy.METHOD}")' in src.replace("'", '"')
    assert f"self.draft_runner.model.{remedy.METHOD}(target_lm_head)" in src
    lora = ast.unparse(ast.parse((root / "srt/lora/layers.py").read_text()))
    assert "module.base_layer if isinstance(module, BaseLayerWithLoRA) else module" in lora


def test_dspark_worker_shares_modules_as_the_plugin_assumes(stock_sglang_root: Path) -> None:
    """The DSpark hook reads what DSparkWorkerV2.__init__ leaves behind; hold it to 0.5.23."""
    root = stock_sglang_root
    module, cls_name, method = hooks.DSPARK_INIT.rsplit(".", 2)
    worker = _class(root, module, cls_name)
    assert method == "__init__" and cls_name == "DSparkWorkerV2"
    assert {"draft_model", "_hosts_draft", "server_args", "_target_worker", "__getattr__"} <= _self_attrs(
        worker
    )
    src = ast.unparse(worker)
    # the two cases the attestation tells apart, and the module (not the tensor) handed to the draft
    assert "getattr(self.draft_model, 'uses_own_vocab_modules', False)" in src
    assert "lm_head = unwrap_lora_layer(getattr(target_model, 'lm_head', None))" in src
    assert "self.draft_model.attach_shared_modules(" in src and "lm_head=lm_head" in src
    assert "target_model = self.target_worker.model_runner.model" in src
    assert "self._hosts_draft = get_parallel().pp_group.is_last_rank" in src
    base = _class(root, "sglang.srt.speculative.base_spec_worker", "BaseSpecWorker")
    assert "target_worker" in _methods(base)  # the property the hook reads
    # the dense DSpark draft keeps the module it is given; the DSv4 draft may declare its own
    dense = ast.unparse(_class(root, "sglang.srt.models.dspark", "DSparkDraftMixin"))
    assert "def attach_shared_modules(self, *, embed_tokens: nn.Module, lm_head: nn.Module)" in dense
    assert "self.lm_head = lm_head" in dense
    dsv4 = _class(root, "sglang.srt.models.deepseek_v4_dspark", "DeepseekV4ForCausalLMDSpark")
    assert "uses_own_vocab_modules" in {
        t.id for n in dsv4.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    assert "if not self.uses_own_vocab_modules:" in ast.unparse(dsv4)


def test_server_address_the_plugin_records(stock_sglang_root: Path) -> None:
    """``ServerArgs.host``/``port`` bind the document to a URL; the runner and workers hold server_args."""
    serving = (stock_sglang_root / "srt/arg_groups/fields/serving.py").read_text()
    assert 'host: A[str, "The host of the HTTP server."] = "127.0.0.1"' in serving
    assert 'port: A[int, "The port of the HTTP server."] = 30000' in serving
    runner = _self_attrs(_class(stock_sglang_root, "sglang.srt.model_executor.model_runner", "ModelRunner"))
    assert "server_args" in runner
    eagle = _class(stock_sglang_root, "sglang.srt.speculative.eagle_worker_v2", "EagleDraftWorker")
    assert "server_args" in _self_attrs(eagle)


def test_plugin_framework_and_scheduler_entry(stock_sglang_root: Path) -> None:
    root = stock_sglang_root
    registry = _class(root, "sglang.srt.plugins.hook_registry", "HookRegistry")
    assert {"register", "apply_hooks"} <= _methods(registry)
    hook_type = _class(root, "sglang.srt.plugins.hook_registry", "HookType")
    assert "AFTER" in {t.id for n in hook_type.body if isinstance(n, ast.Assign) for t in n.targets}
    tree = ast.parse((root / "srt/managers/scheduler.py").read_text())
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_scheduler_process")
    first_call = entry.body[0] if not isinstance(entry.body[0], ast.Expr) else entry.body[0].value
    assert isinstance(first_call, ast.Call) and ast.unparse(first_call.func) == "load_plugins"
    rc = ast.parse((root / "srt/runtime_context.py").read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "get_parallel" for n in rc.body)
    assert _class(root, "sglang.srt.environ", "Envs")
    assert "SGLANG_PLUGINS" in (root / "srt/environ.py").read_text()


def _sglang_python() -> Path:
    if not SGLANG_PY.exists():
        missing(f"{SGLANG_PY} missing (bash scripts/setup_sglang_env.sh .venv-sglang)")
    return SGLANG_PY


_STANDIN = """
import json, os, sys, types
sys.path.insert(0, {repo!r})
from sglang.srt.plugins.hook_registry import HookRegistry, HookType
from validator.plugin import hooks
# Stand-in module with SGLang's class/method shape: the real registry wraps the plugin's real hook.
mod = types.ModuleType("standin_runner")
class ModelRunner:
    def __init__(self, model):
        self.model, self.is_draft_worker, self.weight_load_time = model, False, 1.25
    def load_model(self):
        return "original-result"
mod.ModelRunner = ModelRunner
sys.modules["standin_runner"] = mod
class Head:
    quant_method = None
class Model:
    lm_head = Head()
    def modules(self):
        return iter(())
HookRegistry.register("standin_runner.ModelRunner.load_model", hooks.after_load_model, HookType.AFTER)
registered = hooks.install()
print("registered", sorted(t for t in registered if t in HookRegistry._hooks))
HookRegistry.apply_hooks()
print("result", ModelRunner(Model()).load_model())
print("doc", json.dumps(json.load(open(os.environ["SPARK_VALIDATE_ATTESTATION"]))["hooks"]))
"""


def test_registration_against_the_real_hook_registry(tmp_path: Path) -> None:
    """The real HookRegistry accepts the plugin's hooks, and its AFTER wrapper drives them correctly."""
    python = _sglang_python()
    script = tmp_path / "reg.py"
    script.write_text(_STANDIN.format(repo=str(REPO)))
    env = {**os.environ, "SPARK_VALIDATE_ATTESTATION": str(tmp_path / "att.json")}
    proc = subprocess.run([str(python), str(script)], capture_output=True, text=True, timeout=240, env=env)
    print(proc.stdout[-2000:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"registered {sorted(hooks.HOOKS)}" in proc.stdout
    assert "result original-result" in proc.stdout  # AFTER hook returned None: result untouched
    assert 'doc {"model_loaded": "ran", "init_lm_head": "not_reached"}' in proc.stdout


# torchvision's only wheel for torch 2.13 on PyPI links CUDA torch (libc10_cuda.so), so it cannot load in the
# CPU-torch environment; SGLang imports it at module level only for multimodal preprocessing (InternVL), which
# none of the hooked classes use. The script below gives that one package an empty stand-in module; every
# other module, SGLang's own first of all, is the real one (scripts/setup_sglang_env.sh installs them).
_REAL_TARGETS = """
import importlib.abc, importlib.machinery, pkgutil, sys, types
sys.path.insert(0, {repo!r})


class _Anything:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Anything()
    def __getattr__(self, name): return _Anything()
    def __mro_entries__(self, bases): return (object,)


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "torchvision":
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        module = _Stub(spec.name)
        module.__path__, module.__version__ = [], "0.28.0"
        return module
    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StubFinder())
from sglang.srt.plugins.hook_registry import HookRegistry
from validator.plugin.hooks import HOOKS, install
install()
HookRegistry.apply_hooks()
for target in HOOKS:
    obj, attr = target.rsplit(".", 1)
    cls = pkgutil.resolve_name(obj)
    fn = getattr(cls, attr)
    print(target, target in HookRegistry._patched, hasattr(fn, "__wrapped__"), cls.__module__)
"""


def test_real_targets_patch_in_sglang(tmp_path: Path) -> None:
    """``HookRegistry.apply_hooks()`` patches every hook target on SGLang's real classes, imported from the
    real 0.5.23 modules (ModelRunner, the EAGLE, multi-layer EAGLE, frozen-KV MTP and DSpark workers)."""
    python = _sglang_python()
    script = tmp_path / "real.py"
    script.write_text(_REAL_TARGETS.format(repo=str(REPO)))
    proc = subprocess.run([str(python), str(script)], capture_output=True, text=True, timeout=480)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("sglang.")]
    assert len(lines) == len(hooks.HOOKS), proc.stdout[-2000:]
    for line in lines:
        target, patched, wrapped, module = line.split()
        assert (patched, wrapped) == ("True", "True"), line
        assert target.startswith(module + "."), line  # the class object lives in the real module
