"""``toolmesh probe URL`` as a user runs it, against real MCP servers over Streamable HTTP and SSE.

The OAuth flows are checked by the conformance suite's client scenarios (tests/conformance/
test_probe_auth.py); here: transport detection, the listing, a call, the loopback callback of an
interactive authorization, and how a refusal is reported.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.peers.launch import launch_peer
from toolmesh_cli.probe.authorization import LoopbackAuthorization

pytestmark = pytest.mark.e2e
TOOLMESH = shutil.which("toolmesh", path=str(Path(sys.executable).parent)) or "toolmesh"
PROBE_SECONDS = 60


async def probe(*args: str) -> subprocess.CompletedProcess[str]:
    """``toolmesh probe`` with ``args``, run off the event loop (the peer serves on it meanwhile)."""
    return await asyncio.to_thread(
        subprocess.run, [TOOLMESH, "probe", *args], capture_output=True, text=True, timeout=PROBE_SECONDS
    )


def names(items: list[dict[str, Any]], key: str = "name") -> set[str]:
    return {item[key] for item in items}


async def test_probe_lists_tools_prompts_and_resources_over_streamable_http() -> None:
    async with launch_peer("http") as peer:
        assert peer.url is not None
        done = await probe("--json", peer.url)
    assert done.returncode == 0, done.stderr
    offer = json.loads(done.stdout)
    assert offer["transport"] == "http"
    assert {"echo", "add", "fail"} <= names(offer["tools"])
    assert names(offer["prompts"]) == {"greet"}
    assert "demo://readme" in names(offer["resources"], "uri")
    assert offer["call"] is None


async def test_probe_falls_back_to_sse_and_calls_a_tool() -> None:
    async with launch_peer("sse") as peer:
        assert peer.url is not None
        done = await probe("--json", "--call", "echo", "--args", '{"text": "hello probe"}', peer.url)
    assert done.returncode == 0, done.stderr
    offer = json.loads(done.stdout)
    assert offer["transport"] == "sse"
    assert offer["call"]["content"] == [{"type": "text", "text": "hello probe"}]


async def test_a_tool_error_exits_with_one() -> None:
    async with launch_peer("http") as peer:
        assert peer.url is not None
        done = await probe("--json", "--transport", "http", "--call", "fail", "--args", '{"message": "no"}', peer.url)
    assert done.returncode == 1
    assert json.loads(done.stdout)["call"]["isError"] is True


async def test_a_server_refusing_without_oauth_metadata_fails_the_probe_in_one_line() -> None:
    async with launch_peer("http", token="right-token") as peer:
        assert peer.url is not None
        done = await probe("--headless", peer.url)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"toolmesh: probe of {peer.url} failed: OAuth"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_interactive_authorization_takes_the_code_from_the_loopback_callback() -> None:
    shown: list[str] = []
    async with LoopbackAuthorization(shown.append) as authorization:
        assert authorization.redirect_uri.startswith("http://127.0.0.1:")
        await authorization.redirect("https://as.example/authorize?client_id=c")
        async with httpx2.AsyncClient() as http:
            page = await http.get(f"{authorization.redirect_uri}?code=c0de&state=st&iss=https%3A%2F%2Fas.example")
        result = await authorization.callback()
    assert shown == ["https://as.example/authorize?client_id=c"]
    assert page.status_code == 200
    assert (result.code, result.state, result.iss) == ("c0de", "st", "https://as.example")
