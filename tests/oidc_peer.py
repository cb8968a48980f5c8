"""The OpenID Connect identity provider peer (``tests/peers/oidc_provider.py``) as tests use it: started
on a free loopback port for one client, signed-in user switched, next ID token spoiled, requests
counted."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.peers.launch import running_process
from toolmesh.platform import processes
from toolmesh.platform.polling import wait_until
from toolmesh_cli.embedded import free_port

PROVIDER = Path(__file__).parent / "peers" / "oidc_provider.py"


@dataclass
class OidcPeer:
    """A running identity provider at ``url``, knowing one client; ``issuer`` names it (``url``, or with a
    trailing ``/``)."""

    url: str
    client_id: str
    client_secret: str
    redirect_uri: str
    issuer: str

    @property
    def discovery_url(self) -> str:
        """Where its OpenID Provider metadata is."""
        return f"{self.url}/.well-known/openid-configuration"

    async def login(self, user: str) -> None:
        """Sign ``user`` in (``alice``, ``bob`` or ``mallory``): the next authorization is theirs."""
        await self._control("login", {"user": user})

    async def next(self, **knobs: Any) -> None:
        """Spoil the next ID token only: ``issuer``, ``audience``, ``nonce``, ``expired``,
        ``unsigned_kid``, ``wrong_alg``, ``claims``."""
        await self._control("next", knobs)

    async def stats(self) -> dict[str, int]:
        """The ``authorize`` and ``token`` requests counted so far."""
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"{self.url}/control/stats")
            answer.raise_for_status()
            counts: dict[str, int] = answer.json()
            return counts

    async def _control(self, action: str, body: dict[str, Any]) -> None:
        async with httpx.AsyncClient() as client:
            (await client.post(f"{self.url}/control/{action}", json=body)).raise_for_status()


def _argv(
    port: int, client_id: str, client_secret: str, redirect_uri: str, user: str, issuer_slash: bool = False
) -> list[str]:
    argv = [sys.executable, str(PROVIDER), "--port", str(port), "--client-id", client_id]
    argv += ["--client-secret", client_secret, "--redirect-uri", redirect_uri, "--user", user]
    return [*argv, "--issuer-slash"] if issuer_slash else argv


@contextmanager
def oidc_provider_process(
    *, client_id: str, client_secret: str, redirect_uri: str, user: str = "alice"
) -> Iterator[str]:
    """The same identity provider for synchronous tests (the browser's): its URL, once its discovery
    document answers; stopped by its pid on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = processes.spawn(_argv(port, client_id, client_secret, redirect_uri, user))
    try:
        found = wait_until(
            lambda: httpx.get(f"{url}/.well-known/openid-configuration").is_success,
            30,
            interval=0.1,
            retry_on=(httpx.TransportError,),
        )
        assert found, f"the identity provider did not answer at {url}"
        yield url
    finally:
        processes.stop_sync(process, signal.SIGTERM, 10)


@asynccontextmanager
async def running_oidc_provider(
    *, client_id: str, client_secret: str, redirect_uri: str, user: str = "alice", issuer_slash: bool = False
) -> AsyncIterator[OidcPeer]:
    """The identity provider on a free loopback port, serving its discovery document, for one
    confidential client (``issuer_slash``: its issuer ends with ``/``); stopped (its whole process tree)
    on exit."""
    port = free_port()
    async with running_process(_argv(port, client_id, client_secret, redirect_uri, user, issuer_slash), port=port):
        url = f"http://127.0.0.1:{port}"
        peer = OidcPeer(url, client_id, client_secret, redirect_uri, url + ("/" if issuer_slash else ""))
        async with httpx.AsyncClient() as client:
            metadata = (await client.get(peer.discovery_url)).json()
        if metadata.get("issuer") != peer.issuer:
            raise RuntimeError(f"port {port} answered a discovery document for {metadata.get('issuer')!r}")
        yield peer
