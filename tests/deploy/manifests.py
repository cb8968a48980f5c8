"""Reading deploy/: the Kubernetes documents by kind, the compose services, and what the code defines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices

from toolmesh.platform import metrics
from toolmesh.platform.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose.yaml"
METRIC_FACTORIES = {"create_histogram", "create_counter", "create_gauge", "create_observable_gauge"}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def k8s_documents() -> list[dict[str, Any]]:
    """Every document of every file in deploy/k8s."""
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    """The Kubernetes documents of one kind, by name."""
    return {doc["metadata"]["name"]: doc for doc in k8s_documents() if doc["kind"] == kind}


def compose() -> dict[str, Any]:
    """deploy/compose.yaml (YAML merge keys resolved)."""
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a Deployment's pod template."""
    spec: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return spec


def settings_env_names() -> set[str]:
    """Every environment variable the Settings class reads (upper case)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice.upper() for choice in alias.choices if isinstance(choice, str))
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def defined_metric_names() -> set[str]:
    """The series names the metrics module creates (histograms with their _bucket/_sum/_count)."""
    tree = ast.parse(Path(metrics.__file__).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in METRIC_FACTORIES
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            name = str(node.args[0].value)
            names.add(name)
            if node.func.attr == "create_histogram":
                names.update(name + suffix for suffix in HISTOGRAM_SERIES)
    return names


def env_names_set(container: dict[str, Any]) -> Iterator[str]:
    """Names of the variables a container sets itself (``env``)."""
    for entry in container.get("env", []):
        yield entry["name"]
