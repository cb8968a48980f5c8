"""``toolmesh import`` of MCP Registry ``server.json`` entries against a running ``toolmesh up``: an
npm package (``@modelcontextprotocol/server-everything``, run by ``npx``) and a remote (a local
Streamable HTTP peer) reach CONNECTED; an entry missing a required input is refused naming it.

This ``toolmesh up`` runs STDIO servers unsandboxed: npx reads its packages from an npm cache it must
be able to write (npm rewrites cache index entries as it reads them), which a sandboxed child gets
only in its private home, where the package would have to be downloaded first. Its operator hands the
npm cache (offline) and the loopback preload to STDIO servers through ``TOOLMESH_STDIO_BASE_ENV``: a
registry entry may not set variables that change how its runtime runs.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_up import SETTLE_SECONDS, START_SECONDS, Up, answering, settled, wait_for
from tests.peers.everything import PACKAGE, EverythingUnavailable, everything_version, loopback_preload, npx_cache
from tests.peers.launch import demo_args, free_port
from toolmesh.platform import processes
from toolmesh.platform.config import STDIO_BASE_ENV
from toolmesh.platform.polling import wait_until

pytestmark = pytest.mark.e2e

TOKEN = "registry-peer-token"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    try:
        cache, preload = npx_cache(), loopback_preload()
    except EverythingUnavailable as exc:
        pytest.fail(str(exc))
    npm = {"NODE_OPTIONS": f"--require {preload}", "npm_config_cache": str(cache), "npm_config_offline": "true"}
    base_env = ",".join([*STDIO_BASE_ENV, *npm])
    folder = tmp_path_factory.mktemp("registry-import")
    with answering(folder, TOOLMESH_STDIO_SANDBOX="off", TOOLMESH_STDIO_BASE_ENV=base_env, **npm) as running:
        yield running


@pytest.fixture
def registers(up: Up) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        up.cli("servers", "rm", name, expect=None)


@pytest.fixture
def http_peer() -> Iterator[str]:
    """The demo server over Streamable HTTP, answering only ``Authorization: Bearer TOKEN``."""
    port = free_port()
    process = processes.spawn([sys.executable, *demo_args("http", name="remote", token=TOKEN), "--port", str(port)])
    try:
        assert wait_until(lambda: _listening(port), START_SECONDS, interval=0.2), "the demo peer did not listen"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        processes.stop_sync(process, signal.SIGTERM, 10.0)


@contextlib.contextmanager
def serving(body: bytes) -> Iterator[str]:
    """``body`` served at a loopback URL until the block exits."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v0/servers?search=remote-demo"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def everything_entry(version: str) -> dict[str, Any]:
    """The registry entry of server-everything."""
    package = {
        "registryType": "npm",
        "registryBaseUrl": "https://registry.npmjs.org",
        "identifier": PACKAGE,
        "version": version,
        "runtimeHint": "npx",
        "transport": {"type": "stdio"},
        "packageArguments": [{"type": "positional", "value": "stdio"}],
    }
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-10-17/server.schema.json",
        "name": "io.github.modelcontextprotocol/everything",
        "title": "Everything",
        "description": "MCP server that exercises all the features of the MCP protocol",
        "version": version,
        "packages": [package],
    }


def remote_entry(url: str) -> dict[str, Any]:
    auth = {
        "name": "Authorization",
        "value": "Bearer {token}",
        "variables": {"token": {"description": "API token", "isRequired": True, "isSecret": True}},
    }
    return {
        "name": "io.github.example/remote-demo",
        "description": "A remote demo server",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": url, "headers": [auth]}],
    }


def test_an_npm_registry_entry_is_imported_and_connects(up: Up, registers: list[str], tmp_path: Path) -> None:
    try:
        version = everything_version()
    except EverythingUnavailable as exc:
        pytest.fail(str(exc))
    registers.append("everything")
    entry = tmp_path / "server.json"
    entry.write_text(json.dumps(everything_entry(version)))
    done = up.cli("import", str(entry))
    assert "added everything (renamed from 'io.github.modelcontextprotocol/everything'): STDIO" in done.stdout
    assert "imported 1 of 1 servers" in done.stdout
    wait_for("everything to connect", settled(up, {"everything": "CONNECTED"}), up, SETTLE_SECONDS)
    detail = up.cli_json("servers", "show", "everything")
    assert detail["connection_config"]["command"] == "npx"
    assert detail["connection_config"]["args"] == ["-y", f"{PACKAGE}@{version}", "stdio"]
    assert not detail["connection_config"].get("env")
    assert detail["tool_count"] > 0


def test_a_remote_registry_entry_is_imported_with_its_header_and_connects(
    up: Up, registers: list[str], tmp_path: Path, http_peer: str
) -> None:
    registers.append("remote-demo")
    entry = tmp_path / "remote.json"
    entry.write_text(json.dumps({"server": remote_entry(http_peer), "_meta": {}}))
    done = up.cli("import", str(entry), "--input", f"token={TOKEN}")
    assert "added remote-demo (renamed from 'io.github.example/remote-demo'): HTTP" in done.stdout
    wait_for("remote-demo to connect", settled(up, {"remote-demo": "CONNECTED"}), up, SETTLE_SECONDS)
    detail = up.cli_json("servers", "show", "remote-demo")
    assert detail["connection_config"]["headers"]["Authorization"] != f"Bearer {TOKEN}"  # sealed, shown masked


def test_an_entry_missing_a_required_input_is_refused_naming_it(up: Up, tmp_path: Path) -> None:
    page = {"servers": [{"server": remote_entry("http://127.0.0.1:9/mcp")}], "metadata": {"count": 1}}
    with serving(json.dumps(page).encode()) as url:  # a page of the registry API, by URL
        refused = up.cli("import", url, "--name", "never-added", expect=1)
    assert "io.github.example/remote-demo needs a value for token" in refused.stderr
    assert "imported 0 of 1 servers" in refused.stdout
    assert "never-added" not in up.servers()

    unknown = tmp_path / "cargo.json"
    unknown.write_text(
        json.dumps(
            {
                "name": "io.x/rusty",
                "packages": [
                    {"registryType": "cargo", "identifier": "rusty", "version": "1", "transport": {"type": "stdio"}}
                ],
            }
        )
    )
    refused = up.cli("import", str(unknown), expect=1)
    assert "unknown registryType 'cargo' (supported: npm, pypi, oci, nuget)" in refused.stderr
