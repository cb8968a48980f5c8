"""deploy/: the compose file and the Kubernetes manifests hold together and match the code.

Pure file checks (no Docker, no cluster): every document parses; every role runs from the one
image; every Deployment has probes on endpoints the code serves and the deployment contract's
requests and limits; HPAs and PodDisruptionBudgets point at real Deployments; the alert rules read
only metrics the code exports; every variable the files set is one the Settings class reads.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.deploy.manifests import (
    COMPOSE,
    DEPLOY,
    K8S,
    compose,
    containers,
    defined_metric_names,
    env_names_set,
    k8s_documents,
    of_kind,
    settings_env_names,
)
from tests.deploy.promql import metric_names
from toolmesh_cli.roles import ROLES
from toolmesh_gateway.routers.aggregator import probes

pytestmark = pytest.mark.deploy

# The system contract's Deployment Contract, "Resource Requirements".
CONTRACT_REQUESTS = {"cpu": "500m", "memory": "512Mi"}
CONTRACT_LIMITS = {"cpu": "2", "memory": "2Gi"}
# The system contract's four alert thresholds, each with a warning and a critical rule.
CONTRACT_ALERTS = {
    "ToolmeshConnectedServersLow": ("warning", "< 0.8"),
    "ToolmeshConnectedServersCritical": ("critical", "< 0.5"),
    "ToolmeshRoutingLatencyHigh": ("warning", "> 0.075"),
    "ToolmeshRoutingLatencyCritical": ("critical", "> 0.1"),
    "ToolmeshHealthCheckFailures": ("warning", 'status="degraded"'),
    "ToolmeshHealthCheckFailuresCritical": ("critical", 'status="error"'),
    "ToolmeshUnclassifiedTools": ("warning", "> 0.2"),
    "ToolmeshUnclassifiedToolsCritical": ("critical", "> 0.5"),
}


def deployment_of(role: str) -> dict[str, Any]:
    return of_kind("Deployment")[f"toolmesh-{role}"]


def test_every_deploy_file_parses() -> None:
    files = [COMPOSE, *K8S.glob("*.yaml")]
    assert len(files) >= 4
    for path in files:
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        assert docs, path
        if path.parent == K8S:
            assert all({"apiVersion", "kind", "metadata"} <= doc.keys() for doc in docs), path


def test_every_role_has_a_deployment_running_the_one_image() -> None:
    deployments = of_kind("Deployment")
    assert set(deployments) == {f"toolmesh-{role}" for role in ROLES}
    images = set()
    for role in ROLES:
        (container,) = containers(deployment_of(role))
        assert container["args"] == [role]
        images.add(container["image"])
    assert len(images) == 1


def test_deployment_selectors_match_their_pod_labels() -> None:
    for name, deployment in of_kind("Deployment").items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), name


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_role_has_the_contract_requests_and_limits(role: str) -> None:
    (container,) = containers(deployment_of(role))
    assert container["resources"]["requests"] == CONTRACT_REQUESTS
    assert container["resources"]["limits"] == CONTRACT_LIMITS


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_role_has_probes_on_a_port_it_declares(role: str) -> None:
    (container,) = containers(deployment_of(role))
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] in ports, (role, probe)
        if role == "gateway":
            assert ports[get["port"]] == 8081
            assert get["path"] in {route.path for route in probes.routes}  # type: ignore[attr-defined]
        else:
            # The other roles' /livez is the metrics endpoint's (tests/deploy/test_role_endpoint.py).
            config = of_kind("ConfigMap")["toolmesh"]["data"]
            assert ports[get["port"]] == int(config["TOOLMESH_METRICS_PORT"])
            assert get["path"] == "/livez"


def test_gateway_service_targets_the_gateway_pods() -> None:
    service = of_kind("Service")["toolmesh-gateway"]
    labels = deployment_of("gateway")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (container,) = containers(deployment_of("gateway"))
    names = {port["name"] for port in container["ports"]}
    assert all(port["targetPort"] in names for port in service["spec"]["ports"])


def test_hpas_scale_the_gateway_and_session_worker_deployments() -> None:
    hpas = of_kind("HorizontalPodAutoscaler")
    deployments = of_kind("Deployment")
    targets = {hpa["spec"]["scaleTargetRef"]["name"] for hpa in hpas.values()}
    assert targets == {"toolmesh-gateway", "toolmesh-session-worker"}
    for hpa in hpas.values():
        ref = hpa["spec"]["scaleTargetRef"]
        assert ref["kind"] == "Deployment" and ref["name"] in deployments
        assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
        # A Deployment the HPA owns leaves replicas to it (an apply would otherwise reset them).
        assert "replicas" not in deployments[ref["name"]]["spec"]


def test_every_deployment_has_a_disruption_budget_selecting_its_pods() -> None:
    budgets = of_kind("PodDisruptionBudget")
    covered = set()
    for name, budget in budgets.items():
        if name == "nats":  # the NATS StatefulSet's (nats.yaml)
            continue
        selector = budget["spec"]["selector"]["matchLabels"]
        matched = [
            deployment
            for deployment, doc in of_kind("Deployment").items()
            if selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matched) == 1, name
        covered.update(matched)
    assert covered == set(of_kind("Deployment"))


def test_the_credential_key_and_admin_token_come_from_a_secret() -> None:
    for role in ROLES:
        (container,) = containers(deployment_of(role))
        from_secret = {e["name"] for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
        assert "MCP_CREDENTIAL_KEY" in from_secret, role
        if role == "gateway":
            assert "TOOLMESH_ADMIN_TOKEN" in from_secret
    plain = [doc for doc in k8s_documents() if doc["kind"] in {"ConfigMap", "Secret"}]
    for doc in plain:
        assert not {"MCP_CREDENTIAL_KEY", "TOOLMESH_ADMIN_TOKEN"} & set(doc.get("data", {})), doc["metadata"]


def test_the_alert_rules_cover_the_contract_thresholds_with_exported_metrics() -> None:
    (rule_doc,) = of_kind("PrometheusRule").values()
    rules = {rule["alert"]: rule for group in rule_doc["spec"]["groups"] for rule in group["rules"]}
    assert set(rules) == set(CONTRACT_ALERTS)
    defined = defined_metric_names()
    for name, (severity, threshold) in CONTRACT_ALERTS.items():
        expr = rules[name]["expr"]
        assert rules[name]["labels"]["severity"] == severity
        assert threshold in expr, name
        used = metric_names(expr)
        assert used, name
        assert used <= defined, (name, used - defined)


def test_compose_runs_every_role_with_two_gateways_and_two_session_workers() -> None:
    services = compose()["services"]
    assert {"nats-1", "nats-2", "nats-3", "postgres", "qdrant"} <= set(services)
    roles = {name: service for name, service in services.items() if "build" in service}
    assert {service["command"][0] for service in roles.values()} == set(ROLES)
    for role in ("gateway", "session-worker"):
        assert services[role]["deploy"]["replicas"] == 2
    config = DEPLOY / "nats" / "nats.conf"
    assert "jetstream: enabled" in config.read_text()


NATS_SERVERS = ("nats-1", "nats-2", "nats-3")


def test_compose_runs_a_3_node_jetstream_cluster_that_every_role_knows_with_3_replicas() -> None:
    services = compose()["services"]
    cluster_conf = (DEPLOY / "nats" / "cluster.conf").read_text()
    assert 'include "nats.conf"' in cluster_conf and "routes: $NATS_ROUTES" in cluster_conf
    names, stores = set(), set()
    for name in NATS_SERVERS:
        server = services[name]
        assert server["command"][:2] == ["-c", "/etc/nats/cluster.conf"]
        mounted = {str(volume).split(":")[0] for volume in server["volumes"]}
        assert {"./nats/nats.conf", "./nats/cluster.conf"} <= mounted
        stores.update(volume for volume in mounted if not volume.startswith("./"))
        names.add(server["environment"]["NATS_SERVER_NAME"])
        assert server["environment"]["NATS_ROUTES"] == "[" + ", ".join(f"nats://{n}:6222" for n in NATS_SERVERS) + "]"
    assert names == set(NATS_SERVERS) and len(stores) == 3  # each its own name and store
    for service in services.values():
        if "build" in service:
            env = service["environment"]
            assert env["TOOLMESH_NATS_URL"].split(",") == [f"nats://{n}:4222" for n in NATS_SERVERS]
            assert env["TOOLMESH_NATS_REPLICAS"] == "3"


def test_kubernetes_runs_a_3_node_jetstream_cluster_that_every_role_knows_with_3_replicas() -> None:
    nats = of_kind("StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == 3 and nats["spec"]["serviceName"] == "nats"
    (container,) = containers(nats)
    assert container["args"][:2] == ["-c", "/etc/nats/cluster.conf"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NATS_SERVER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    pods = [f"nats-{n}.nats" for n in range(3)]
    assert env["NATS_ROUTES"]["value"] == "[" + ", ".join(f"nats://{pod}:6222" for pod in pods) + "]"
    config = of_kind("ConfigMap")["toolmesh"]["data"]
    assert config["TOOLMESH_NATS_URL"].split(",") == [f"nats://{pod}:4222" for pod in pods]
    assert config["TOOLMESH_NATS_REPLICAS"] == "3"
    assert of_kind("PodDisruptionBudget")["nats"]["spec"]["maxUnavailable"] == 1


def test_every_variable_the_files_set_is_one_the_code_reads() -> None:
    read = settings_env_names()
    set_by_files: set[str] = set()
    for service in compose()["services"].values():
        if "build" in service:  # a toolmesh role (the backends' own variables are theirs)
            set_by_files.update(service["environment"])
    for deployment in of_kind("Deployment").values():
        for container in containers(deployment):
            set_by_files.update(env_names_set(container))
    set_by_files.update(of_kind("ConfigMap")["toolmesh"]["data"])
    assert set_by_files
    assert {name.upper() for name in set_by_files} <= read, {name.upper() for name in set_by_files} - read


def test_every_scrape_sends_the_metrics_token_every_role_reads_from_the_same_secret() -> None:
    """/metrics needs a token: the PodMonitor sends the Secret's TOOLMESH_METRICS_TOKEN as a bearer
    token on every endpoint, and every role reads that same key into TOOLMESH_METRICS_TOKEN."""
    secret = {"name": "toolmesh", "key": "TOOLMESH_METRICS_TOKEN"}
    endpoints = of_kind("PodMonitor")["toolmesh"]["spec"]["podMetricsEndpoints"]
    assert {e["port"] for e in endpoints} == {"http", "metrics"}
    for endpoint in endpoints:
        assert endpoint["authorization"] == {"type": "Bearer", "credentials": secret}, endpoint
    for role in ROLES:
        (container,) = containers(deployment_of(role))
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["TOOLMESH_METRICS_TOKEN"]["valueFrom"] == {"secretKeyRef": secret}, role
