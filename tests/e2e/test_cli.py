"""The ``toolmesh`` command as a user drives it: ``up --config`` as a real process, then the
``servers``, ``tools`` and ``import`` subcommands against it, and SIGTERM and a restart of an
instance of its own. The module shares one instance; no test changes the config's servers, and a test
removes the servers it registers when it ends, passed or failed, so each test runs alone, in any order."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_up import (
    SETTLE_SECONDS,
    START_SECONDS,
    Up,
    running,
    settled,
    start,
    statuses,
    stop,
    wait_for,
)
from tests.peers.launch import DEMO_SERVER
from toolmesh.platform import processes
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.e2e

MISSING_COMMAND = "/nonexistent/toolmesh-e2e-missing-command"


def _descendants(pid: int) -> dict[int, str]:
    """Every live process under ``pid``, with its command line."""
    return {child: processes.command_line(child) or "?" for child in processes.children(pid, recursive=True)}


def _cmdline(pid: int) -> str | None:
    """The command line of a live (non-zombie) process, None when it is gone."""
    return processes.command_line(pid)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def config(workdir: Path) -> Path:
    path = workdir / "toolmesh.yaml"
    demo = {"command": sys.executable, "args": [str(DEMO_SERVER), "--transport", "stdio", "--name", "demo"]}
    document = {
        "servers": [{"name": "demo", "transport_type": "STDIO", "connection_config": demo}],
        "mcpServers": {"Broken Server": {"command": MISSING_COMMAND}},
    }
    path.write_text(json.dumps(document))  # JSON is YAML
    return path


CONFIG_SETTLED = {"demo": "CONNECTED", "broken-server": "ERROR"}


@pytest.fixture(scope="module")
def shared_up(workdir: Path, config: Path) -> Iterator[Up]:
    with running(workdir / "data", config, workdir / "up.log") as instance:
        yield instance


@pytest.fixture
def up(shared_up: Up) -> Up:
    """The module's instance with the config's servers settled (no test changes them)."""
    wait_for("the config's servers to settle", settled(shared_up, CONFIG_SETTLED), shared_up, START_SECONDS)
    return shared_up


@pytest.fixture
def registers(up: Up) -> Iterator[list[str]]:
    """The names of the servers a test registers (it lists them first); removed when the test ends."""
    names: list[str] = []
    yield names
    for name in names:
        removed = up.cli("servers", "rm", name, expect=None)
        assert removed.returncode == 0 or "SERVER_NOT_FOUND" in removed.stderr, removed.stderr
    assert not set(names) & set(up.servers())


def test_config_servers_settle_and_up_keeps_running(up: Up) -> None:
    assert up.process.poll() is None

    def proxy_init() -> list[dict[str, Any]]:
        lines = (json.loads(line) for line in up.log.read_text().splitlines() if line.startswith("{"))
        return [r for r in lines if r.get("span") == "proxy.init"]

    (record,) = wait_for("the proxy.init record", proxy_init, up, SETTLE_SECONDS)
    assert "serverCount=2 connected=1 failed=1" in record["msg"]

    # what up started and where, then the config's servers one by one and a summary
    shown = [line.split() for line in up.log.read_text().splitlines() if not line.startswith("{")]
    assert ["✓", "NATS", "started"] in [line[:3] for line in shown]
    assert ["✓", "Postgres", "started"] in [line[:3] for line in shown]
    assert ["console", f"{up.env['TOOLMESH_URL']}/ui/"] in [line[:2] for line in shown]
    assert ["demo", "ok", "CONNECTED", "STDIO"] in [line[:4] for line in shown]
    assert ["broken-server", "failed", "ERROR", "STDIO", "0"] in [line[:5] for line in shown]
    assert ["config:", "1", "of", "2", "servers", "connected,"] in [line[:6] for line in shown]


def test_servers_list_and_show(up: Up) -> None:
    listed = up.cli("servers", "list").stdout.splitlines()
    assert listed[0].split() == ["NAME", "STATUS", "TRANSPORT", "TOOLS", "CONNECTED", "ID"]
    rows = {line.split()[0]: line.split() for line in listed[1:]}
    assert rows["demo"][1:3] == ["CONNECTED", "STDIO"] and int(rows["demo"][3]) > 0
    assert rows["broken-server"][1:4] == ["ERROR", "STDIO", "0"]
    failed = up.cli_json("servers", "list", "--status", "error")["servers"]
    assert {s["status"] for s in failed} == {"ERROR"}
    assert [s["name"] for s in failed if s["name"] in CONFIG_SETTLED] == ["broken-server"]

    shown = up.cli("servers", "show", "broken-server").stdout
    assert "status:" in shown and "ERROR" in shown and MISSING_COMMAND in shown
    by_name = up.cli_json("servers", "show", "demo")
    by_id = up.cli_json("servers", "show", by_name["id"])
    assert (by_id["name"], by_id["connection_config"]) == ("demo", by_name["connection_config"])

    missing = up.cli("servers", "show", "no-such-server", expect=1)
    assert missing.stdout == "" and "SERVER_NOT_FOUND" in missing.stderr


def test_tools_list(up: Up) -> None:
    tools = up.cli_json("tools", "list", "--server", "demo")["tools"]
    names = {t["name"] for t in tools}
    assert {"demo.echo", "demo.add"} <= names
    everywhere = up.cli("tools", "list").stdout.splitlines()
    assert everywhere[0].split()[0] == "TOOL"
    assert {line.split()[0] for line in everywhere[1:] if line.startswith("demo.")} == names


def test_disconnect_connect_history_rm(up: Up, registers: list[str]) -> None:
    registers.append("cycled")
    up.cli("servers", "add", "cycled", "--stdio", sys.executable, str(DEMO_SERVER), "--name", "cycled")
    wait_for("cycled to connect", settled(up, {"cycled": "CONNECTED"}), up, SETTLE_SECONDS)
    assert "DISCONNECTED" in up.cli("servers", "disconnect", "cycled").stdout
    assert up.servers()["cycled"]["status"] == "DISCONNECTED"
    assert up.cli("servers", "connect", "cycled").stdout.startswith("cycled: ")
    wait_for("cycled to reconnect", settled(up, {"cycled": "CONNECTED"}), up, SETTLE_SECONDS)
    history = [line.split()[2] for line in up.cli("servers", "history", "cycled").stdout.splitlines()[1:]]
    assert history[0] == "REGISTERED" and "DISCONNECTED" in history and history.count("CONNECTED") >= 2

    cycled = up.servers()["cycled"]["id"]
    assert up.cli_json("servers", "rm", "cycled") == {"id": cycled, "removed": True}
    assert "cycled" not in up.servers()
    assert "SERVER_NOT_FOUND" in up.cli("servers", "rm", "cycled", expect=1).stderr


def test_import_mcp_servers(up: Up, registers: list[str], tmp_path: Path) -> None:
    registers += ["remote-events", "streamed", "demo-copy"]
    closed = free_port()
    remote = tmp_path / "remote.json"
    remote.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "Remote Events": {"url": f"http://127.0.0.1:{closed}/sse", "headers": {"X-Key": "secret"}},
                    "streamed": {"url": f"http://127.0.0.1:{closed}/mcp"},
                }
            }
        )
    )
    done = up.cli("import", str(remote), "--no-connect")
    assert "added remote-events (renamed from 'Remote Events'): SSE, DISCONNECTED" in done.stdout
    assert "added streamed: HTTP, DISCONNECTED" in done.stdout
    detail = up.cli_json("servers", "show", "remote-events")
    assert (
        detail["connection_config"]["url"].endswith("/sse")
        and detail["connection_config"]["headers"]["X-Key"] != "secret"
    )
    assert up.cli_json("servers", "show", "streamed")["transport_type"] == "HTTP"

    desktop = tmp_path / "claude_desktop_config.json"
    demo = {"command": sys.executable, "args": [str(DEMO_SERVER), "--transport", "stdio", "--name", "copy"]}
    desktop.write_text(json.dumps({"mcpServers": {"Demo Copy": demo, "demo": demo, "empty": {}}}))
    partial = up.cli("import", str(desktop), expect=1)
    assert "added demo-copy (renamed from 'Demo Copy')" in partial.stdout
    assert "imported 1 of 3 servers" in partial.stdout
    assert "failed demo: Server already exists: demo (SERVER_ALREADY_EXISTS)" in partial.stderr
    assert "failed empty:" in partial.stderr
    # import follows the servers it added until they settle, then sums up
    summary = partial.stdout.splitlines()
    header = next(i for i, line in enumerate(summary) if line.split()[:3] == ["SERVER", "RESULT", "STATUS"])
    rows = {line.split()[0]: line.split() for line in summary[header + 1 : header + 4]}
    assert rows["demo-copy"][1:3] == ["ok", "CONNECTED"] and int(rows["demo-copy"][4]) > 0
    assert rows["demo"][1:3] == ["failed", "-"] and rows["empty"][1] == "failed"
    assert up.servers()["demo-copy"]["status"] == "CONNECTED"

    again = json.loads(up.cli("import", str(desktop), "--json", "--wait", "0", expect=1).stdout)
    assert (again["imported"], again["total"]) == (0, 3)
    assert {s["name"]: s["result"] for s in again["servers"]} == {
        "demo-copy": "failed",
        "demo": "failed",
        "empty": "failed",
    }

    yaml_file = tmp_path / "servers.yaml"
    yaml_file.write_text("mcpServers:\n  demo: {command: x}\n")
    assert "not valid JSON" in up.cli("import", str(yaml_file), expect=1).stderr


def test_usage_and_connection_errors(up: Up) -> None:
    assert up.cli("servers", "add", "x", "--sse", "http://h/sse", "--env", "A=1", expect=1).stderr.startswith(
        "toolmesh: --env is for --stdio"
    )
    assert "name:" in up.cli("servers", "add", "Bad Name", "--http", "http://h/mcp", expect=1).stderr
    assert up.cli("servers", "add", "x", expect=2).returncode == 2
    assert up.cli("servers", "frobnicate", expect=2).returncode == 2
    unreachable = up.cli("servers", "list", "--url", f"http://127.0.0.1:{free_port()}", expect=1)
    assert "toolmesh is not running at" in unreachable.stderr
    assert "UNAUTHORIZED" in up.cli("servers", "list", "--token", "wrong", expect=1).stderr


def test_add_from_the_command_line(up: Up, registers: list[str]) -> None:
    registers.append("added")
    added = up.cli(
        "servers", "add", "added", "--description", "by hand", "--env", "DEMO=1",
        "--stdio", sys.executable, str(DEMO_SERVER), "--transport", "stdio", "--name", "added",
    )  # fmt: skip
    assert added.stdout.startswith("registered added (")
    wait_for("added to connect", settled(up, {"added": "CONNECTED"}), up, SETTLE_SECONDS)
    detail = up.cli_json("servers", "show", "added")
    assert detail["description"] == "by hand" and detail["connection_config"]["args"][-2:] == ["--name", "added"]


def test_add_an_openapi_document_from_the_command_line(up: Up, registers: list[str]) -> None:
    assert (
        "--credential is for --openapi"
        in up.cli("servers", "add", "x", "--http", "http://h/mcp", "--credential", "k=v", expect=1).stderr
    )
    registers.append("own-api")
    spec = f"{up.env['TOOLMESH_URL']}/openapi.json"
    added = up.cli("servers", "add", "own-api", "--openapi", spec, "--credential", "bearer=s3cret-value")
    assert added.stdout.startswith("registered own-api (")
    wait_for("own-api to connect", settled(up, {"own-api": "CONNECTED"}), up, SETTLE_SECONDS)
    detail = up.cli_json("servers", "show", "own-api")
    assert detail["transport_type"] == "OPENAPI" and detail["tool_count"] > 10
    assert detail["connection_config"] == {"spec_url": spec, "credentials": {"bearer": "***"}}


def test_sigterm_stops_everything_and_a_restart_keeps_the_servers(tmp_path: Path, config: Path) -> None:
    with running(tmp_path / "data", config, tmp_path / "up.log") as up:
        wait_for("the config's servers to settle", settled(up, CONFIG_SETTLED), up, START_SECONDS)
        up.cli("servers", "add", "extra", "--stdio", sys.executable, str(DEMO_SERVER), "--name", "extra")
        wait_for("extra to connect", settled(up, {"extra": "CONNECTED"}), up, SETTLE_SECONDS)
        _sigterm_then_restart(up, tmp_path, config)


def _sigterm_then_restart(up: Up, folder: Path, config: Path) -> None:
    children = _descendants(up.process.pid)
    assert any("nats-server" in c for c in children.values()), children
    assert any("postgres" in c for c in children.values()), children
    assert any(str(DEMO_SERVER) in c for c in children.values()), children
    before = up.servers()

    assert stop(up) == 0
    left = {pid: cmd for pid, cmd in children.items() if _cmdline(pid) == cmd}
    assert not left, f"processes left behind: {left}"

    again = start(up.data_dir, config, folder / "up-again.log")
    try:
        wait_for(
            "the restart to settle", settled(again, {**CONFIG_SETTLED, "extra": "CONNECTED"}), again, START_SECONDS
        )
        after = again.cli_json("servers", "list")["servers"]
        names = [s["name"] for s in after]
        assert len(names) == len(set(names))
        assert set(names) == set(before) == {"demo", "broken-server", "extra"}
        assert {s["id"] for s in after if s["name"] == "demo"} == {before["demo"]["id"]}
    finally:
        restarted = _descendants(again.process.pid)
        assert stop(again) == 0
    assert not {pid for pid, cmd in restarted.items() if _cmdline(pid) == cmd}


def test_one_process_connects_as_many_servers_as_may_be_registered(tmp_path: Path) -> None:
    """In one process, one session-worker holds every session: with a server limit above the
    per-worker default (50), every registered server connects instead of the 51st going to ERROR
    ("no session-worker has room"), and the banner says which limit binds."""
    port = free_port()
    http = [sys.executable, str(DEMO_SERVER), "--transport", "http", "--port", str(port), "--name", "wide"]
    url = f"http://127.0.0.1:{port}/mcp"
    servers = [
        {"name": f"h{i}", "transport_type": "HTTP", "connection_config": {"base_url": url}, "allow_insecure": True}
        for i in range(55)
    ]
    config = tmp_path / "wide.yaml"
    config.write_text(json.dumps({"servers": servers}))
    peer = processes.spawn(http, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = tmp_path / "up.log"
        with running(
            tmp_path / "data", config, log, MCP_AGGREGATOR_MAX_SERVERS="60", TOOLMESH_NAMESPACE_MAX_SERVERS="60"
        ) as up:
            everyone = {s["name"]: "CONNECTED" for s in servers}

            def all_connected() -> bool:
                now = statuses(up, *everyone)
                assert now == everyone, {name: s for name, s in now.items() if s != "CONNECTED"}
                return True

            wait_for("every server to connect", all_connected, up, START_SECONDS + SETTLE_SECONDS)
            assert "MCP_AGGREGATOR_MAX_SERVERS binds" in log.read_text()
    finally:
        processes.stop_sync(peer, signal.SIGKILL, 0)
