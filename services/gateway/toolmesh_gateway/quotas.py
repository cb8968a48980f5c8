"""Quotas: create, replace, delete (the owner anywhere, an admin in its namespace), list and read with
their current counts (anyone in the namespace). Every change is reloaded at once by this replica and
within ``TOOLMESH_QUOTA_REFRESH_SECONDS`` by the others (``quota_meter``)."""

from __future__ import annotations

import asyncio

from toolmesh.contracts.quotas import QuotaInfo, QuotaList, QuotaRequest, QuotaScope, QuotaWindow
from toolmesh.errors import QuotaAlreadyExists, QuotaNotFound, ToolmeshError, ValidationFailed
from toolmesh.platform.store.connections import Db
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

    def __init__(self, db: Db, meter: QuotaMeter) -> None:
        self._db = db
        self._meter = meter

    async def create(self, request: QuotaRequest, caller: Caller) -> QuotaInfo:
        """A new quota; 409 when the namespace has one of that scope and target."""
        caller.principal.require_manager("set quotas")
        namespace = caller.principal.home(request.namespace)
        target = target_of(request, namespace)
        quota_id = await quota_store.insert_quota(self._db, namespace, target, request, caller.actor)
        if quota_id is None:
            raise _taken(request, target)
        await self._meter.reload()
        return await self.get(quota_id, caller)

    async def replace(self, quota_id: str, request: QuotaRequest, caller: Caller) -> QuotaInfo:
        """Change a quota's scope, target and limits (its counts, kept by its id, go on)."""
        row = await self._existing(quota_id, caller)
        caller.principal.require_manager("change quotas")
        if request.namespace not in (None, row["namespace"]):
            raise ValidationFailed("A quota stays in its namespace", {"namespace": request.namespace})
        target = target_of(request, row["namespace"])
        if not await quota_store.update_quota(self._db, quota_id, target, request):
            raise _taken(request, target)
        await self._meter.reload()
        return await self.get(quota_id, caller)

    async def delete(self, quota_id: str, caller: Caller) -> None:
        """Remove a quota; calls it counted are no longer limited by it."""
        await self._existing(quota_id, caller)
        caller.principal.require_manager("delete quotas")
        await quota_store.delete_quota(self._db, quota_id)
        await self._meter.reload()

    async def list(self, caller: Caller) -> QuotaList:
        """The quotas the caller can see, with their current counts."""
        rows = await quota_store.list_quotas(self._db, caller.scope)
        quotas = list(await asyncio.gather(*(self._info(row) for row in rows)))
        return QuotaList(quotas=quotas, total=len(quotas))

    async def get(self, quota_id: str, caller: Caller) -> QuotaInfo:
        """One quota with its current counts; ``QuotaNotFound`` when unknown or in another namespace."""
        return await self._info(await self._existing(quota_id, caller))

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


def _taken(request: QuotaRequest, target: str) -> QuotaAlreadyExists:
    return QuotaAlreadyExists(
        f"A {request.scope} quota of '{target}' exists already; change it instead",
        {"scope": str(request.scope), "target": target},
    )
