"""Every STDIO child runs sandboxed: a hostile upstream sees none of toolmesh's secrets nor its siblings.

The session-worker runs as a deployment runs it (a ``toolmesh session-worker`` process with every
setting and secret in its environment, a data dir holding the admin token and credential key); the
hostile peer (tests/peers/hostile_stdio.py) reports what it can read through a tool result.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.harness import REPO_ROOT, RoleProcess, System, eventually, running_system
from tests.peers.launch import DEMO_SERVER, demo_args
from toolmesh.sandbox.homes import homes_dir
from toolmesh.sandbox.runner import bwrap_binary

pytestmark = pytest.mark.integration
HOSTILE = Path(__file__).parents[1] / "peers" / "hostile_stdio.py"
SERVERS = "/api/v1/aggregator/servers"


@asynccontextmanager
async def tcp_listener() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A 127.0.0.1 listener; yields its port and what each connection sent."""
    received: list[bytes] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(64))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], received
    finally:
        server.close()
        await server.wait_closed()


def runtime_roots() -> set[str]:
    """The top-level directories holding the peer's interpreter and script (wherever the checkout lives)."""
    paths = (Path(sys.executable).resolve(), Path(sys.prefix).resolve(), HOSTILE.resolve(), REPO_ROOT.resolve())
    return {path.parts[1] for path in paths if len(path.parts) > 1}


def assert_pid_namespace_hides_the_host(report: dict[str, Any], data_dir: Path) -> None:
    """The child sees its own sandbox's processes only; their PID 1 (bubblewrap) shows no option (they
    came through ``--args``), no host path of the data dir, the homes or bubblewrap's install; the child
    holds no descriptor bubblewrap was given."""
    # Its own sandbox only: bubblewrap's init and the peer itself; no worker, no sibling.
    assert len(report["processes"]) <= 3, report["processes"]
    assert not any(str(DEMO_SERVER) in c or "toolmesh_cli" in c for c in report["processes"].values())
    assert all(str(HOSTILE) in c for c in report["processes"].values())
    init = report["init_cmdline"]
    assert init[:2] == ["./bwrap", "--args"] and init[3] == "--", init
    bwrap_dir = os.path.dirname(str(bwrap_binary()))
    hidden = (str(data_dir), str(homes_dir(data_dir)), bwrap_dir, "--bind", "--ro-bind-fd", "--dir")
    assert not any(word in " ".join(init) for word in hidden), init
    # Its stdio, its own /dev/null and the event loop's: no memfd of options, no bound host path.
    kinds = {target.split(":")[0] for target in report["descriptors"].values()}
    assert kinds <= {"pipe", "socket", "anon_inode", "/dev/null"}, report["descriptors"]


def host_droppings(tag: str, dirs: list[str]) -> list[Path]:
    """Files the hostile peer left in the host's directories."""
    return [path for d in dirs if (path := Path(d) / f"hostile-{tag}").exists()]


async def look_around(api: Any, server: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    response = await api.post("/api/v1/tools/call", json={"name": f"{server}.look_around", "arguments": arguments})
    assert response.status_code == 200, response.text
    text = response.json()["content"][0]["text"]
    return json.loads(text), response.text


async def test_hostile_stdio_child_reads_no_secret_and_sees_no_sibling(nats_url: str, database_url: str) -> None:
    """Attack: a STDIO server reads the data dir, the worker's environment and /proc, lists its sibling
    servers' processes, writes outside /tmp and (network off) opens a TCP connection to the host."""
    env_canary, file_canary = f"env-canary-{secrets.token_hex(8)}", f"file-canary-{secrets.token_hex(8)}"
    tag, write_dirs = secrets.token_hex(6), ["/tmp", "/etc", "/usr", str(REPO_ROOT), "/"]
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        data_dir = system.settings.data_dir
        for name in ("admin-token", "credential.key"):
            (data_dir / name).write_text(file_canary)
        worker = RoleProcess(
            "session-worker",
            system.settings,
            env={"TOOLMESH_DATA_DIR": str(data_dir), "WORKER_CANARY_SECRET": env_canary},
        )
        try:
            sibling = await system.register(
                "sibling", "STDIO", {"command": sys.executable, "args": demo_args("stdio", name="sibling")}
            )
            hostile_config = {"command": sys.executable, "args": [str(HOSTILE)], "sandbox": {"network": False}}
            hostile = await system.register("hostile", "STDIO", hostile_config)
            online = await system.register("online", "STDIO", {"command": sys.executable, "args": [str(HOSTILE)]})
            for created in (sibling, hostile, online):
                await system.wait_connected(created["id"], timeout=60)
            async with tcp_listener() as (port, received):
                arguments = {
                    "worker_pid": worker.pid,
                    "data_dir": str(data_dir),
                    "port": port,
                    "write_dirs": write_dirs,
                    "tag": tag,
                }
                seen, raw = await look_around(system.api, "hostile", arguments)
                online_seen, online_raw = await look_around(system.api, "online", arguments)
                refused_connections = list(received)
            shown = [(await system.api.get(f"{SERVERS}/{s['id']}")).text for s in (sibling, hostile, online)]
        finally:
            assert worker.terminate() == 0
        logged = worker.stderr_text()

    # The peer did run and report (its stderr reached the worker's log).
    assert "own_environ" in logged
    secrets_ = [env_canary, file_canary, system.settings.admin_token, system.settings.credential_key]
    for text in (raw, online_raw, logged, *shown):
        for secret in secrets_:
            assert secret and secret not in text
    for report in (seen, online_seen):
        assert report["data_dir"] == "refused: FileNotFoundError"
        assert report["data_files"] == {}
        assert report["worker_environ"].startswith("refused")
        assert report["worker_root"].startswith("refused")
        assert not any(k.startswith(("TOOLMESH_", "MCP_", "WORKER_CANARY")) for k in report["own_environ"])
        assert_pid_namespace_hides_the_host(report, data_dir)
        writes = report["writes"]
        assert writes.pop(f"/tmp/hostile-{tag}") == "written"
        assert all(result.startswith("refused") for result in writes.values()), writes
        visible = {"usr", "bin", "lib", "lib64", "sbin", "etc", "proc", "dev", "tmp", "home", "root", *runtime_roots()}
        assert set(report["root"]) <= visible, report["root"]  # system dirs, its runtime, its own /tmp
    assert not host_droppings(tag, write_dirs)  # its /tmp was its own, the rest read-only
    assert seen["tcp"].startswith("refused") and online_seen["tcp"] == "connected"
    assert refused_connections == [b"hostile\n"]  # the network-on server's one connection only


async def test_without_a_working_sandbox_stdio_servers_are_refused(nats_url: str, database_url: str) -> None:
    """Rule: where bubblewrap fails its probe, a STDIO server is refused (nothing runs) unless the
    operator turned the sandbox off."""
    marker = f"refused-{secrets.token_hex(4)}"
    async with running_system(nats_url, database_url, stdio_sandbox_bwrap="/bin/false") as system:
        created = await system.register(
            "unsandboxed", "STDIO", {"command": sys.executable, "args": demo_args("stdio", name=marker)}
        )
        failed = await system.wait_status(created["id"], "ERROR")
    assert "STDIO servers are refused: no sandbox is available" in failed["error_message"]
    assert "TOOLMESH_STDIO_SANDBOX=off" in failed["error_message"]


async def test_declared_paths_may_not_expose_the_data_dir(nats_url: str, database_url: str) -> None:
    """Attack: a registration declares the data dir (or a directory holding it) as a path to see."""
    async with running_system(nats_url, database_url) as system:
        config = {
            "command": sys.executable,
            "args": [str(HOSTILE)],
            "sandbox": {"paths_read_only": [str(system.settings.data_dir.parent)]},
        }
        created = await system.register("peeker", "STDIO", config)
        failed = await system.wait_status(created["id"], "ERROR")
    assert "holds or is inside toolmesh's data directory" in failed["error_message"]


SWAPS = 'cd "$1"; while :; do ln -sfn "$2" l.a; mv -T l.a l; ln -sfn "$3" l.b; mv -T l.b l; done'
"""A process turning ``l`` between the data dir and a harmless directory as fast as it can."""
RACE_CONNECTS = 16


def plant_canary(data_dir: Path) -> str:
    """A secret file in the data dir, as readable as for a child with toolmesh's own uid (toolmesh run by
    an ordinary user); its content."""
    canary = f"race-canary-{secrets.token_hex(8)}"
    (data_dir / "race-canary").write_text(canary)
    data_dir.chmod(0o755)
    (data_dir / "race-canary").chmod(0o644)
    return canary


@asynccontextmanager
async def swapping_link(target: Path) -> AsyncIterator[Path]:
    """A symlink that a process (``SWAPS``) keeps turning between ``target`` and a harmless directory
    holding only ``harmless``, while the block runs."""
    shared = Path(tempfile.mkdtemp(prefix="toolmesh-race-"))
    harmless = shared / "ok"
    harmless.mkdir()
    (harmless / "harmless").write_text("nothing")
    swapper = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", SWAPS, "swap", str(shared), str(target), str(harmless)
    )
    try:
        yield shared / "l"
    finally:
        swapper.kill()
        await swapper.wait()
        shutil.rmtree(shared, ignore_errors=True)  # an ln or mv of the killed loop may still be finishing


async def reconnect_and_read(
    system: System, server_id: str, link: Path, canary: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Connect the reader ``RACE_CONNECTS`` times; what each connect that ran saw of ``link`` (never the
    canary), and each refusal's message."""
    seen: list[dict[str, Any]] = []
    refused: list[str] = []
    async with tcp_listener() as (port, _received):
        for _ in range(RACE_CONNECTS):

            async def settled() -> dict[str, Any] | None:
                detail = await system.server(server_id)
                connected = detail["status"] == "CONNECTED" and detail["tool_count"] > 0
                return detail if connected or detail["status"] == "ERROR" else None

            detail = await eventually(settled, timeout=60, what="the reader to connect or fail")
            if detail["status"] == "ERROR":
                refused.append(detail["error_message"])
            else:
                arguments = {"worker_pid": 1, "data_dir": str(link), "port": port}
                report, raw = await look_around(system.api, "reader", {**arguments, "write_dirs": [], "tag": "r"})
                seen.append(report)
                assert canary not in raw
            response = await system.api.post(f"{SERVERS}/{server_id}/disconnect", json={"force": True})
            assert response.status_code == 200, response.text
            await system.wait_status(server_id, "DISCONNECTED")
            response = await system.api.post(f"{SERVERS}/{server_id}/connect")
            assert response.status_code == 200, response.text
    return seen, refused


async def test_a_symlink_swapped_between_check_and_bind_never_mounts_the_data_dir(
    nats_url: str, database_url: str
) -> None:
    """Attack: check-then-use race. A server declares a path that another process keeps turning from a
    harmless directory to the data dir and back; the worker connects it again and again. Whatever it is
    when checked must be what is mounted: no connect may show the data dir's files."""
    async with running_system(nats_url, database_url) as system:
        canary = plant_canary(system.settings.data_dir)
        async with swapping_link(system.settings.data_dir) as link:
            config = {"command": sys.executable, "args": [str(HOSTILE)], "sandbox": {"paths_read_only": [str(link)]}}
            created = await system.register("reader", "STDIO", config)
            seen, refused = await reconnect_and_read(system, created["id"], link, canary)
    assert seen, refused  # some connects ran the reader: the race was run
    for report in seen:
        assert "race-canary" not in report["data_files"]
        assert report["data_dir"] == ["harmless"], report  # what was checked is what was mounted
    # A connect that opened the data dir is refused (the swap may also land between the open and its
    # re-check, refused as a path that changed): only the sandbox's own refusals, never another error.
    assert all("sandbox refused" in message for message in refused), refused
