"""``Approvals``, the ``ApprovalGate`` of toolmesh: a pending call waits in NATS KV for a decision.

``approve`` stores the pending approval, asks the client's user through elicitation when the client
declared it (their answer decides), and watches the record until someone decides it, on any
replica: an approver by API or console (``decide``), the user, or the deadline. A caller that goes
away withdraws its approval. Every request and every decision is audited (``approval.requested``,
``approval.decided``, with who decided).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import timedelta

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from toolmesh.contracts.approvals import Approval, ApprovalDecided, ApprovalRequested, ApprovalState
from toolmesh.errors import ApprovalClosed, ApprovalNotFound, ApprovalRejected, ApprovalTimeout
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.publishing import publish_event
from toolmesh_gateway.approval_requests import PendingCall
from toolmesh_gateway.approvals import elicitation
from toolmesh_gateway.approvals.records import ApprovalRecords, now, shown_state
from toolmesh_gateway.auth import Principal

log = logging.getLogger("toolmesh.gateway.approvals")
CLIENT_DECIDER = "client:"
"""``decided_by`` of an approval the client's user decided: this and the caller's name."""


class Approvals:
    """Pending approvals of every replica, and the decisions on them."""

    def __init__(self, records: ApprovalRecords, js: JetStreamContext, bus: Bus, timeout_seconds: float) -> None:
        self.records = records
        self._js = js
        self._bus = bus
        self._timeout = timeout_seconds

    async def approve(self, call: PendingCall) -> None:
        """Return once ``call`` is approved; ``ApprovalRejected`` (403) when it is rejected,
        ``ApprovalTimeout`` when nobody decides before the deadline."""
        created = now()
        approval = Approval(
            id=uuid.uuid4().hex,
            namespace=call.namespace,
            caller=call.caller.actor,
            server_id=call.server_id,
            server=call.server_name,
            tool=call.tool,
            arguments=call.arguments,
            policy=call.policy,
            reason=call.reason,
            surface=call.surface,
            created=created,
            deadline=created + timedelta(seconds=self._timeout),
            state=ApprovalState.PENDING,
        )
        watcher = await self.records.watch(approval.id)
        asking: asyncio.Task[None] | None = None
        try:
            await self.records.create(approval)
            await self._audit_requested(approval)
            if call.client is not None and call.client.elicitation:
                asking = asyncio.create_task(self._ask_user(call, approval), name=f"approval-{approval.id}")
            final = await self._outcome(approval, watcher)
        except BaseException:  # the caller went away (cancelled), or JetStream failed it
            await asyncio.shield(self._withdraw(approval))
            raise
        finally:
            if asking is not None:
                asking.cancel()
            with contextlib.suppress(Exception):
                await watcher.stop()
        _raise_unless_approved(final)

    async def decide(self, approval_id: str, principal: Principal, approved: bool, comment: str | None) -> Approval:
        """An approver's decision; ``ApprovalNotFound`` outside their namespace, ``ApprovalClosed``
        (409) when it was decided, withdrawn or past its deadline already."""
        await self.read(approval_id, principal)
        state = ApprovalState.APPROVED if approved else ApprovalState.REJECTED
        return await self._close(approval_id, state, principal.name, comment)

    async def read(self, approval_id: str, principal: Principal) -> Approval:
        """One approval of the principal's namespace (every namespace for the owner)."""
        _, approval = await self.records.read(approval_id)
        if principal.scope is not None and approval.namespace != principal.scope:
            raise ApprovalNotFound(f"No approval '{approval_id}'", {"approval_id": approval_id})
        return _shown(approval)

    async def listed(self, principal: Principal, state: ApprovalState | None, limit: int) -> list[Approval]:
        """Pending and recent approvals of the principal's namespace, newest first."""
        shown = [
            _shown(a) for a in await self.records.every() if principal.scope is None or a.namespace == principal.scope
        ]
        return [a for a in shown if state is None or a.state is state][:limit]

    async def _outcome(self, approval: Approval, watcher: KeyValue.KeyWatcher) -> Approval:
        """The approval once it is no longer pending (closed as expired at its deadline)."""
        remaining = (approval.deadline - now()).total_seconds()
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                while True:
                    entry = await watcher.updates(timeout=None)
                    if entry is None or entry.value is None:  # the end of the initial values
                        continue
                    current = self.records.decode(entry.value)
                    if current.state is not ApprovalState.PENDING:
                        return current
        except TimeoutError:
            try:
                return await self._close(approval.id, ApprovalState.EXPIRED, None, None)
            except ApprovalClosed:  # decided at the last moment
                return (await self.records.read(approval.id))[1]

    async def _ask_user(self, call: PendingCall, approval: Approval) -> None:
        assert call.client is not None
        remaining = (approval.deadline - now()).total_seconds()
        answer = await elicitation.ask(self._bus, call.client, call, remaining)
        if answer is not None:
            await self._close_quietly(approval, answer, CLIENT_DECIDER + call.caller.actor, None)

    async def _close(
        self, approval_id: str, state: ApprovalState, decided_by: str | None, comment: str | None
    ) -> Approval:
        closed = await self.records.close(approval_id, state, decided_by, comment)
        decided = ApprovalDecided(
            approval_id=closed.id,
            server_id=closed.server_id,
            namespace=closed.namespace,
            actor=decided_by,
            server_name=closed.server,
            tool=closed.tool,
            state=state,
            comment=comment,
            caller=closed.caller,
        )
        await publish_event(self._js, decided)
        log.info("approval %s of %s.%s: %s by %s", closed.id, closed.server, closed.tool, state, decided_by)
        return closed

    async def _close_quietly(
        self, approval: Approval, state: ApprovalState, decided_by: str | None, comment: str | None
    ) -> None:
        """Close unless someone decided first (their decision stands)."""
        with contextlib.suppress(ApprovalClosed, ApprovalNotFound):
            await self._close(approval.id, state, decided_by, comment)

    async def _withdraw(self, approval: Approval) -> None:
        try:
            await self._close_quietly(approval, ApprovalState.WITHDRAWN, None, None)
        except Exception as exc:  # JetStream unreachable: the record expires at its deadline
            log.warning("approval %s not withdrawn: %r", approval.id, exc)

    async def _audit_requested(self, approval: Approval) -> None:
        requested = ApprovalRequested(
            approval_id=approval.id,
            server_id=approval.server_id,
            namespace=approval.namespace,
            actor=approval.caller,
            server_name=approval.server,
            tool=approval.tool,
            policy=approval.policy,
            reason=approval.reason,
            surface=approval.surface,
            deadline=approval.deadline,
        )
        await publish_event(self._js, requested)


def _shown(approval: Approval) -> Approval:
    state = shown_state(approval, now())
    return approval if state is approval.state else approval.model_copy(update={"state": state})


def _raise_unless_approved(approval: Approval) -> None:
    context = {"approval_id": approval.id, "decided_by": approval.decided_by, "comment": approval.comment}
    if approval.state is ApprovalState.APPROVED:
        return
    if approval.state is ApprovalState.EXPIRED:
        raise ApprovalTimeout(
            f"Nobody approved {approval.server}.{approval.tool} before its deadline", {"approval_id": approval.id}
        )
    said = f": {approval.comment}" if approval.comment else ""
    raise ApprovalRejected(
        f"{approval.server}.{approval.tool} was {approval.state} by {approval.decided_by}{said}", context
    )
