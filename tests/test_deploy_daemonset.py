"""deploy/kubernetes/daemonset.yaml: the per-node sidecar validates against the Kubernetes API schemas (1.30
to 1.37, strict), its command is one spark-validate's real parser accepts, and it is wired to see the
node's server processes and network (hostPID, hostNetwork) as the server's own user."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.support.deploy_tools import DEPLOY, load_yaml, load_yaml_docs, parse_cli, serve_config

K8S = DEPLOY / "kubernetes"
VERSIONS = [f"1.{minor}.0" for minor in range(30, 38)]


def _daemonset() -> dict[str, Any]:
    (doc,) = load_yaml_docs(K8S / "daemonset.yaml")
    return doc


@pytest.mark.parametrize("version", VERSIONS)
def test_daemonset_validates_against_the_kubernetes_schema(version: str) -> None:
    kubernetes_validate.validate(_daemonset(), version, strict=True)


def test_it_sees_the_nodes_processes_and_network_as_the_servers_user() -> None:
    pod = _daemonset()["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["hostNetwork"] is True
    server_pod = next(d for d in load_yaml_docs(K8S / "deployment.yaml") if d["kind"] == "Deployment")
    server_ctx = server_pod["spec"]["template"]["spec"]["securityContext"]
    assert pod["securityContext"]["runAsUser"] == server_ctx["runAsUser"]  # may read that server's environ


def test_its_command_is_serve_without_url_on_the_nodes_address() -> None:
    (container,) = _daemonset()["spec"]["template"]["spec"]["containers"]
    argv = [
        w.replace("$(NODE_NAME)", "spark-a").replace("$(HOST_IP)", "127.0.0.2") for w in container["command"]
    ]
    args = parse_cli(argv[1:])
    assert args.command == "serve" and args.url is None and args.node == "spark-a"
    config = serve_config(argv[1:])
    assert config.listen == (("127.0.0.2", 9464),)
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}
    assert container["readinessProbe"]["httpGet"]["port"] == container["ports"][0]["containerPort"] == 9464
    assert load_yaml(K8S / "daemonset.yaml")["kind"] == "DaemonSet"
