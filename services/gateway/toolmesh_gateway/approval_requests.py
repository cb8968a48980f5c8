"""What a tool call that a policy puts before a human carries, and the gate that decides it.

A policy whose effect is ``require_approval`` pauses the call (``policies``); the gate
(``approvals``) asks the MCP client's user through elicitation when the caller can answer one, else
waits for an approver's decision by API or console within a deadline. The call goes on only when
``ApprovalGate.approve`` returns; a rejection or a deadline raises a ``ToolmeshError`` the caller sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from toolmesh.contracts.rpc import ClientRef
from toolmesh_gateway.auth import Caller


@dataclass(frozen=True)
class PendingCall:
    """One tool call waiting for a human's decision, with what will run."""

    caller: Caller
    namespace: str
    server_id: str
    server_name: str
    tool: str
    arguments: dict[str, Any]
    policy: str
    """The name of the policy that asked for the approval."""
    reason: str
    """Why it needs one, as the policy says (shown to the approver and the client's user)."""
    surface: str
    """Where the call came from: ``rest``, ``mcp``, ``nats``, ``code``, ``bundle``."""
    client: ClientRef | None = field(default=None)
    """The MCP client session making the call, when there is one (elicitation reaches it)."""
    call_id: str | None = field(default=None)
    """The upstream call id the client's request is linked to (``ClientLinks.call``), so a handshake-era
    client gets the question on that request's own stream rather than its standalone one."""


class ApprovalGate(Protocol):
    """Decides pending calls."""

    async def approve(self, call: PendingCall) -> None:
        """Return when ``call`` was approved; raise when it was rejected or its deadline passed."""
        ...
