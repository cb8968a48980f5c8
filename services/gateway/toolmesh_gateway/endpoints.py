"""Endpoints (bundles): create, replace, delete (admins of the namespace), list and read (anyone in it).

An endpoint is served at ``/mcp/{name}``; its name is unique in its namespace among endpoints and
servers (the name is reserved under the same key as a server's name, first come). Changes are events: every
gateway's catalog follows them and its clients hear ``list_changed``.
"""

from __future__ import annotations

import uuid

from nats.js.kv import KeyValue

from toolmesh.contracts.endpoints import EndpointInfo, EndpointList, EndpointRequest, ToolOverride
from toolmesh.contracts.namespace_events import EndpointDeleted, EndpointSaved
from toolmesh.errors import EndpointAlreadyExists, EndpointNotFound
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh_gateway import endpoint_reads
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.name_reservations import name_holder_exists, name_key, release_name, reserve_name


def endpoint_key(namespace: str, name: str) -> str:
    """The key reserving an endpoint name inside its namespace: the key a server of that name
    reserves too, so of a server and an endpoint created at once only the first gets the name."""
    return name_key(namespace, name)


class EndpointService:
    """The endpoints of the caller's namespace."""

    def __init__(self, backends: Backends, names: KeyValue) -> None:
        self._b = backends
        self._names = names

    async def create(self, request: EndpointRequest, caller: Caller) -> EndpointInfo:
        """Create an endpoint; 409 when an endpoint or a server of the namespace has the name."""
        caller.principal.require_manager("create endpoints")
        namespace = caller.principal.home(request.namespace)
        endpoint_id = str(uuid.uuid4())
        taken = await queries.get_server_by_name(self._b.db, request.name, namespace) is not None
        if taken or not await reserve_name(
            self._names, endpoint_key(namespace, request.name), endpoint_id, self._exists
        ):
            raise EndpointAlreadyExists(
                f"An endpoint or server is already called {request.name}",
                {"name": request.name, "namespace": namespace},
            )
        try:
            await self._save(endpoint_id, namespace, request, caller)
        except BaseException:
            await release_name(self._names, endpoint_key(namespace, request.name))
            raise
        return await self.get(endpoint_id, caller)

    async def replace(self, endpoint_id: str, request: EndpointRequest, caller: Caller) -> EndpointInfo:
        """Replace an endpoint's definition (its name may change, within the namespace's free names)."""
        row = await self._existing(endpoint_id, caller)
        caller.principal.require_manager("change endpoints")
        namespace = row["namespace"]
        if request.name != row["name"] and not await self._reserve(namespace, request.name, endpoint_id):
            raise EndpointAlreadyExists(
                f"An endpoint or server is already called {request.name}", {"name": request.name}
            )
        await self._save(endpoint_id, namespace, request, caller)
        if request.name != row["name"]:
            await release_name(self._names, endpoint_key(namespace, row["name"]))
        return await self.get(endpoint_id, caller)

    async def delete(self, endpoint_id: str, caller: Caller) -> None:
        """Delete an endpoint; its clients' lists become empty (and keys limited to it reach nothing)."""
        row = await self._existing(endpoint_id, caller)
        caller.principal.require_manager("delete endpoints")
        event = EndpointDeleted(
            endpoint_id=endpoint_id,
            name=row["name"],
            namespace=row["namespace"],
            actor=caller.actor,
            ip_address=caller.ip_address,
        )
        await wait_for_projection(
            self._b.db, await publish_event(self._b.js, event), self._b.settings.projection_wait_seconds
        )
        await release_name(self._names, endpoint_key(row["namespace"], row["name"]))

    async def list(self, caller: Caller) -> EndpointList:
        """The endpoints the caller can see."""
        rows = await endpoint_reads.list_endpoints(self._b.db, caller.scope)
        return EndpointList(endpoints=[_info(r) for r in rows], total=len(rows))

    async def get(self, endpoint_id: str, caller: Caller) -> EndpointInfo:
        """One endpoint; ``EndpointNotFound`` when unknown or in another namespace."""
        return _info(await self._existing(endpoint_id, caller))

    async def _existing(self, endpoint_id: str, caller: Caller) -> endpoint_reads.Row:
        row = await endpoint_reads.get_endpoint(self._b.db, endpoint_id, caller.scope)
        if row is None:
            raise EndpointNotFound(f"Endpoint not found: {endpoint_id}", {"endpoint_id": endpoint_id})
        return row

    async def _reserve(self, namespace: str, name: str, endpoint_id: str) -> bool:
        """Take the name for this endpoint unless a server or another endpoint of the namespace has it."""
        if await queries.get_server_by_name(self._b.db, name, namespace) is not None:
            return False
        return await reserve_name(self._names, endpoint_key(namespace, name), endpoint_id, self._exists)

    async def _exists(self, holder_id: str) -> bool:
        return await name_holder_exists(self._b.db, holder_id)

    async def _save(self, endpoint_id: str, namespace: str, request: EndpointRequest, caller: Caller) -> None:
        event = EndpointSaved(
            endpoint_id=endpoint_id,
            namespace=namespace,
            actor=caller.actor,
            ip_address=caller.ip_address,
            name=request.name,
            description=request.description,
            include=request.include,
            exclude=request.exclude,
            overrides={k: v.model_dump(exclude_none=True) for k, v in request.overrides.items()},
        )
        seq = await publish_event(self._b.js, event)
        await wait_for_projection(self._b.db, seq, self._b.settings.projection_wait_seconds)


def _info(row: endpoint_reads.Row) -> EndpointInfo:
    return EndpointInfo(
        id=row["id"],
        name=row["name"],
        namespace=row["namespace"],
        description=row["description"],
        include=list(row["include"]),
        exclude=list(row["exclude"]),
        overrides={k: ToolOverride.model_validate(v) for k, v in row["overrides"].items()},
        path=f"/mcp/{row['name']}",
        created_by=row["created_by"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
