"""MCP clients signed in with OAuth: what signing in costs, and what an OAuth access token costs a
request on ``/mcp`` next to an API key.

    python bench/oauth_tokens.py [--sign-ins N] [--calls N]

Starts NATS and Postgres (``toolmesh_cli.embedded``) and every toolmesh role in ONE subprocess
(``toolmesh up``, without the per-address limits on registration and authorization), registers
the demo peer, then through the gateway's HTTP surface only:
- ``--sign-ins`` times a client's whole sign-in — ``POST /register``, ``GET /authorize`` (its 302 to
  the consent page), the decision (``POST /api/v1/oauth/requests/{id}/decision`` as the owner's key),
  ``POST /token`` — and each step;
- for each new token, its first ``/mcp`` ``initialize`` (the token is looked up in Postgres) and a
  second one (answered from the authenticator's cache), next to ``initialize`` with the owner's API key;
- ``--calls`` ``tools/call`` of ``demo.echo`` on one ``/mcp`` session opened with an OAuth token and
  on one opened with the API key (the same path after authentication), taking turns, after a
  warm-up;
- ``POST /token`` with ``grant_type=refresh_token`` (rotation).
Prints ONE JSON line of p50/p95 in milliseconds; targets are not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
from routing import note, register_demo, toolmesh_up
from routing_targets import TOKEN

from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port

REDIRECT = "http://127.0.0.1:9/callback"  # never reached: the bench reads the code from the decision
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
ACCEPT = "application/json, text/event-stream"


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 and p95 of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
        "n": len(ordered),
    }


async def timed(step: Callable[[], Awaitable[Any]], into: list[float]) -> Any:
    """Run ``step``, adding its duration to ``into``."""
    started = time.perf_counter()
    result = await step()
    into.append(time.perf_counter() - started)
    return result


class SignIn:
    """One client's sign-in through the gateway's endpoints, each step timed."""

    def __init__(self, http: httpx.AsyncClient, steps: dict[str, list[float]]) -> None:
        self._http = http
        self._steps = steps

    async def run(self) -> dict[str, Any]:
        """Register, authorize, allow, exchange: the token answer and the client id."""
        registered = await timed(
            lambda: self._http.post(
                "/register",
                json={"redirect_uris": [REDIRECT], "client_name": "bench", "token_endpoint_auth_method": "none"},
            ),
            self._steps["register"],
        )
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "bench",
        }
        consent = await timed(lambda: self._http.get("/authorize", params=query), self._steps["authorize"])
        request_id = consent.headers["location"].rsplit("/", 1)[1]
        decided = await timed(
            lambda: self._http.post(
                f"/api/v1/oauth/requests/{request_id}/decision",
                json={"allow": True},
                headers={"Authorization": f"Bearer {TOKEN}"},
            ),
            self._steps["decide"],
        )
        code = dict(parse_qsl(urlsplit(decided.json()["redirect_to"]).query))["code"]
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": client_id,
        }
        tokens = await timed(lambda: self._http.post("/token", data=form), self._steps["token"])
        return {**tokens.json(), "client_id": client_id}


async def initialize(http: httpx.AsyncClient, token: str) -> str:
    """An ``initialize`` on ``/mcp`` with ``token``; the session id."""
    answer = await http.post("/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT})
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


async def open_session(http: httpx.AsyncClient, token: str) -> dict[str, str]:
    """The headers of a ``/mcp`` session opened with ``token`` (initialized)."""
    session = await initialize(http, token)
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Mcp-Session-Id": session}
    headers["Mcp-Protocol-Version"] = "2025-06-18"
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def echo_calls(http: httpx.AsyncClient, sessions: list[dict[str, str]], calls: int) -> list[list[float]]:
    """``calls`` ``tools/call`` of ``demo.echo`` on each session, taking turns (the machine's noise
    falls on every session alike)."""
    samples: list[list[float]] = [[] for _ in sessions]
    for n in range(calls):
        body = {
            "jsonrpc": "2.0",
            "id": n + 2,
            "method": "tools/call",
            "params": {"name": "demo__echo", "arguments": {"text": "hello"}},
        }
        for headers, into in zip(sessions, samples, strict=True):
            answer = await timed(lambda body=body, h=headers: http.post("/mcp", json=body, headers=h), into)
            assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text[:300]
    return samples


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    # measure signing in, not the per-address limits on registration and authorization
    os.environ |= {"TOOLMESH_OAUTH_REGISTRATIONS_PER_MINUTE": "0", "TOOLMESH_OAUTH_AUTHORIZATIONS_PER_MINUTE": "0"}
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-oauth-") as tmp:
        work = Path(tmp)
        port = free_port()
        async with EmbeddedNats(work / "nats") as nats_server, EmbeddedPostgres(work / "pg") as postgres:
            async with toolmesh_up(work, nats_server.url, postgres.url, port):
                base = f"http://127.0.0.1:{port}"
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    await poll_until(lambda: _ready(http), 120, interval=0.5)
                    await register_demo("127.0.0.1", port)
                    note("demo registered; signing in")
                    steps: dict[str, list[float]] = {k: [] for k in ("register", "authorize", "decide", "token")}
                    whole: list[float] = []
                    first: list[float] = []
                    again: list[float] = []
                    key: list[float] = []
                    answers: list[dict[str, Any]] = []
                    for _ in range(args.sign_ins):
                        answer = await timed(SignIn(http, steps).run, whole)
                        answers.append(answer)
                        await timed(lambda a=answer: initialize(http, a["access_token"]), first)
                        await timed(lambda a=answer: initialize(http, a["access_token"]), again)
                        await timed(lambda: initialize(http, TOKEN), key)
                    refresh: list[float] = []
                    for answer in answers:
                        form = {
                            "grant_type": "refresh_token",
                            "refresh_token": answer["refresh_token"],
                            "client_id": answer["client_id"],
                        }
                        rotated = await timed(lambda f=form: http.post("/token", data=f), refresh)
                        assert rotated.status_code == 200, rotated.text
                    note("calling")
                    sessions = [await open_session(http, t) for t in (TOKEN, answers[-1]["access_token"])]
                    await echo_calls(http, sessions, 20)  # warm-up: the first calls pay for the route
                    with_key, with_token = await echo_calls(http, sessions, args.calls)
        return {
            "sign_in": percentiles(whole),
            "steps": {name: percentiles(samples) for name, samples in steps.items()},
            "initialize": {
                "oauth_token_first_use": percentiles(first),
                "oauth_token_cached": percentiles(again),
                "api_key_cached": percentiles(key),
            },
            "refresh": percentiles(refresh),
            "tools_call": {"oauth_token": percentiles(with_token), "api_key": percentiles(with_key)},
        }


async def _ready(http: httpx.AsyncClient) -> bool:
    try:
        answer = await http.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {TOKEN}"})
    except httpx.TransportError:
        return False
    return answer.status_code == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sign-ins", type=int, default=50)
    parser.add_argument("--calls", type=int, default=300)
    print(json.dumps(asyncio.run(bench(parser.parse_args()))))


if __name__ == "__main__":
    main()
