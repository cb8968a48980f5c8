"""The OAuth-protected MCP peer (``tests/peers/oauth_server.py``) as tests use it (the ``peer``
fixture of ``tests/integration/conftest.py`` starts one): its control endpoints, the headless browser
that follows an authorization URL, and the text of the event stream (to look for tokens that must
not be there)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from nats.js import JetStreamContext

from toolmesh.contracts.events import EVENTS_STREAM

PEER = Path(__file__).parent / "peers" / "oauth_server.py"


@dataclass
class Peer:
    """A running peer at ``origin``."""

    origin: str

    async def stats(self) -> dict[str, Any]:
        """Grants and bearer requests counted so far, and every token issued."""
        async with httpx.AsyncClient() as client:
            result: dict[str, Any] = (await client.get(f"{self.origin}/control/stats")).json()
            return result

    async def control(self, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``POST /control/{action}`` (expire, revoke, login)."""
        async with httpx.AsyncClient() as client:
            result: dict[str, Any] = (await client.post(f"{self.origin}/control/{action}", json=body)).json()
            return result


async def follow(authorization_url: str) -> tuple[str, dict[str, list[str]]]:
    """Open an authorization URL as a browser would, headless: where the authorization server sends
    the browser back, and that address's query."""
    asked = parse_qs(urlsplit(authorization_url).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["resource"] and asked["state"]
    async with httpx.AsyncClient() as browser:
        answer = await browser.get(authorization_url)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    return location, parse_qs(urlsplit(location).query)


async def stream_text(js: JetStreamContext) -> str:
    """Every event on the stream, as text."""
    info = await js.stream_info(EVENTS_STREAM)
    chunks = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(EVENTS_STREAM, seq)
        chunks.append((msg.data or b"").decode(errors="replace"))
    return "\n".join(chunks)
