"""deploy/kubernetes: the manifests validate offline against the Kubernetes API schemas (1.30 to 1.37, strict:
unknown fields fail) with `kubernetes-validate`, and the Prometheus Operator resources against their CRD
schemas vendored in tests/data/deploy/ (closed: unknown fields fail). Then the wiring the design relies on.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.support.cli import run_cli
from tests.support.deploy_tools import (
    DEPLOY,
    closed_schema,
    crd_schema,
    load_yaml,
    load_yaml_docs,
    parse_cli,
    serve_config,
)
from tests.support.prerequisite import needs_root
from validator.trusted_files import chain_problems, read_guarded

K8S = DEPLOY / "kubernetes"
VERSIONS = [f"1.{minor}.0" for minor in range(30, 38)]
CORE_FILES = ("deployment.yaml", "service.yaml")
CRDS = {
    "PrometheusRule": "prometheusrule.monitoring.coreos.com_v1.schema.yaml",
    "PodMonitor": "podmonitor.monitoring.coreos.com_v1.excerpt.schema.yaml",
}


def _docs(*files: str) -> list[dict[str, Any]]:
    return [doc for name in files for doc in load_yaml_docs(K8S / name)]


def _kind(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _docs(*CORE_FILES, "podmonitor.yaml", "prometheusrule.yaml") if d["kind"] == kind]
    return doc


def _crd_validate(doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    jsonschema.validate(doc, closed_schema(crd_schema(CRDS[doc["kind"]])))


@pytest.mark.parametrize("version", VERSIONS)
def test_core_manifests_validate_against_the_kubernetes_schema(version: str) -> None:
    docs = _docs(*CORE_FILES)
    assert {d["kind"] for d in docs} == {"Deployment", "ConfigMap", "Service", "PersistentVolumeClaim"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_kubernetes_validate_rejects_a_misspelt_probe_field() -> None:
    deployment = _kind("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][1]["readinessProbe"]["periodSecond"] = 10
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[0], strict=True)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_prometheus_operator_resources_validate_against_their_crd_schema(kind: str) -> None:
    _crd_validate(_kind(kind))


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "intervall"), "30s"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "interval"), "thirty seconds"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "relabelings", 0, "action"), "rename"),
        ("PrometheusRule", ("spec", "groups", 1, "rules", 1, "for"), "5 minutes"),
        ("PrometheusRule", ("spec", "groups", 1, "rules", 1, "severity"), "critical"),
    ],
)
def test_crd_schemas_reject_bad_resources(kind: str, path: tuple[str | int, ...], value: str) -> None:
    doc = _kind(kind)
    node: Any = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        _crd_validate(doc)


def test_prometheusrule_is_the_shipped_rule_file() -> None:
    shipped = load_yaml(DEPLOY / "prometheus" / "spark-validate.rules.yml")
    assert _kind("PrometheusRule")["spec"]["groups"] == shipped["groups"]


def _containers() -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in _kind("Deployment")["spec"]["template"]["spec"]["containers"]}


def _probe_budget_s(probe: dict[str, Any]) -> int:
    return int(probe.get("initialDelaySeconds", 0)) + int(probe["periodSeconds"]) * int(
        probe["failureThreshold"]
    )


def test_server_container_launches_through_preflight_with_the_recipe_and_plugin() -> None:
    server = _containers()["sglang"]
    assert server["command"][:2] == ["spark-validate", "launch"]
    assert server["command"][-4:] == ["--", "python3", "-m", "sglang.launch_server"]
    env = {e["name"]: e["value"] for e in server["env"]}
    assert env["SGLANG_ENABLE_FP8_LM_HEAD"] == "1" and env["SGLANG_PLUGINS"] == "spark_validate"
    args = dict(a.split("=", 1) if "=" in a else (a, "") for a in server["args"])
    assert args["--moe-runner-backend"] == "humming" and args["--speculative-algorithm"] == "NEXTN"
    assert (args["--speculative-num-steps"], args["--speculative-eagle-topk"]) == ("3", "1")
    assert args["--speculative-num-draft-tokens"] == "4"
    assert args["--speculative-draft-model-path"] == args["--model-path"]
    assert "--enable-metrics" in args and "--enable-fp32-lm-head" not in args
    # a 6-minute load plus graph capture and the first TTFT, with margin
    assert _probe_budget_s(server["startupProbe"]) >= 600
    assert "tcpSocket" in server["livenessProbe"] or server["livenessProbe"]["httpGet"]["path"] != "/health"


def test_sidecar_gates_readiness_and_shares_the_evidence_volume() -> None:
    containers = _containers()
    server, sidecar = containers["sglang"], containers["spark-validate"]
    assert sidecar["command"][:2] == ["spark-validate", "serve"]
    flags = dict(a.split("=", 1) for a in sidecar["command"][2:])
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert {p["name"]: p["containerPort"] for p in sidecar["ports"]} == {"metrics": 9464}
    listens = [a.split("=", 1)[1] for a in sidecar["command"] if a.startswith("--listen=")]
    # the pod IP (the kubelet's probes, the scrape) and loopback (kubectl port-forward), same port
    assert all(a.endswith(":9464") for a in listens) and len(listens) == 2
    assert any(not a.startswith("127.") for a in listens) and "127.0.0.1:9464" in listens
    server_env = {e["name"]: e["value"] for e in server["env"]}
    assert flags["--attestation"] == server_env["SPARK_VALIDATE_ATTESTATION"]
    logging_cm = json.loads(_kind("ConfigMap")["data"]["logging.json"])
    assert logging_cm["handlers"]["file"]["filename"] == flags["--log"]
    mounts = {c: {m["name"]: m["mountPath"] for m in containers[c]["volumeMounts"]} for c in containers}
    volumes = {v["name"]: v for v in _kind("Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["shared"]
    assert mounts["sglang"]["shared"] == mounts["spark-validate"]["shared"]
    for path in (flags["--attestation"], flags["--log"]):
        assert path.startswith(mounts["sglang"]["shared"] + "/")


def test_service_and_monitors_select_the_pod_and_name_the_jobs_the_rules_expect() -> None:
    pod_labels = _kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    service, monitor = _kind("Service"), _kind("PodMonitor")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ports = {p["name"] for c in _containers().values() for p in c["ports"]}
    jobs = {}
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in ports
        (relabel,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
        jobs[endpoint["port"]] = relabel["replacement"]
    assert jobs == {"metrics": "spark-validate", "http": "sglang"}


def test_pod_shares_one_pid_namespace_so_the_sidecar_can_judge_the_attestation() -> None:
    """The attestation names its writer by PID and start time; the sidecar looks that PID up in its /proc."""
    assert _kind("Deployment")["spec"]["template"]["spec"]["shareProcessNamespace"] is True


def test_container_commands_are_accepted_by_spark_validates_real_parser() -> None:
    containers = _containers()
    server = containers["sglang"]
    launch = parse_cli([*server["command"][1:], *server["args"]])  # the kubelet appends args to command
    assert launch.command == "launch"
    assert launch.cmd == ["--", *server["command"][-3:], *server["args"]]
    sidecar = containers["spark-validate"]["command"]
    serve = parse_cli(sidecar[1:])
    assert serve.command == "serve" and serve.url == "http://127.0.0.1:30000"
    assert serve.attestation and serve.log and serve.wait_s >= 600
    env = {e["name"]: e for e in containers["spark-validate"]["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # the kubelet expands $(POD_IP) before it execs the command; 127.0.0.2 stands in for the pod's address
    config = serve_config([w.replace("$(POD_IP)", "127.0.0.2") for w in sidecar[1:]])
    # as narrow as the kubelet's probes, the scrape and `kubectl port-forward` (which connects to the
    # pod's localhost) allow: the pod IP and loopback, never 0.0.0.0
    assert config.listen == (("127.0.0.2", 9464), ("127.0.0.1", 9464))
    assert config.schedule.probe  # the acceptance probe gates readiness


def test_parser_check_rejects_an_option_serve_does_not_have() -> None:
    sidecar = _containers()["spark-validate"]["command"]
    with pytest.raises(AssertionError, match="unrecognized arguments: --listen-address"):
        parse_cli([*sidecar[1:], "--listen-address=0.0.0.0:9464"])


def test_refusal_is_the_termination_message_failing_checks_first(tmp_path: Path) -> None:
    """The manifest's launch writes the kubelet's termination file (default path), and what `launch` writes
    there names every blocking check with its finding, within the kubelet's 4096 bytes."""
    server = _containers()["sglang"]
    assert "--termination-log=/dev/termination-log" in server["command"]
    assert server.get("terminationMessagePath", "/dev/termination-log") == "/dev/termination-log"
    log = tmp_path / "termination-log"
    log.write_text("")
    argv = [*server["command"][1:], *server["args"]]
    argv = [f"--termination-log={log}" if a.startswith("--termination-log") else a for a in argv]
    argv = [a.replace("humming", "auto").replace("NEXTN", "EAGLE3") for a in argv]  # two mistakes
    proc = run_cli(*argv, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert proc.returncode == 78, proc.stderr[-1000:]
    message = log.read_bytes()
    assert 0 < len(message) <= 4096
    first, *rest = message.decode().splitlines()
    assert "moe.backend (fail)" in first and "spec.config (fail)" in first
    assert any(line.startswith("moe.backend: MoE runner backend is 'auto'") for line in rest)


def test_humming_cache_outlives_the_pod() -> None:
    volumes = {v["name"]: v for v in _kind("Deployment")["spec"]["template"]["spec"]["volumes"]}
    claim = volumes["humming-cache"]["persistentVolumeClaim"]["claimName"]
    pvc = _kind("PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == claim and pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    env = {e["name"]: e.get("value") for e in _containers()["sglang"]["env"]}
    mounts = {m["name"]: m["mountPath"] for m in _containers()["sglang"]["volumeMounts"]}
    assert mounts["humming-cache"] == env["HUMMING_CACHE_DIR"]


def test_one_replica_keeps_its_only_backend_through_an_inconclusive_recheck() -> None:
    """With one replica, readiness may drop only for a failed check or a dead server: an inconclusive
    re-check (a probe queued behind a long request) keeps the pod in the Service for --unready-after."""
    assert _kind("Deployment")["spec"]["replicas"] == 1
    sidecar = _containers()["spark-validate"]
    serve = parse_cli(sidecar["command"][1:])
    assert serve.unready_after >= 600
    probe = sidecar["readinessProbe"]
    assert probe["httpGet"]["path"] == "/readyz" and probe["timeoutSeconds"] <= 5


def test_both_containers_run_as_the_images_server_user() -> None:
    """The attestation directory is the server user's, mode 0700: the sidecar reads it as that user."""
    pod = _kind("Deployment")["spec"]["template"]["spec"]
    dockerfile = (DEPLOY / "compose" / "Dockerfile").read_text()
    assert f"USER {pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}" in dockerfile
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        assert "runAsUser" not in c.get("securityContext", {}), c["name"]
    images = {c["image"] for c in pod["containers"]}
    compose = load_yaml(DEPLOY / "compose" / "compose.yaml")
    assert images == {compose["services"]["sglang"]["image"]}  # the image deploy/compose/Dockerfile builds


def test_only_the_server_and_the_sidecar_can_write_on_the_attestations_path(tmp_path: Path) -> None:
    """The kubelet makes an emptyDir 0777, where anyone could swap the plugin's 0700 directory for their
    own; the init container makes the volume the server user's and private, and the reader's chain check
    then accepts it. Its command runs here for real on an emptyDir-like directory."""
    pod = _kind("Deployment")["spec"]["template"]["spec"]
    uid, gid = pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    everyone = [*pod["initContainers"], *pod["containers"]]
    mounts = {c["name"]: m for c in everyone for m in c.get("volumeMounts", []) if m["name"] == "shared"}
    assert set(mounts) == {"private-evidence-volume", "sglang", "spark-validate"}
    assert mounts["spark-validate"].get("readOnly") is True and not mounts["sglang"].get("readOnly")
    (init,) = pod["initContainers"]
    caps = init["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    server_env = {e["name"]: e.get("value") for e in _containers()["sglang"]["env"]}
    mount = mounts["sglang"]["mountPath"]
    assert server_env["SPARK_VALIDATE_ATTESTATION"].startswith(mount + "/")

    needs_root(f"chown to the pod's server user (UID {uid}, as its init container does)")
    volume = tmp_path / "empty-dir"
    volume.mkdir()
    os.chmod(volume, 0o777)  # what the kubelet creates
    document = volume / "attestation" / "attestation.json"
    document.parent.mkdir(mode=0o700)
    document.write_text("{}")
    for path in (document.parent, document):
        os.chown(path, uid, gid)  # what the plugin writes, as the server user
    _, before = read_guarded(document, 1024)
    assert any(f"directory {volume} is writable" in p for p in chain_problems(before, {uid}))
    script = init["command"][2].replace(mount, str(volume))
    subprocess.run([*init["command"][:2], script], check=True, timeout=30)
    st = volume.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o700)
    _, after = read_guarded(document, 1024)
    assert chain_problems(after, {uid}) == []
