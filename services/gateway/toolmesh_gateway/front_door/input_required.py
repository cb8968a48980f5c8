"""Server → client requests for clients of the 2026-07-28 protocol, as ``InputRequiredResult``s.

That era has no server → client requests: a server answers ``tools/call``, ``prompts/get`` or
``resources/read`` with an ``InputRequiredResult`` (the requests it needs answered, and an opaque
``requestState``), and the client retries the same request carrying ``inputResponses``. Upstream
sessions stay in the handshake era, so toolmesh bridges: the upstream request keeps running while
the upstream's sampling, elicitation or roots request is handed to the client as an input request;
the retry delivers the client's answers to the waiting upstream and waits again, until the
upstream result is there. Parked requests live in the gateway replica that parked them; a retry
reaching another replica is relayed to that one over NATS (``resume``), which completes it as a
local retry, so a load balancer may send a retry anywhere. They expire after
``MCP_AGGREGATOR_REQUEST_TIMEOUT``.

A ``requestState`` is sealed (AES-256-GCM under a key every replica derives from the deployment's
credential key) and names the parked request and its replica; the parked request is bound to the
principal and namespace of the request that started the call: the same state presented by anyone else is
answered like a state never issued (the one ``-32602``, the reason in the log only), and the
parked request stays its starter's. It is bound as well to that request, which the retry repeats:
its endpoint, method, target (tool or prompt name, resource uri) and arguments; a retry of another
request gets ``-32602`` saying so, and the parked request waits on for the right one.

An upstream that speaks 2026-07-28 itself needs no bridge: its ``InputRequiredResult`` goes to the
client, its ``requestState`` sealed the same way (``relayed_states``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from nats.errors import NoRespondersError
from nats.js.kv import KeyValue

from toolmesh.contracts.clients import ResumeInput, ResumeWithdrawn
from toolmesh.contracts.rpc import RpcReply
from toolmesh.errors import ToolmeshError, error_from_body
from toolmesh_gateway.front_door.client_links import UNKNOWN_STATE, ClientLink, ClientLinks, Ctx, PendingInput
from toolmesh_gateway.front_door.relayed_states import RelayedStates
from toolmesh_gateway.front_door.sessions import request_caller

log = logging.getLogger("toolmesh.gateway.mcp")
BRIDGED = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The methods that may answer with ``InputRequiredResult`` (2026-07-28)."""
OTHER_REQUEST = (
    "requestState belongs to another request: a retry repeats the method, the name (or uri) and the "
    "arguments of the request that received it"
)
"""The answer to the starter's own state presented with another request."""
RELAY_MARGIN_SECONDS = 5.0
"""How much longer than the request timeout a replica waits for the one that parked a request."""


@dataclass
class _Parked:
    """An upstream request waiting for the client's retry, with the input requests it gave out."""

    task: asyncio.Task[dict[str, Any]]
    link: ClientLink
    deadline: float
    starter: str  # the principal and namespace that started the call (``starter_of``)
    request: str  # the request that got the state, as its retry must repeat it (``_request_of``)
    pending: dict[str, PendingInput] = field(default_factory=dict)


def bridged(ctx: Ctx) -> bool:
    """True when this request speaks the 2026-07-28 protocol and may get an ``InputRequiredResult``."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.method in BRIDGED


def starter_of(ctx: Ctx) -> str:
    """Who asks: the principal's key and the namespace the request works in ("" without a caller)."""
    caller = request_caller(ctx.request)
    if caller is None:
        return ""
    return json.dumps([caller.principal.key_id, caller.scope])


def _request_of(ctx: Ctx) -> str:
    """The request a state belongs to, as its retry repeats it: a digest of its endpoint, method,
    target (a tool's or prompt's name, a resource's uri) and arguments."""
    params = ctx.params or {}
    scope = getattr(ctx.request, "scope", None)
    path = scope.get("path") if isinstance(scope, dict) else None
    target = params.get("uri") if ctx.method == "resources/read" else params.get("name")
    identity = [path, ctx.method, target, params.get("arguments") or {}]
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class InputBridge:
    """Parks upstream requests whose upstream asked the client something, until the client answers;
    a retry that reaches another replica is completed by the one that parked its request."""

    def __init__(
        self, links: ClientLinks, timeout: float, keys: Sequence[bytes], spent: KeyValue, spent_kept: float
    ) -> None:
        self._links = links
        self._timeout = timeout
        self._parked: dict[str, _Parked] = {}  # by the id sealed in the state
        self._codec = AESGCMRequestStateCodec(list(keys))
        self._relayed = RelayedStates(self._codec, min(timeout, spent_kept), spent)  # a spent mark outlives its state
        self._resuming: dict[str, tuple[str, asyncio.Task[Any]]] = {}  # parked id -> starter, its relayed retry
        self._withdrawals: set[asyncio.Task[None]] = set()
        links.serve_resumes(self._resume_here, self._withdraw_here)

    async def run(
        self, ctx: Ctx, call: Callable[[ClientLink], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
        """``call``'s result, or an ``InputRequiredResult`` while the upstream waits for the client.

        A first request starts ``call`` with a link of its own; a retry (``requestState``) answers
        the parked input requests from ``inputResponses`` and waits for the same upstream request,
        here or on the replica that parked it (what ``call`` checks, such as a policy's approval, is
        not checked again).
        """
        self._expire()
        params = ctx.params or {}
        state = params.get("requestState")
        starter, request = starter_of(ctx), _request_of(ctx)
        if state is None:
            link = self._links.detached(ctx)
            return await self._wait(asyncio.ensure_future(call(link)), link, starter, request)
        replica, parked_id = self._unsealed(state)
        answers = params.get("inputResponses") or {}
        if replica == self._links.replica:
            return await self._resume(parked_id, starter, request, answers)
        return await self._resume_elsewhere(
            replica, parked_id, ResumeInput(starter=starter, request=request, input_responses=answers)
        )

    def seal_relayed(self, ctx: Ctx, server_id: str, upstream_state: str, approved: bool = False) -> str:
        """The state a client of this request gets for a 2026-07-28 upstream's own ``upstream_state``
        (``approved``: a policy held the call and it was approved)."""
        return self._relayed.seal(upstream_state, server_id, starter_of(ctx), _request_of(ctx), approved)

    def approved_before(self, ctx: Ctx, server_id: str) -> bool:
        """Whether this request is the retry of a call already approved: its ``requestState`` is one
        ``seal_relayed`` gave this request's starter, saying so (a request parked here, ``run``, is
        resumed rather than checked again)."""
        presented = (ctx.params or {}).get("requestState")
        return presented is not None and self._relayed.approved(presented, server_id, starter_of(ctx), _request_of(ctx))

    def holds(self, ctx: Ctx) -> bool:
        """Whether this request would start a call here or retry one the bridge parked (no ``requestState``,
        or one naming a parked request), rather than retry one relayed in the 2026-07-28 era (whose state
        ``seal_relayed`` sealed)."""
        presented = (ctx.params or {}).get("requestState")
        if presented is None:
            return True
        try:
            claims = json.loads(self._codec.unseal(str(presented)))
        except (InvalidRequestState, ValueError, TypeError):
            return False
        return isinstance(claims, dict) and "id" in claims

    async def redeem_relayed(self, ctx: Ctx, server_id: str, presented: object) -> str:
        """The upstream's own state in a state ``seal_relayed`` gave this request's starter, spent now
        (``-32602`` for any other)."""
        return await self._relayed.redeem(presented, server_id, starter_of(ctx), _request_of(ctx))

    def _unsealed(self, state: object) -> tuple[str, str]:
        """The replica and id of the parked request ``state`` names; ``-32602`` when it is not a state
        of this deployment (the reason going to the log)."""
        try:
            claims = json.loads(self._codec.unseal(str(state)))
            return str(claims["replica"]), str(claims["id"])
        except (InvalidRequestState, ValueError, KeyError, TypeError) as exc:
            log.info("requestState refused: %s", str(exc) or type(exc).__name__)
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_STATE) from None

    async def _resume(
        self, parked_id: str, starter: str, request: str, answers: dict[str, Any]
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
        """Answer a request parked here, when ``starter_of`` started it and ``request`` repeats the request
        that got it (else ``-32602``: the one that says nothing to anyone but the starter), and wait again."""
        parked = self._parked.get(parked_id)
        if parked is None or not starter or parked.starter != starter:
            if parked is not None:
                log.warning("security: a requestState was presented by a principal that did not start its call")
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_STATE)
        if parked.request != request:
            log.info("requestState refused: presented with another request than the one it belongs to")
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=OTHER_REQUEST)
        del self._parked[parked_id]
        for key, pending in parked.pending.items():
            answer = answers.get(key)
            reply = (
                RpcReply(ok=True, result=answer)
                if isinstance(answer, dict)
                else RpcReply(ok=False, error={"code": mcp_types.INVALID_PARAMS, "message": f"no answer to {key}"})
            )
            pending.respond(reply)
        return await self._wait(parked.task, parked.link, starter, request)

    async def _resume_here(self, parked_id: str, retry: ResumeInput) -> RpcReply:
        """A retry of a request parked here that reached another replica, as that replica relays it."""
        self._expire()
        resuming = asyncio.ensure_future(self._resume(parked_id, retry.starter, retry.request, retry.input_responses))
        self._resuming[parked_id] = (retry.starter, resuming)
        try:
            outcome = await resuming
        except asyncio.CancelledError:
            if not resuming.cancelled():  # this handler itself is cancelled (the gateway stops)
                raise
            return RpcReply(ok=False, error={"code": mcp_types.REQUEST_TIMEOUT, "message": "the client gave up"})
        except MCPError as exc:
            return RpcReply(ok=False, error=exc.error.model_dump(mode="json", exclude_none=True))
        except ToolmeshError as exc:  # as the upstream call raised it, for the front door to answer
            return RpcReply(ok=False, error=exc.body())
        finally:
            self._resuming.pop(parked_id, None)
        if isinstance(outcome, mcp_types.InputRequiredResult):
            return RpcReply(ok=True, result={"input_required": outcome.model_dump(by_alias=True, mode="json")})
        return RpcReply(ok=True, result={"result": outcome})

    def _withdraw_here(self, parked_id: str, withdrawn: ResumeWithdrawn) -> None:
        """The client gave up a relayed retry of a request parked here: its upstream call is cancelled."""
        found = self._resuming.get(parked_id)
        if found is not None and found[0] == withdrawn.starter:
            found[1].cancel()

    async def _resume_elsewhere(
        self, replica: str, parked_id: str, retry: ResumeInput
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
        """Have the replica that parked the request complete the retry (``-32602`` when it is gone)."""
        try:
            reply = await self._links.resume_at(replica, parked_id, retry, self._timeout + RELAY_MARGIN_SECONDS)
        except asyncio.CancelledError:  # the client went away: so does the upstream call over there
            withdrawal = asyncio.ensure_future(self._links.withdraw_at(replica, parked_id, retry.starter))
            self._withdrawals.add(withdrawal)
            withdrawal.add_done_callback(self._withdrawals.discard)
            raise
        except (NoRespondersError, TimeoutError) as exc:
            log.info("requestState refused: its replica %s did not answer (%s)", replica, type(exc).__name__)
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_STATE) from None
        if not reply.ok or reply.result is None:
            error = reply.error or {}
            if "error_code" in error:
                raise error_from_body(error)
            code = int(error.get("code", mcp_types.INTERNAL_ERROR))
            raise MCPError(code=code, message=str(error.get("message", "")), data=error.get("data"))
        if "input_required" in reply.result:
            return mcp_types.InputRequiredResult.model_validate(reply.result["input_required"], by_name=False)
        result: dict[str, Any] = reply.result["result"]
        return result

    async def _wait(
        self, task: asyncio.Task[dict[str, Any]], link: ClientLink, starter: str, request: str
    ) -> dict[str, Any] | mcp_types.InputRequiredResult:
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
        parked_id = secrets.token_urlsafe(18)
        by_key = {p.request.request_id: p for p in pending}
        deadline = time.monotonic() + self._timeout
        self._parked[parked_id] = _Parked(task, link, deadline, starter, request, by_key)
        requests = {key: {"method": p.request.method, "params": p.request.params or {}} for key, p in by_key.items()}
        claims = {"id": parked_id, "replica": self._links.replica}
        state = self._codec.seal(json.dumps(claims).encode())
        return mcp_types.InputRequiredResult.model_validate(
            {"inputRequests": requests, "requestState": state}, by_name=False
        )

    def _expire(self) -> None:
        now = time.monotonic()
        for parked_id in [t for t, p in self._parked.items() if p.deadline < now]:
            parked = self._parked.pop(parked_id)
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
