"""Client commands of the CLI import only what they use: never the server side.

Each command runs through the real entry point in a fresh interpreter, against an address where
nothing listens, and reports which modules it had loaded by the time it answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers.launch import free_port

SERVER_SIDE = (
    "onnxruntime",
    "numpy",
    "tokenizers",
    "bm25s",
    "qdrant_client",
    "qdrant_edge",
    "fastapi",
    "uvicorn",
    "nats",
    "asyncpg",
    "mcp",
    "opentelemetry",
    "toolmesh_gateway",
    "toolmesh_session_worker",
    "toolmesh_projector",
    "toolmesh_classifier",
    "toolmesh_health",
    "toolmesh.embed",
    "toolmesh.index",
    "toolmesh.platform.runtime",
    "toolmesh.platform.telemetry",
)

PROBE = """
import json, sys
from toolmesh_cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, check=False)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def _server_side(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == s or m.startswith(s + ".") for s in SERVER_SIDE))


@pytest.fixture(scope="module")
def nowhere() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize(
    "argv",
    [
        ["servers", "list"],
        ["servers", "add", "x", "--stdio", "true"],
        ["servers", "show", "x"],
        ["tools", "list"],
        ["search", "echo a message"],
        ["keys", "list"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_client_commands_do_not_import_the_server_side(argv: list[str], nowhere: str) -> None:
    code, modules = _loaded(*argv, "--url", nowhere, "--token", "t")
    assert code == 1  # it ran as far as calling the API, which is not there
    assert "httpx" in modules
    assert _server_side(modules) == []


def test_import_does_not_import_the_server_side(nowhere: str, tmp_path: Path) -> None:
    file = tmp_path / "desktop.json"
    file.write_text(json.dumps({"mcpServers": {"files": {"command": "true"}}}))
    code, modules = _loaded("import", str(file), "--url", nowhere, "--token", "t")
    assert code == 1
    assert _server_side(modules) == []


def test_help_imports_no_command() -> None:
    code, modules = _loaded("--help")
    assert code == 0
    assert not {m for m in modules if m.startswith("toolmesh_cli.") and m not in {"toolmesh_cli.main"}} - {
        "toolmesh_cli.datadir",
        "toolmesh_cli.errors",
    }
    assert "httpx" not in modules and _server_side(modules) == []


def test_up_still_loads_the_roles() -> None:
    code, modules = _loaded("up", "--help")
    assert code == 0
    assert "toolmesh_cli.roles" in modules


ROLE_PROBE = """
import json, sys
from toolmesh_cli.roles import load_role
load_role(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def _role_modules(role: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", ROLE_PROBE, role], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("role", ["session-worker", "health-worker", "projector"])
def test_a_worker_role_loads_no_web_stack_model_or_index(role: str) -> None:
    heavy = {"fastapi", "onnxruntime", "numpy", "qdrant_client", "qdrant_edge", "bm25s", "toolmesh_gateway"}
    loaded = {m.split(".")[0] for m in _role_modules(role)}
    assert "nats" in loaded
    assert not loaded & heavy


def test_the_gateway_loads_qdrant_client_only_when_it_is_configured() -> None:
    assert "qdrant_client" not in {m.split(".")[0] for m in _role_modules("gateway")}


def test_every_role_is_a_command() -> None:
    from toolmesh_cli.main import COMMANDS, ROLES
    from toolmesh_cli.roles import ROLES as RUNNABLE

    assert set(ROLES) == set(RUNNABLE)
    assert set(RUNNABLE) <= set(COMMANDS)
