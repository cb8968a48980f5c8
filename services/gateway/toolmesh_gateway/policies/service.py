"""Policies on tool calls: create, replace, delete and read them (owner and admins only).

An admin manages the policies of its namespace and reads the global ones; only the owner manages
global policies (``namespace`` null: every namespace). Every change is an event: the projector keeps
the versions and the audit log, every gateway's ``PolicyBook`` applies it.
"""

from __future__ import annotations

import uuid

from toolmesh.contracts.keys import Role
from toolmesh.contracts.policies import (
    PolicyDeleted,
    PolicyInfo,
    PolicyList,
    PolicyRequest,
    PolicySaved,
    PolicyVersion,
    PolicyVersionList,
)
from toolmesh.errors import Forbidden, PolicyAlreadyExists, PolicyNotFound
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.queries import Row
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.policies import reads as policy_reads
from toolmesh_gateway.policies.language import compile_expression


class PolicyService:
    """The policies a manager may see and change."""

    def __init__(self, backends: Backends) -> None:
        self._b = backends

    async def create(self, request: PolicyRequest, caller: Caller) -> PolicyInfo:
        """Create a policy; 422 for a bad expression, 409 when its namespace has one of that name."""
        namespace = self._target(request, caller, "create policies")
        compile_expression(request.expression)
        await self._free(namespace, request.name, None)
        policy_id = str(uuid.uuid4())
        await self._save(policy_id, request.model_copy(update={"namespace": namespace}), caller)
        return await self.get(policy_id, caller)

    async def replace(self, policy_id: str, request: PolicyRequest, caller: Caller) -> PolicyInfo:
        """Replace a policy's definition (one version more); its namespace does not change."""
        row = await self._managed(policy_id, caller, "change policies")
        compile_expression(request.expression)
        await self._free(row["namespace"], request.name, policy_id)
        await self._save(policy_id, request.model_copy(update={"namespace": row["namespace"]}), caller)
        return await self.get(policy_id, caller)

    async def delete(self, policy_id: str, caller: Caller) -> None:
        """Delete a policy: every gateway stops applying it."""
        row = await self._managed(policy_id, caller, "delete policies")
        event = PolicyDeleted(
            policy_id=policy_id,
            name=row["name"],
            namespace=row["namespace"] or caller.principal.namespace,
            actor=caller.actor,
            ip_address=caller.ip_address,
        )
        await self._published(event)

    async def list(self, caller: Caller) -> PolicyList:
        """The policies of the caller's namespace and the global ones (every policy for the owner)."""
        caller.principal.require_manager("read policies")
        rows = await policy_reads.list_policies(self._b.db, caller.scope)
        return PolicyList(policies=[_info(r) for r in rows], total=len(rows))

    async def get(self, policy_id: str, caller: Caller) -> PolicyInfo:
        """One policy; ``PolicyNotFound`` when unknown or another namespace's."""
        caller.principal.require_manager("read policies")
        return _info(await self._existing(policy_id, caller))

    async def versions(self, policy_id: str, caller: Caller) -> PolicyVersionList:
        """A policy's every version, newest first (a deleted policy's too, the last marked deleted)."""
        caller.principal.require_manager("read policies")
        rows = await policy_reads.policy_versions(self._b.db, policy_id)
        if not rows or rows[0]["namespace"] not in (None, caller.scope or rows[0]["namespace"]):
            raise PolicyNotFound(f"Policy not found: {policy_id}", {"policy_id": policy_id})
        return PolicyVersionList(versions=[PolicyVersion.model_validate(dict(r)) for r in rows])

    @staticmethod
    def _target(request: PolicyRequest, caller: Caller, action: str) -> str | None:
        """The namespace a new policy lands in (None: global, the owner's only)."""
        principal = caller.principal
        principal.require_manager(action)
        if request.namespace is None:
            if principal.role is not Role.OWNER:
                raise Forbidden(
                    "Only the owner sets global policies; name your namespace to set one of its own",
                    {"namespace": None, "role": str(principal.role)},
                )
            return None
        return principal.home(request.namespace)

    async def _managed(self, policy_id: str, caller: Caller, action: str) -> Row:
        caller.principal.require_manager(action)
        row = await self._existing(policy_id, caller)
        if row["namespace"] is None and caller.principal.role is not Role.OWNER:
            raise Forbidden("Only the owner changes global policies", {"policy_id": policy_id})
        return row

    async def _existing(self, policy_id: str, caller: Caller) -> Row:
        row = await policy_reads.get_policy(self._b.db, policy_id, caller.scope)
        if row is None:
            raise PolicyNotFound(f"Policy not found: {policy_id}", {"policy_id": policy_id})
        return row

    async def _free(self, namespace: str | None, name: str, policy_id: str | None) -> None:
        held = await policy_reads.policy_named(self._b.db, namespace, name)
        if held is not None and held["id"] != policy_id:
            raise PolicyAlreadyExists(f"A policy is already called {name}", {"name": name, "namespace": namespace})

    async def _save(self, policy_id: str, policy: PolicyRequest, caller: Caller) -> None:
        event = PolicySaved(
            policy_id=policy_id,
            policy=policy,
            namespace=policy.namespace or caller.principal.namespace,
            actor=caller.actor,
            ip_address=caller.ip_address,
        )
        await self._published(event)

    async def _published(self, event: PolicySaved | PolicyDeleted) -> None:
        seq = await publish_event(self._b.js, event)
        await wait_for_projection(self._b.db, seq, self._b.settings.projection_wait_seconds)


def _info(row: Row) -> PolicyInfo:
    return PolicyInfo.model_validate({**dict(row), "redact": list(row["redact"])})
