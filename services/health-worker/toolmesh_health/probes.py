"""The two ways to probe a server: its ``health_check_url`` over HTTP, or an MCP ping through its owner."""

from __future__ import annotations

import asyncio
import time

import httpx2

from toolmesh.contracts.rpc import PingRpc
from toolmesh.egress.http import egress_refused
from toolmesh.egress.policy import MAX_REDIRECTS, redirect_problem
from toolmesh.errors import ToolmeshError
from toolmesh.health import CheckOutcome, judge_http_status
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.requests import NoOwner, ask_owner

PING_SHARE = 0.75
"""The share of a check's budget the owner may spend on the ping; the rest covers the NATS hop."""


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class _OffHost(Exception):
    """The health check URL redirected to another host."""


async def _get_on_host(client: httpx2.AsyncClient, url: str, timeout: float) -> httpx2.Response:
    """GET ``url``, following at most ``MAX_REDIRECTS`` redirects that stay on its host."""
    response = await client.get(url, timeout=timeout)
    for _ in range(MAX_REDIRECTS):
        target = response.next_request
        if target is None:
            break
        await response.aclose()
        if redirect_problem(url, str(target.url)) is not None:
            raise _OffHost
        response = await client.send(target)
    return response


async def probe_url(client: httpx2.AsyncClient, url: str, timeout: float) -> CheckOutcome:
    """GET ``url`` within ``timeout`` seconds in all (connect, headers and body), following redirects on
    its host only; ``client``'s connections follow the server's egress policy (``toolmesh.egress.http``)."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            response = await _get_on_host(client, url, timeout)
    except TimeoutError:
        return CheckOutcome.failed(f"Health check timed out after {timeout:g}s", _elapsed_ms(started))
    except _OffHost:
        return CheckOutcome.failed("Health check URL redirects to another host (not followed)", _elapsed_ms(started))
    except httpx2.HTTPError as exc:
        if egress_refused(exc) is not None:
            return CheckOutcome.failed(
                "Health check refused by the egress policy (a loopback, private, link-local or metadata address)",
                _elapsed_ms(started),
            )
        # The class only: a driver's text may quote the URL, and with it the URL's credentials.
        return CheckOutcome.failed(f"Health check failed: {type(exc).__name__}", _elapsed_ms(started))
    return judge_http_status(response.status_code, _elapsed_ms(started))


async def probe_session(bus: Bus, server_id: str, timeout: float) -> CheckOutcome:
    """An MCP ping on the live session, asked of the session-worker that owns it, all within ``timeout``.

    The bound is strict (a late answer is a timeout) so that two checks of one server never overlap.
    """
    started = time.perf_counter()
    try:
        await ask_owner(bus, server_id, "ping", PingRpc(timeout_seconds=timeout * PING_SHARE), timeout=timeout)
    except NoOwner:
        return CheckOutcome.failed("No session-worker holds a session for this server", _elapsed_ms(started))
    except ToolmeshError as exc:
        return CheckOutcome.failed(exc.detail, _elapsed_ms(started))
    return CheckOutcome.ok(_elapsed_ms(started))
