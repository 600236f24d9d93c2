"""The Kubernetes front door from the operator's side: the shipped manifest read as the kubelet runs it,
the sidecar reachable where `kubectl port-forward` connects, a bad ``--listen`` named before anything
starts, and the start-budget remedy in Kubernetes terms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import web
from tests.support.cli import run_cli
from tests.support.daemon_process import daemon_process
from tests.support.in_process import preflight_json_in_process
from tests.support.loopback import free_port
from tests.support.sim_process import sim_process
from validator.sources.launch.kube_manifest import load_kube_container

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "deploy" / "kubernetes" / "deployment.yaml"


def _checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"]}


def test_preflight_reads_the_shipped_manifests_sglang_container() -> None:
    """Our own manifest: both containers use the same image; the one that runs SGLang is found by its
    command, and its command, args and env are what the checks judge (no exit 65)."""
    rc, report, err = preflight_json_in_process({}, "--kube-manifest", str(MANIFEST))
    assert report, err
    checks = _checks(report)
    for check in ("moe.backend", "spec.config", "lm_head.exclusive"):
        assert checks[check]["status"] == "pass", checks[check]
    # judged by the shipped flag table, which the image's SGLang is not known to be (world10 F2)
    assert checks["launch.warnings"]["status"] == "error", checks["launch.warnings"]
    fp8 = checks["lm_head.fp8"]
    assert "kubernetes:" in str(fp8["evidence"].get("set_in")), fp8  # SGLANG_ENABLE_FP8_LM_HEAD from env
    assert "inside the image" in fp8["message"]  # the install is in the image: not proven from outside
    assert checks["host.start_budget"]["status"] == "pass"
    assert "startupProbe: 900 s" in checks["host.start_budget"]["message"]
    assert rc == 69 and report["verdict"] == "inconclusive"


def test_kubelet_expansion_and_values_only_the_kubelet_knows(tmp_path: Path) -> None:
    doc = yaml.safe_load(MANIFEST.read_text().split("\n---\n")[0])
    server = doc["spec"]["template"]["spec"]["containers"][0]
    server["env"] = [
        {"name": "ARGS_HEAD", "value": "humming"},
        {"name": "SGLANG_ENABLE_FP8_LM_HEAD", "valueFrom": {"configMapKeyRef": {"name": "r", "key": "fp8"}}},
    ]
    server["args"] = [a.replace("=humming", "=$(ARGS_HEAD)") for a in server["args"]] + [
        "--served-model-name=$$x"
    ]
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, report, err = preflight_json_in_process({}, "--kube-manifest", str(path))
    assert report, err
    checks = _checks(report)
    assert checks["moe.backend"]["status"] == "pass", checks["moe.backend"]  # $(ARGS_HEAD) expanded
    fp8 = checks["lm_head.fp8"]
    assert fp8["status"] == "error" and "configMapKeyRef" in fp8["message"], fp8  # unknown, never "unset"


def test_a_leaderworkerset_is_read_rank_by_rank_with_what_lws_injects(tmp_path: Path) -> None:
    """SGLang's multi-node form (world9 finding 6): the leader's and the worker's templates are both read,
    ``--kube-container`` choosing; LWS puts its variables first (its own win over the template's): the
    group size is the template's ``size``, the leader's address and the pod's index are the controller's,
    so ``--dist-init-addr`` and ``--node-rank`` are unresolved, never parsed as their ``$(NAME)`` text."""
    lws = REPO / "tests" / "corpus" / "kube" / "sgl-project-sglang-deploy_on_k8s-lws.yaml"
    doc = yaml.safe_load(lws.read_text().split("\n---\n")[0])
    worker = doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["env"].append({"name": "LWS_GROUP_SIZE", "value": "9"})
    path = tmp_path / "lws.yaml"
    path.write_text(yaml.safe_dump(doc))
    for name in ("sglang-leader", "sglang-worker"):
        spec = load_kube_container(path, name)
        assert spec.argv[:3] == ["python3", "-m", "sglang.launch_server"]
        assert spec.argv[spec.argv.index("--nnodes") + 1] == "2" and spec.env["LWS_GROUP_SIZE"] == "2"
        assert "--node-rank" not in spec.argv and "--dist-init-addr" not in spec.argv
        assert {"node_rank", "dist_init_addr", "LWS_WORKER_INDEX"} <= spec.unresolved.keys()
        assert "LeaderWorkerSet controller" in spec.unresolved["node_rank"]
    rc, report, err = preflight_json_in_process(
        {}, "--kube-manifest", str(path), "--kube-container", "sglang-worker"
    )
    assert _checks(report)["spec.config"]["status"] == "fail" and rc == 78, err
    proc = run_cli("preflight", "--kube-manifest", str(path))  # both ranks run SGLang: name one
    assert proc.returncode == 65 and "sglang-leader, sglang-worker" in proc.stderr, proc.stderr
    del doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]  # the worker template makes the leader too
    path.write_text(yaml.safe_dump(doc))
    assert "leader or worker" in load_kube_container(path, "sglang-worker").unresolved["LWS_WORKER_INDEX"]
    for size in (0, -2, "2"):  # the API admits a size of at least 1 only (red team 19: 0 was read as 0)
        doc["spec"]["leaderWorkerTemplate"]["size"] = size
        path.write_text(yaml.safe_dump(doc))
        spec = load_kube_container(path, "sglang-worker")
        assert "LWS_GROUP_SIZE" not in spec.env and "--nnodes" not in spec.argv, spec.argv
        assert "is not a group size" in spec.unresolved["LWS_GROUP_SIZE"]


def test_a_container_that_cannot_be_told_is_one_line_naming_the_remedy(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    doc = yaml.safe_load(MANIFEST.read_text().split("\n---\n")[0])
    containers = doc["spec"]["template"]["spec"]["containers"]
    containers.append({**containers[0], "name": "sglang-b"})
    path.write_text(yaml.safe_dump(doc))
    proc = run_cli("preflight", "--kube-manifest", str(path))
    assert proc.returncode == 65, proc.stderr
    assert "--kube-container" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    named = run_cli(
        "preflight", "--kube-manifest", str(path), "--kube-container", "sglang-b", "--format", "json"
    )
    assert named.returncode == 69, named.stderr  # named: read, inconclusive only for the image


def test_start_budget_remedy_under_kubernetes_speaks_of_the_startup_probe(tmp_path: Path) -> None:
    doc = yaml.safe_load(MANIFEST.read_text().split("\n---\n")[0])
    doc["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureThreshold"] = 12
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, report, err = preflight_json_in_process({}, "--kube-manifest", str(path))
    assert report, err
    budget = _checks(report)["host.start_budget"]
    assert budget["status"] == "warn", budget
    assert "startupProbe" in budget["remedy"] and "TimeoutStartSec" not in budget["remedy"], budget["remedy"]


def test_sidecar_serves_on_every_listen_address(tmp_path: Path) -> None:
    """``--listen`` repeated: the same endpoints on each address (the pod IP for the kubelet and
    Prometheus, loopback for port-forward)."""
    second = free_port()
    with (
        sim_process(tmp_path, "--scenario", "healthy") as sim,
        daemon_process(
            tmp_path, sim.url, "--listen", f"127.0.0.1:{second}", "--no-probe", "--wait", "5"
        ) as daemon,
    ):
        first = daemon.get("/livez")
        other = web.get(f"http://127.0.0.1:{second}/livez", timeout=5)
        assert first.status_code == other.status_code == 200
        assert web.get(f"http://127.0.0.1:{second}/metrics", timeout=5).text.startswith("#")


def test_a_listen_host_that_does_not_resolve_is_a_usage_error() -> None:
    proc = run_cli(
        "serve", "--url", "http://127.0.0.1:9", "--listen", "no-such-host.invalid:9464", timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    assert "does not resolve" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_variables_doubling_each_other_are_bounded_not_expanded_to_terabytes(tmp_path: Path) -> None:
    """Red team 19: 40 env entries each ``$(A{i-1})$(A{i-1})`` (a 2 KiB manifest) expanded the kubelet's
    way to 16 x 2^39 bytes: MemoryError (exit 1) or the OOM killer. The expansions of one container now
    stop at EXPANDED_CAP, exit 65 naming the manifest; a word far under it is still expanded."""
    from validator.errors import InputError

    env = ['    - {name: A0, value: "xxxxxxxxxxxxxxxx"}'] + [
        f'    - {{name: A{i}, value: "$(A{i - 1})$(A{i - 1})"}}' for i in range(1, 40)
    ]
    pod = tmp_path / "pod.yaml"
    head = "kind: Pod\nspec:\n  containers:\n  - name: a\n    image: i\n    env:\n"
    server = 'command: ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--served-model-name"'
    pod.write_text(head + "\n".join(env) + f'\n    {server}, "$(A39)"]\n')
    with pytest.raises(InputError, match="expand past"):
        load_kube_container(pod, None)
    pod.write_text(head + "\n".join(env[:5]) + f'\n    {server}, "$(A4)"]\n')
    assert load_kube_container(pod, None).argv[-1] == "x" * 256


def test_a_kubelet_reference_in_a_shell_string_is_never_read_as_its_text(tmp_path: Path) -> None:
    """Red team 19: the kubelet puts ``$(NAME)`` into a ``sh -c`` string before the shell reads it, quoted or
    not; where NAME is known only at run time (a valueFrom, LWS's leader address) the reader kept the text,
    and inside single quotes the shell took it literally: ``--served-model-name '$(BACKEND)'`` was the
    certain value "$(BACKEND)" (an environment variable set so, a certain value a check compares). Now the
    launch is unresolved, naming the reference, as the same string unquoted already was."""
    from validator.errors import UnresolvedLaunch
    from validator.sources.launch.script import through_shell

    pod = tmp_path / "lws.yaml"
    string = "exec python3 -m sglang.launch_server --model-path /m --served-model-name '$(BACKEND)'"
    pod.write_text(
        "kind: LeaderWorkerSet\nspec:\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n"
        "      spec:\n        containers:\n        - name: w\n          image: i\n"
        "          env: [{name: BACKEND, valueFrom: {configMapKeyRef: {name: c, key: b}}},\n"
        "                {name: K, value: k}]\n"
        f'          command: ["sh", "-c", "{string}"]\n'
    )
    with pytest.raises(UnresolvedLaunch, match=r"refers to \$\(BACKEND\)"):
        through_shell(load_kube_container(pod, "w"))
    pod.write_text(pod.read_text().replace("$(BACKEND)", "$(K)"))  # a value the manifest gives: read
    assert through_shell(load_kube_container(pod, "w")).argv[-1] == "k"


def test_a_shell_string_reading_a_variable_the_pod_spec_fills_in_names_its_value_from(tmp_path: Path) -> None:
    """World10 F6 (b): SGLang's own ``k8s-sglang-distributed-sts.yaml`` shape, ``--node-rank $POD_INDEX``
    in a ``bash -c`` string with POD_INDEX from ``env[].valueFrom.fieldRef``. The kubelet, not the image,
    gives it: the unresolved value names the valueFrom (it was "the image ... may set it")."""
    from validator.errors import UnresolvedLaunch
    from validator.sources.launch.script import through_shell

    pod = tmp_path / "sts.yaml"
    pod.write_text(
        "kind: StatefulSet\nspec:\n  template:\n    spec:\n      containers:\n      - name: sglang\n"
        "        image: lmsysorg/sglang:spark\n        command: [/bin/bash, -c]\n"
        '        args: ["python3 -m sglang.launch_server --model-path /m --node-rank \\"$POD_INDEX\\""]\n'
        "        env:\n        - name: POD_INDEX\n          valueFrom:\n            fieldRef:\n"
        "              fieldPath: \"metadata.labels['apps.kubernetes.io/pod-index']\"\n"
    )
    spec = through_shell(load_kube_container(pod, "sglang"))
    assert spec.argv[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "/m"], spec.argv
    assert "POD_INDEX comes from fieldRef" in spec.unresolved["node_rank"], spec.unresolved
    assert "may set it" not in spec.unresolved["node_rank"]
    pod.write_text(pod.read_text().replace('\\"$POD_INDEX\\"', "$POD_INDEX"))  # unquoted: split at run time
    with pytest.raises(UnresolvedLaunch, match="POD_INDEX comes from fieldRef"):
        through_shell(load_kube_container(pod, "sglang"))


def _sts(tmp_path: Path, string: str, *, more: str = "") -> Path:
    """A StatefulSet whose one container (and ``more``) runs ``string`` under ``/bin/bash -c``, POD_INDEX
    from the Downward API, a livenessProbe that gives up after 60 s (SGLang's own distributed-sts shape)."""
    pod = tmp_path / "sts.yaml"
    pod.write_text(
        "kind: StatefulSet\nspec:\n  template:\n    spec:\n      containers:\n      - name: sglang\n"
        "        image: lmsysorg/sglang:spark\n        command: [/bin/bash, -c]\n"
        f"        args: [{json.dumps(string)}]\n"
        "        env:\n        - name: POD_INDEX\n"
        "          valueFrom: {fieldRef: {fieldPath: metadata.name}}\n"
        "        livenessProbe: {httpGet: {path: /health, port: 30000}, initialDelaySeconds: 30}\n" + more
    )
    return pod


def test_a_pods_only_server_in_a_bash_c_string_is_found_and_its_probe_bounds_the_start(
    tmp_path: Path,
) -> None:
    """World10 F6 (a, c): without ``--kube-container`` a pod whose server starts from a ``bash -c`` string
    was exit 65 "none or several run sglang.launch_server"; the string names the server's entry point, so
    the container is the candidate, and the shell reader reads it. And where the launch is unresolved
    (``$POD_INDEX`` unquoted: split at run time), the livenessProbe still bounds the start: it was skipped
    as "no supervisor configuration given (--unit)"."""
    server = "python3 -m sglang.launch_server --model-path /m --moe-runner-backend flashinfer_mxfp4"
    sidecar = "      - name: metrics\n        image: busybox\n        command: [sh, -c, 'sleep infinity']\n"
    pod = _sts(tmp_path, f'exec {server} --nnodes 2 --node-rank "$POD_INDEX"', more=sidecar)
    rc, report, err = preflight_json_in_process({}, "--kube-manifest", str(pod))
    checks = _checks(report)
    assert rc == 78 and checks["moe.backend"]["status"] == "fail", err
    assert checks["host.start_budget"]["status"] == "warn", checks["host.start_budget"]
    pod = _sts(tmp_path, f"{server} --nnodes 2 --node-rank $POD_INDEX")
    rc, report, err = preflight_json_in_process({}, "--kube-manifest", str(pod))
    checks = _checks(report)
    assert rc == 69 and checks["moe.backend"]["status"] == "error", err
    assert "POD_INDEX comes from fieldRef" in checks["moe.backend"]["message"]
    budget = checks["host.start_budget"]
    assert budget["status"] == "warn" and "livenessProbe: 60 s" in budget["message"], budget
    twice = sidecar.replace("metrics", "other").replace("'sleep infinity'", json.dumps(server))
    rc, _, err = preflight_json_in_process({}, "--kube-manifest", str(_sts(tmp_path, server, more=twice)))
    assert rc == 65 and "-c string" in err and "--kube-container" in err, err


def test_a_rolebasedgroups_roles_are_read_as_pod_templates_naming_the_role(tmp_path: Path) -> None:
    """World10 F10: a RoleBasedGroup (sgl-project/rbg, SGLang's multi-role CRD) read as "containers: none"
    (exit 65). Its roles' pod templates are read as a LeaderWorkerSet's are: v1alpha2's
    ``standalonePattern.template`` / ``leaderWorkerPattern.template``, v1alpha1's ``template``; a container
    is named ``ROLE/NAME`` (roles may name theirs alike); the variables the controller injects (RBG_*) are
    known only when it makes the pod; a role whose template the controller patches (or takes from
    another) is not read as written: unresolved, its probes too."""
    server = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--moe-runner-backend"]

    def role(name: str, backend: str, pattern: str | None, **more: Any) -> dict[str, Any]:
        pod = {"spec": {"containers": [{"name": "backend", "image": "i", "command": [*server, backend]}]}}
        pod["spec"]["containers"][0]["livenessProbe"] = {"httpGet": {"port": 8000}}
        body: dict[str, Any] = {"template": pod, **more}
        return {"name": name, "replicas": 1, **({pattern: body} if pattern else body)}

    path = tmp_path / "rbg.yaml"

    def preflight(roles: list[dict[str, Any]], *extra: str) -> tuple[int, dict[str, Any], str]:
        doc = {"apiVersion": "workloads.x-k8s.io/v1alpha2", "kind": "RoleBasedGroup",
               "metadata": {"name": "g"}, "spec": {"roles": roles}}  # fmt: skip
        path.write_text(yaml.safe_dump(doc))
        return preflight_json_in_process({}, "--kube-manifest", str(path), *extra)

    for pattern in ("standalonePattern", "leaderWorkerPattern", None):  # None: v1alpha1's role.template
        rc, report, err = preflight([role("backend", "flashinfer_mxfp4", pattern)])
        assert rc == 78 and _checks(report)["moe.backend"]["status"] == "fail", (pattern, err)
        assert _checks(report)["host.start_budget"]["status"] == "warn"  # its livenessProbe: 30 s
    roles = [role("prefill", "humming", "standalonePattern"), role("decode", "triton", "standalonePattern")]
    rc, _, err = preflight(roles)
    assert rc == 65 and "prefill/backend, decode/backend" in err, err
    rc, report, err = preflight(roles, "--kube-container", "decode/backend")
    assert rc == 78 and "triton" in _checks(report)["moe.backend"]["message"], err
    rank = role("backend", "humming", "standalonePattern")
    rank["standalonePattern"]["template"]["spec"]["containers"][0]["command"] += [
        "--node-rank=$(RBG_ROLE_INDEX)"
    ]
    rank["standalonePattern"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RBG_ROLE_INDEX", "value": "0"}
    ]
    preflight([rank])  # writes the manifest
    spec = load_kube_container(path, None)
    assert "RoleBasedGroup controller" in spec.unresolved["node_rank"], spec.unresolved
    patched = role("backend", "humming", "leaderWorkerPattern", workerTemplatePatch={"spec": {}})
    rc, report, err = preflight([patched])
    checks = _checks(report)
    assert rc == 69 and checks["moe.backend"]["status"] == "error", err
    assert "workerTemplatePatch" in checks["moe.backend"]["message"]
    assert checks["host.start_budget"]["status"] == "error", checks["host.start_budget"]
