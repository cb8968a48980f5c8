"""The ``requestState`` of an upstream that speaks 2026-07-28, sealed for the client it is relayed to.

A client of that era relayed to such an upstream gets the upstream's ``InputRequiredResult`` as it
is, except its ``requestState``: the client gets it sealed (AES-256-GCM under the key every replica
derives from the deployment's credential key, the ``InputBridge``'s) with who asked (principal and
namespace), the server, the request it belongs to (endpoint, method, target, arguments: what the
retry repeats), an expiry and a nonce. The retry may reach any replica: that one opens the state,
checks all of it, spends it (once: a mark in a NATS KV bucket every replica shares) and gives the
upstream its own state back. A state also says whether the call was approved (a policy held it and
a human said yes): its retries are then not held again, and only a state this deployment sealed
can say so. A tampered, foreign, expired or spent state, or one presented with
another request, is answered with the one ``-32602`` (the reason in the log only), so a state tells
nobody but its holder anything, and the upstream never sees it.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any

import mcp_types
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from mcp.shared.exceptions import MCPError
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from toolmesh_gateway.front_door.client_links import UNKNOWN_STATE
from toolmesh_gateway.front_door.rpc_errors import nats_answers

log = logging.getLogger("toolmesh.gateway.mcp")
KIND = "relayed"
"""What a relayed state says it is (the ``InputBridge``'s own states name a parked request instead)."""


class RelayedStates:
    """Seals upstream ``requestState``s for clients and opens them, once each, on any replica."""

    def __init__(self, codec: AESGCMRequestStateCodec, lifetime: float, spent: KeyValue) -> None:
        self._codec = codec
        self._lifetime = lifetime
        self._spent = spent

    def seal(self, upstream_state: str, server_id: str, starter: str, request: str, approved: bool = False) -> str:
        """The state the client gets for ``upstream_state`` of ``server_id``, bound to the ``starter``
        and the ``request`` (see ``input_required._starter`` and ``_request_of``); ``approved``: the
        call was approved already."""
        claims = {
            "kind": KIND,
            "state": upstream_state,
            "server": server_id,
            "starter": starter,
            "request": request,
            "expires": time.time() + self._lifetime,
            "nonce": secrets.token_urlsafe(18),
            "approved": approved,
        }
        return self._codec.seal(json.dumps(claims, separators=(",", ":")).encode())

    async def redeem(self, presented: object, server_id: str, starter: str, request: str) -> str:
        """The upstream's own state inside ``presented``, spent by this call; ``-32602`` when it is not
        a state this deployment sealed for this starter, server and request, or it expired or was spent."""
        claims = self._open(presented)
        if claims is None or claims.get("kind") != KIND or not starter or claims.get("starter") != starter:
            if claims is not None and claims.get("kind") == KIND:
                log.warning("security: a requestState was presented by a principal it was not sealed for")
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_STATE)
        problem = _problem(claims, server_id, request)
        if problem is None:
            with nats_answers("spending a requestState"):
                try:
                    await self._spent.create(str(claims["nonce"]), b"")
                except KeyWrongLastSequenceError:
                    problem = "spent already"
        if problem is not None:
            log.info("requestState refused: %s", problem)
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_STATE)
        return str(claims["state"])

    def approved(self, presented: object, server_id: str, starter: str, request: str) -> bool:
        """Whether ``presented`` is a state sealed for this starter, server and request, unexpired, that
        says its call was approved (not spent by this: ``redeem`` spends it before the upstream sees it)."""
        claims = self._open(presented)
        if claims is None or claims.get("kind") != KIND or not starter or claims.get("starter") != starter:
            return False
        return _problem(claims, server_id, request) is None and claims.get("approved") is True

    def _open(self, presented: object) -> dict[str, Any] | None:
        try:
            claims = json.loads(self._codec.unseal(str(presented)))
        except (InvalidRequestState, ValueError, TypeError) as exc:
            log.info("requestState refused: %s", str(exc) or type(exc).__name__)
            return None
        return claims if isinstance(claims, dict) else None


def _problem(claims: dict[str, Any], server_id: str, request: str) -> str | None:
    """Why a state sealed for the right starter is still refused (None: it is not)."""
    if claims.get("server") != server_id:
        return "sealed for another server"
    if claims.get("request") != request:
        return "presented with another request than the one it belongs to"
    expires = claims.get("expires")
    if not isinstance(expires, int | float) or expires < time.time():
        return "expired"
    if not isinstance(claims.get("nonce"), str) or not isinstance(claims.get("state"), str):
        return "malformed"
    return None
