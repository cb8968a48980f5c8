"""The upstream session adapter against real MCP peers over STDIO, SSE and Streamable HTTP."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import httpx2
import mcp_types
import pytest

from tests.peers.everything import EverythingUnavailable, install_everything, launch_everything
from tests.peers.launch import DEMO_SERVER, PeerInfo, launch_peer
from toolmesh.egress.policy import EgressPolicy
from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_session_worker.upstream import (
    OpeningOptions,
    UpstreamError,
    UpstreamSession,
    UpstreamTimeout,
    open_session,
)

pytestmark = pytest.mark.integration

TRANSPORTS = ["stdio", "sse", "http"]
CONNECT_TIMEOUT = 30.0
LOOPBACK_PEERS = EgressPolicy(private=True)
"""The peers listen on 127.0.0.1: the policy of a server an owner or admin registered."""


class Events:
    """Records the session callbacks."""

    def __init__(self) -> None:
        self.lost: list[str] = []
        self.lost_event = anyio.Event()
        self.tools_changed = anyio.Event()

    async def on_lost(self, reason: str) -> None:
        self.lost.append(reason)
        self.lost_event.set()

    async def on_tools_changed(self) -> None:
        self.tools_changed.set()


async def connect(peer: PeerInfo, events: Events | None = None, name: str = "demo") -> UpstreamSession:
    events = events or Events()
    return await open_session(
        name,
        peer.transport_type,
        peer.config,
        OpeningOptions(
            connect_timeout=CONNECT_TIMEOUT,
            on_tools_changed=events.on_tools_changed,
            on_lost=events.on_lost,
            egress=LOOPBACK_PEERS,
        ),
    )


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, mcp_types.TextContent))


@pytest.fixture(scope="module")
def everything_installed() -> None:
    try:
        install_everything()
    except EverythingUnavailable as exc:
        pytest.skip(str(exc))


PeerFactory = Callable[[str], AbstractAsyncContextManager[PeerInfo]]
PEERS: dict[str, PeerFactory] = {"demo": lambda t: launch_peer(t), "everything": launch_everything}


@pytest.fixture(params=[(kind, t) for kind in PEERS for t in TRANSPORTS], ids=lambda p: f"{p[0]}-{p[1]}")
async def any_peer(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, PeerInfo]]:
    kind, transport = request.param
    if kind == "everything":
        request.getfixturevalue("everything_installed")
    async with PEERS[kind](transport) as peer:
        yield kind, peer


@pytest.fixture(params=TRANSPORTS)
async def demo(request: pytest.FixtureRequest) -> AsyncIterator[PeerInfo]:
    async with launch_peer(request.param) as peer:
        yield peer


# -- every peer, every transport ----------------------------------------------------------------


async def test_open_list_and_echo(any_peer: tuple[str, PeerInfo]) -> None:
    kind, peer = any_peer
    async with await connect(peer, name=kind) as session:
        assert session.alive
        names = {tool.name for tool in await session.list_tools()}
        assert "echo" in names
        key = "message" if kind == "everything" else "text"
        result = await session.call_tool("echo", {key: "hi"}, timeout=10)
        assert not result.is_error
        assert text_of(result).endswith("hi")
    assert not session.alive


async def test_fifty_concurrent_calls_all_answered_correctly(any_peer: tuple[str, PeerInfo]) -> None:
    kind, peer = any_peer
    key = "message" if kind == "everything" else "text"
    answers: dict[int, str] = {}
    async with await connect(peer, name=kind) as session:

        async def one(index: int) -> None:
            answers[index] = text_of(await session.call_tool("echo", {key: f"n{index}"}, timeout=30))

        async with anyio.create_task_group() as tg:
            for index in range(50):
                tg.start_soon(one, index)
        assert session.pending == 0
    assert len(answers) == 50
    assert all(text.endswith(f"n{index}") for index, text in answers.items())


async def test_progress_is_forwarded(any_peer: tuple[str, PeerInfo]) -> None:
    kind, peer = any_peer
    seen: list[tuple[float, float | None]] = []
    all_seen = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))
        if len(seen) == 3:
            all_seen.set()

    async with await connect(peer, name=kind) as session:
        if kind == "everything":
            name, args = "trigger-long-running-operation", {"duration": 0.3, "steps": 3}
        else:
            name, args = "progress", {"steps": 3}
        result = await session.call_tool(name, args, timeout=20, progress=progress)
        assert not result.is_error
        with anyio.fail_after(5):
            await all_seen.wait()
    assert seen[-1] == (3.0, 3.0)


async def test_timeout_raises_and_session_stays_usable(any_peer: tuple[str, PeerInfo]) -> None:
    kind, peer = any_peer
    async with await connect(peer, name=kind) as session:
        if kind == "everything":
            name, args = "trigger-long-running-operation", {"duration": 30, "steps": 3}
        else:
            name, args = "slow", {"seconds": 30}
        with pytest.raises(UpstreamTimeout):
            await session.call_tool(name, args, timeout=0.5)
        assert session.alive
        assert session.pending == 0
        await session.ping(timeout=10)


# -- the demo peer: behaviour only it can show ------------------------------------------------


async def test_timeout_cancels_the_request_upstream(demo: PeerInfo) -> None:
    async with await connect(demo) as session:
        with pytest.raises(UpstreamTimeout):
            await session.call_tool("slow", {"seconds": 30}, timeout=0.5)

        async def cancelled() -> dict[str, int] | None:
            stats = (await session.call_tool("stats", {}, timeout=10)).structured_content or {}
            return stats if stats.get("slow_cancelled") == 1 else None

        stats = await poll_until(cancelled, 10)
        assert stats is not None and stats["slow_completed"] == 0


async def test_tool_error_is_a_result_not_an_exception(demo: PeerInfo) -> None:
    async with await connect(demo) as session:
        result = await session.call_tool("fail", {"message": "boom"}, timeout=10)
        assert result.is_error
        assert "boom" in text_of(result)
        assert session.alive


async def test_crash_mid_call_raises_and_fires_on_lost(demo: PeerInfo) -> None:
    events = Events()
    session = await connect(demo, events)
    try:
        with pytest.raises(UpstreamError) as caught:
            await session.call_tool("crash", {}, timeout=20)
        assert not isinstance(caught.value, UpstreamTimeout)
        assert "connection lost while calling crash" in str(caught.value)
        with anyio.fail_after(20):
            await events.lost_event.wait()
        assert not session.alive
        assert len(events.lost) == 1
        with pytest.raises(UpstreamError):
            await session.call_tool("echo", {"text": "x"}, timeout=5)
    finally:
        await session.close()
    assert len(events.lost) == 1


async def test_list_changed_fires_on_tools_changed(demo: PeerInfo) -> None:
    events = Events()
    async with await connect(demo, events) as session:
        await session.call_tool("add_tool", {"name": "fresh_tool"}, timeout=10)
        with anyio.fail_after(10):
            await events.tools_changed.wait()
        assert "fresh_tool" in {tool.name for tool in await session.list_tools()}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("page_size", [0, 100])
async def test_thousand_tools_listed(transport: str, page_size: int) -> None:
    async with launch_peer(transport, tools=1000, page_size=page_size) as peer:
        async with await connect(peer) as session:
            tools = await session.list_tools()
    names = {tool.name for tool in tools}
    assert len(tools) == len(names)
    assert len([name for name in names if name.startswith("tool_")]) == 1000
    assert {"tool_0000", "tool_0999", "echo"} <= names


async def test_close_kills_the_stdio_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = f'sleep 600 & echo $! > "{pid_file}"; exec "{sys.executable}" "{DEMO_SERVER}" --transport stdio'
    events = Events()
    session = await open_session(
        "group",
        "STDIO",
        {"command": "/bin/sh", "args": ["-c", script], "env": {}},
        OpeningOptions(
            connect_timeout=CONNECT_TIMEOUT,
            on_tools_changed=None,
            on_lost=events.on_lost,
        ),
    )
    leader = session.pid
    assert leader is not None
    grandchild = int(pid_file.read_text())
    assert os.getpgid(grandchild) == leader
    await session.close()
    await session.close()  # idempotent
    for pid in (leader, grandchild):
        assert await _gone_within(pid, 5.0), f"pid {pid} survived close()"
    assert events.lost == []  # a close is not a loss


async def test_connect_failure_is_readable_and_keeps_stderr_out() -> None:
    """The exit code explains a failed connect; the child's stderr is in neither wording (it goes to the log)."""
    exit_3 = "import sys; print('bad-secret-line', file=sys.stderr); sys.exit(3)"
    with pytest.raises(UpstreamError, match=r"process exited with code 3") as raised:
        await open_session(
            "broken",
            "STDIO",
            {"command": sys.executable, "args": ["-c", exit_3]},
            OpeningOptions(
                connect_timeout=10,
                on_tools_changed=None,
                on_lost=None,
            ),
        )
    assert "process exited with code 3" in raised.value.summary
    assert "bad-secret-line" not in f"{raised.value} {raised.value.summary}"


async def _gone_within(pid: int, seconds: float) -> bool:
    return await processes.wait_exit(pid, seconds)


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_injected_http_client_is_used_and_left_open(transport: str) -> None:
    requests: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        requests.append(request)

    async with (
        launch_peer(transport) as peer,
        httpx2.AsyncClient(event_hooks={"request": [record]}) as shared,
    ):
        config = {**peer.config, "headers": {"X-Toolmesh-Test": "yes"}}
        session = await open_session(
            "pooled",
            peer.transport_type,
            config,
            OpeningOptions(
                connect_timeout=CONNECT_TIMEOUT,
                on_tools_changed=None,
                on_lost=None,
                http_client=shared,
            ),
        )
        async with session:
            assert text_of(await session.call_tool("echo", {"text": "pooled"}, timeout=10)) == "pooled"
        assert not shared.is_closed
        assert requests
        assert all(request.headers.get("x-toolmesh-test") == "yes" for request in requests)
