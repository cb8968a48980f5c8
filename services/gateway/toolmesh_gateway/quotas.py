"""Quotas: create, replace, delete (the owner anywhere, an admin in its namespace), list and read with
their current counts (anyone in the namespace). Every change is reloaded at once by this replica and
within ``TOOLMESH_QUOTA_REFRESH_SECONDS`` by the others (``quota_meter``).

Every change is also an event (``QuotaCreated``, ``QuotaUpdated``, ``QuotaDeleted``: who, from where,
the quota before and after) that the projector writes to the audit log. It is published inside the
transaction that changes the quota, so a change whose event could not be published is rolled back:
no quota changes unaudited. REST, the NATS API and the CLI all come here.
"""

from __future__ import annotations

import asyncio

from toolmesh.contracts.quotas import (
    QuotaChange,
    QuotaCreated,
    QuotaDeleted,
    QuotaInfo,
    QuotaList,
    QuotaRequest,
    QuotaScope,
    QuotaState,
    QuotaUpdated,
    QuotaWindow,
)
from toolmesh.errors import QuotaAlreadyExists, QuotaNotFound, ToolmeshError, ValidationFailed
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.connections import Conn
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.queries import Row
from toolmesh_gateway import quota_store
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.quota_meter import QuotaMeter, quota_from_row


def target_of(request: QuotaRequest, namespace: str) -> str:
    """What the quota counts: the target as given; a namespace quota's is its namespace."""
    if request.scope is not QuotaScope.NAMESPACE:
        assert request.target is not None  # QuotaRequest requires it
        return request.target
    if request.target not in (None, namespace):
        raise ValidationFailed(
            f"A namespace quota counts the calls of its own namespace '{namespace}'",
            {"target": request.target, "namespace": namespace},
        )
    return namespace


class QuotaService:
    """The quotas of the caller's namespace."""

    def __init__(self, backends: Backends, meter: QuotaMeter) -> None:
        self._b = backends
        self._db = backends.db
        self._meter = meter

    async def create(self, request: QuotaRequest, caller: Caller) -> QuotaInfo:
        """A new quota; 409 when the namespace has one of that scope and target."""
        caller.principal.require_manager("set quotas")
        namespace = caller.principal.home(request.namespace)
        target = target_of(request, namespace)
        async with self._db.acquire() as conn, conn.transaction():
            quota_id = await quota_store.insert_quota(conn, namespace, target, request, caller.actor)
            if quota_id is None:
                raise _taken(request, target)
            seq = await self._publish(QuotaCreated, caller, namespace, quota_id, None, _state(request, target))
        await self._changed(seq)
        return await self.get(quota_id, caller)

    async def replace(self, quota_id: str, request: QuotaRequest, caller: Caller) -> QuotaInfo:
        """Change a quota's scope, target and limits. Counts belong to what is counted (``counted``), not
        to the quota: a new target is limited by its own count, the old target keeps its own."""
        row = await self._existing(quota_id, caller)
        caller.principal.require_manager("change quotas")
        if request.namespace not in (None, row["namespace"]):
            raise ValidationFailed("A quota stays in its namespace", {"namespace": request.namespace})
        target = target_of(request, row["namespace"])
        async with self._db.acquire() as conn, conn.transaction():
            before = await self._locked(conn, quota_id)
            if not await quota_store.update_quota(conn, quota_id, target, request):
                raise _taken(request, target)
            after = _state(request, target)
            seq = await self._publish(QuotaUpdated, caller, row["namespace"], quota_id, before, after)
        await self._changed(seq)
        return await self.get(quota_id, caller)

    async def delete(self, quota_id: str, caller: Caller) -> None:
        """Remove a quota; calls it counted are no longer limited by it."""
        row = await self._existing(quota_id, caller)
        caller.principal.require_manager("delete quotas")
        async with self._db.acquire() as conn, conn.transaction():
            before = await self._locked(conn, quota_id)
            await quota_store.delete_quota(conn, quota_id)
            seq = await self._publish(QuotaDeleted, caller, row["namespace"], quota_id, before, None)
        await self._changed(seq)

    async def list(self, caller: Caller) -> QuotaList:
        """The quotas the caller can see, with their current counts."""
        rows = await quota_store.list_quotas(self._db, caller.scope)
        quotas = list(await asyncio.gather(*(self._info(row) for row in rows)))
        return QuotaList(quotas=quotas, total=len(quotas))

    async def get(self, quota_id: str, caller: Caller) -> QuotaInfo:
        """One quota with its current counts; ``QuotaNotFound`` when unknown or in another namespace."""
        return await self._info(await self._existing(quota_id, caller))

    @staticmethod
    async def _locked(conn: Conn, quota_id: str) -> QuotaState:
        row = await quota_store.lock_quota(conn, quota_id)
        if row is None:  # deleted since it was read
            raise QuotaNotFound(f"Quota not found: {quota_id}", {"quota_id": quota_id})
        return QuotaState.model_validate(dict(row))

    async def _publish(
        self,
        kind: type[QuotaChange],
        caller: Caller,
        namespace: str,
        quota_id: str,
        before: QuotaState | None,
        after: QuotaState | None,
    ) -> int:
        event = kind(
            quota_id=quota_id,
            before=before,
            after=after,
            namespace=namespace,
            actor=caller.actor,
            ip_address=caller.ip_address,
        )
        return await publish_event(self._b.js, event)

    async def _changed(self, seq: int) -> None:
        """After a committed change: this replica enforces it at once, its audit row is readable."""
        await self._meter.reload()
        await wait_for_projection(self._db, seq, self._b.settings.projection_wait_seconds)

    async def _existing(self, quota_id: str, caller: Caller) -> Row:
        row = await quota_store.get_quota(self._db, quota_id, caller.scope)
        if row is None:
            raise QuotaNotFound(f"Quota not found: {quota_id}", {"quota_id": quota_id})
        return row

    async def _info(self, row: Row) -> QuotaInfo:
        usage: dict[QuotaWindow, int]
        try:
            usage = await self._meter.usage(quota_from_row(row))
        except ToolmeshError:  # the quota is still shown, without its counts
            usage = {}
        return QuotaInfo(**dict(row), usage=usage)


def _state(request: QuotaRequest, target: str) -> QuotaState:
    return QuotaState(
        scope=request.scope,
        target=target,
        per_minute=request.per_minute,
        per_day=request.per_day,
        per_month=request.per_month,
    )


def _taken(request: QuotaRequest, target: str) -> QuotaAlreadyExists:
    return QuotaAlreadyExists(
        f"A {request.scope} quota of '{target}' exists already; change it instead",
        {"scope": str(request.scope), "target": target},
    )
