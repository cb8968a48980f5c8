"""Approvals kept in the NATS KV bucket ``toolmesh_approvals`` (id -> record), so every gateway
replica sees them and a decision made on any replica reaches the one whose call waits.

A call's arguments may hold secrets: the record keeps them sealed with the deployment's credential
key (``CredentialBox``), opened only for the approvers of the namespace (``GET /api/v1/approvals``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue

from toolmesh.contracts.approvals import Approval, ApprovalState
from toolmesh.credentials import CredentialBox
from toolmesh.errors import ApprovalClosed, ApprovalNotFound

SEALED = "sealed_arguments"
"""The field of a stored record holding its arguments, sealed."""


def now() -> datetime:
    """The current time (UTC)."""
    return datetime.now(UTC)


def shown_state(approval: Approval, at: datetime) -> ApprovalState:
    """``approval``'s state as of ``at``: a pending one past its deadline is expired (its waiting
    replica may be gone and never have said so)."""
    if approval.state is ApprovalState.PENDING and at >= approval.deadline:
        return ApprovalState.EXPIRED
    return approval.state


class ApprovalRecords:
    """Reads and writes approval records; changes are compare-and-set, so one decision wins."""

    def __init__(self, kv: KeyValue, box: CredentialBox) -> None:
        self._kv = kv
        self._box = box

    async def create(self, approval: Approval) -> None:
        """Store a new approval (its arguments sealed)."""
        await self._kv.create(approval.id, self._encode(approval))

    async def read(self, approval_id: str) -> tuple[int, Approval]:
        """The approval and its revision; ``ApprovalNotFound`` when there is none (or it expired)."""
        try:
            entry = await self._kv.get(approval_id)
        except KeyNotFoundError as exc:
            raise ApprovalNotFound(f"No approval '{approval_id}'", {"approval_id": approval_id}) from exc
        if entry.value is None:
            raise ApprovalNotFound(f"No approval '{approval_id}'", {"approval_id": approval_id})
        return entry.revision or 0, self._decode(entry.value)

    async def every(self) -> list[Approval]:
        """Every approval kept (pending and recent), newest first."""
        try:
            keys = await self._kv.keys()
        except NoKeysError:
            return []
        found: list[Approval] = []
        for key in keys:
            try:
                found.append((await self.read(key))[1])
            except ApprovalNotFound:  # expired between the listing and the read
                continue
        return sorted(found, key=lambda a: a.created, reverse=True)

    async def close(
        self, approval_id: str, state: ApprovalState, decided_by: str | None, comment: str | None
    ) -> Approval:
        """Move a pending approval to ``state``; ``ApprovalClosed`` when it is not pending any more (or
        its deadline passed, unless ``state`` says it expired)."""
        while True:
            revision, approval = await self.read(approval_id)
            at = now()
            current = shown_state(approval, at)
            if current is not ApprovalState.PENDING and not (
                state is ApprovalState.EXPIRED and approval.state is ApprovalState.PENDING
            ):
                raise ApprovalClosed(
                    f"Approval '{approval_id}' is {current} already",
                    {"approval_id": approval_id, "state": str(current)},
                )
            closed = approval.model_copy(
                update={"state": state, "decided_by": decided_by, "comment": comment, "decided_at": at}
            )
            try:
                await self._kv.update(approval_id, self._encode(closed), last=revision)
            except KeyWrongLastSequenceError:  # another replica changed it first: look again
                continue
            return closed

    async def watch(self, approval_id: str) -> KeyValue.KeyWatcher:
        """A watcher of one approval's record (its current value first)."""
        return await self._kv.watch(approval_id)

    def decode(self, value: bytes) -> Approval:
        """An approval from a watched entry's value."""
        return self._decode(value)

    def _encode(self, approval: Approval) -> bytes:
        stored: dict[str, Any] = approval.model_dump(mode="json", exclude={"arguments"})
        stored[SEALED] = self._box.seal(approval.arguments)
        return json.dumps(stored).encode()

    def _decode(self, value: bytes) -> Approval:
        stored = json.loads(value)
        stored["arguments"] = self._box.open(stored.pop(SEALED))
        return Approval.model_validate(stored)
