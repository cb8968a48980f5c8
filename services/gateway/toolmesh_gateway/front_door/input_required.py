"""Server → client requests for clients of the 2026-07-28 protocol, as ``InputRequiredResult``s.

That era has no server → client requests: a server answers ``tools/call``, ``prompts/get`` or
``resources/read`` with an ``InputRequiredResult`` (the requests it needs answered, and an opaque
``requestState``), and the client retries the same request carrying ``inputResponses``. Upstream
sessions stay in the handshake era, so toolmesh bridges: the upstream request keeps running while
the upstream's sampling, elicitation or roots request is handed to the client as an input request;
the retry delivers the client's answers to the waiting upstream and waits again, until the
upstream result is there. Parked requests live in the gateway replica that parked them (a retry
reaching another replica gets ``-32602`` "unknown requestState"); they expire after
``MCP_AGGREGATOR_REQUEST_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolmesh.contracts.rpc import RpcReply
from toolmesh_gateway.front_door.client_links import ClientLink, ClientLinks, Ctx, PendingInput

BRIDGED = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The methods that may answer with ``InputRequiredResult`` (2026-07-28)."""
T = TypeVar("T")


@dataclass
class _Parked:
    """An upstream request waiting for the client's retry, with the input requests it gave out."""

    task: asyncio.Task[Any]
    link: ClientLink
    deadline: float
    pending: dict[str, PendingInput] = field(default_factory=dict)


def bridged(ctx: Ctx) -> bool:
    """True when this request speaks the 2026-07-28 protocol and may get an ``InputRequiredResult``."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.method in BRIDGED


class InputBridge:
    """Parks upstream requests whose upstream asked the client something, until the client answers."""

    def __init__(self, links: ClientLinks, timeout: float) -> None:
        self._links = links
        self._timeout = timeout
        self._parked: dict[str, _Parked] = {}

    async def run(self, ctx: Ctx, call: Callable[[ClientLink], Awaitable[T]]) -> T | mcp_types.InputRequiredResult:
        """``call``'s result, or an ``InputRequiredResult`` while the upstream waits for the client.

        A first request starts ``call`` with a link of its own; a retry (``requestState``) answers
        the parked input requests from ``inputResponses`` and waits for the same upstream request.
        """
        self._expire()
        params = ctx.params or {}
        state = params.get("requestState")
        if state is None:
            link = self._links.detached(ctx)
            return await self._wait(asyncio.ensure_future(call(link)), link)
        parked = self._parked.pop(str(state), None)
        if parked is None:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message="unknown or expired requestState")
        answers = params.get("inputResponses") or {}
        for key, pending in parked.pending.items():
            answer = answers.get(key)
            reply = (
                RpcReply(ok=True, result=answer)
                if isinstance(answer, dict)
                else RpcReply(ok=False, error={"code": mcp_types.INVALID_PARAMS, "message": f"no answer to {key}"})
            )
            await pending.msg.respond(reply.model_dump_json().encode())
        return await self._wait(parked.task, parked.link)

    async def _wait(self, task: asyncio.Task[T], link: ClientLink) -> T | mcp_types.InputRequiredResult:
        asked = asyncio.ensure_future(link.inputs.get())
        try:
            await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            if not asked.done():
                asked.cancel()
        if not asked.done() or asked.cancelled():
            self._links.forget(link)
            return task.result()
        pending = [asked.result()]
        while not link.inputs.empty():
            pending.append(link.inputs.get_nowait())
        token = secrets.token_urlsafe(18)
        by_key = {p.request.request_id: p for p in pending}
        self._parked[token] = _Parked(task, link, time.monotonic() + self._timeout, by_key)
        requests = {key: {"method": p.request.method, "params": p.request.params or {}} for key, p in by_key.items()}
        return mcp_types.InputRequiredResult.model_validate(
            {"inputRequests": requests, "requestState": token}, by_name=False
        )

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, p in self._parked.items() if p.deadline < now]:
            parked = self._parked.pop(token)
            parked.task.cancel()
            self._links.forget(parked.link)

    async def close(self) -> None:
        """Cancel every parked upstream request."""
        for parked in self._parked.values():
            parked.task.cancel()
        tasks = [p.task for p in self._parked.values()]
        self._parked.clear()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
