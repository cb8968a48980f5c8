"""What each operation of the NATS API does: the same core calls as the REST routes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from toolmesh.contracts import api
from toolmesh.contracts.approvals import ApprovalList
from toolmesh.contracts.endpoints import EndpointRequest
from toolmesh.contracts.keys import CreateKeyRequest
from toolmesh.contracts.policies import PolicyRequest
from toolmesh.contracts.quotas import QuotaRequest
from toolmesh.contracts.registry_import import RegistryImportRequest, RegistryPlanRequest
from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.platform.runtime import Backends
from toolmesh.search.service import SearchService
from toolmesh_gateway import reads, registry_imports
from toolmesh_gateway.approvals.gate import Approvals
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.authorization_server.consent import Consents
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.endpoints import EndpointService
from toolmesh_gateway.keys import KeyService
from toolmesh_gateway.policies.service import PolicyService
from toolmesh_gateway.quotas import QuotaService
from toolmesh_gateway.searching import search_visible
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.template_approvals import approve_templates
from toolmesh_gateway.tool_calls import ToolCalls
from toolmesh_gateway.upstream_oauth.authorizing import UpstreamAuthorizations
from toolmesh_gateway.views import server_detail


@dataclass(frozen=True)
class GatewayServices:
    """The gateway's services, as the REST app built them."""

    backends: Backends
    commands: ServerCommands
    calls: ToolCalls
    keys: KeyService
    endpoints: EndpointService
    search: SearchService
    feed: CatalogFeed
    started_at: float
    authorizations: UpstreamAuthorizations
    consents: Consents
    policies: PolicyService
    approvals: Approvals
    quotas: QuotaService

    @classmethod
    def of(cls, app: FastAPI) -> GatewayServices:
        """The services of a REST app (one set of services serves both edges)."""
        state = app.state
        return cls(
            state.backends,
            state.server_commands,
            state.tool_calls,
            state.keys,
            state.endpoints,
            state.search,
            state.catalog_feed,
            state.started_at,
            state.upstream_authorizations,
            state.consents,
            state.policies,
            state.approvals,
            state.quotas,
        )


Handler = Callable[[GatewayServices, Caller, Any], Awaitable[BaseModel | list[Any] | dict[str, Any] | None]]


async def _register(s: GatewayServices, caller: Caller, body: RegisterServerRequest) -> BaseModel:
    return await s.commands.register(body, caller)


async def _import_registry(s: GatewayServices, caller: Caller, body: RegistryImportRequest) -> BaseModel:
    return await registry_imports.import_registry(body, caller, s.commands)


async def _import_plan(s: GatewayServices, caller: Caller, body: RegistryPlanRequest) -> BaseModel:
    return registry_imports.import_plan(body)


async def _list(s: GatewayServices, caller: Caller, body: api.ListServersRequest) -> BaseModel:
    return await reads.list_servers(s.backends.db, caller.principal, body)


async def _get(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    row = await s.commands.server(body.server_id, caller)
    return server_detail(row, command_visible=caller.principal.manages_server(row["created_by"]))


async def _connect(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await s.commands.connect(body.server_id, caller)


async def _disconnect(s: GatewayServices, caller: Caller, body: api.DisconnectServerRequest) -> BaseModel:
    return await s.commands.disconnect(body.server_id, body.force, caller)


async def _remove(s: GatewayServices, caller: Caller, body: api.ServerRef) -> None:
    await s.commands.remove(body.server_id, caller)


async def _tools(s: GatewayServices, caller: Caller, body: api.ServerToolsRequest) -> BaseModel:
    return await reads.server_tools(s.backends.db, s.commands, caller, body.server_id, body.include_schemas)


async def _history(s: GatewayServices, caller: Caller, body: api.ServerRef) -> list[Any]:
    return await reads.server_history(s.backends.db, s.commands, caller, body.server_id)


async def _refresh(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await s.commands.refresh(body.server_id, caller)


async def _approve(s: GatewayServices, caller: Caller, body: api.ApproveServerToolsRequest) -> BaseModel:
    return await s.commands.approve(body.server_id, body.tools, caller)


async def _approve_templates(s: GatewayServices, caller: Caller, body: api.ApproveServerTemplatesRequest) -> BaseModel:
    return await approve_templates(s.commands, body.server_id, body.templates, caller)


async def _prompts(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await reads.server_prompts(s.backends.db, s.commands, caller, body.server_id)


async def _approve_prompts(s: GatewayServices, caller: Caller, body: api.ApproveServerPromptsRequest) -> BaseModel:
    return await s.commands.approve_prompts(body.server_id, body.prompts, caller)


async def _classify(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await s.commands.classify(body.server_id, caller)


async def _create_endpoint(s: GatewayServices, caller: Caller, body: EndpointRequest) -> BaseModel:
    return await s.endpoints.create(body, caller)


async def _list_endpoints(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await s.endpoints.list(caller)


async def _get_endpoint(s: GatewayServices, caller: Caller, body: api.EndpointRef) -> BaseModel:
    return await s.endpoints.get(body.endpoint_id, caller)


async def _replace_endpoint(s: GatewayServices, caller: Caller, body: api.ReplaceEndpointRequest) -> BaseModel:
    definition = EndpointRequest.model_validate(body.model_dump(exclude={"endpoint_id"}))
    return await s.endpoints.replace(body.endpoint_id, definition, caller)


async def _delete_endpoint(s: GatewayServices, caller: Caller, body: api.EndpointRef) -> None:
    await s.endpoints.delete(body.endpoint_id, caller)


async def _create_policy(s: GatewayServices, caller: Caller, body: PolicyRequest) -> BaseModel:
    return await s.policies.create(body, caller)


async def _list_policies(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await s.policies.list(caller)


async def _get_policy(s: GatewayServices, caller: Caller, body: api.PolicyRef) -> BaseModel:
    return await s.policies.get(body.policy_id, caller)


async def _policy_versions(s: GatewayServices, caller: Caller, body: api.PolicyRef) -> BaseModel:
    return await s.policies.versions(body.policy_id, caller)


async def _replace_policy(s: GatewayServices, caller: Caller, body: api.ReplacePolicyRequest) -> BaseModel:
    definition = PolicyRequest.model_validate(body.model_dump(exclude={"policy_id"}))
    return await s.policies.replace(body.policy_id, definition, caller)


async def _delete_policy(s: GatewayServices, caller: Caller, body: api.PolicyRef) -> None:
    await s.policies.delete(body.policy_id, caller)


async def _create_quota(s: GatewayServices, caller: Caller, body: QuotaRequest) -> BaseModel:
    return await s.quotas.create(body, caller)


async def _list_quotas(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await s.quotas.list(caller)


async def _get_quota(s: GatewayServices, caller: Caller, body: api.QuotaRef) -> BaseModel:
    return await s.quotas.get(body.quota_id, caller)


async def _replace_quota(s: GatewayServices, caller: Caller, body: api.ReplaceQuotaRequest) -> BaseModel:
    return await s.quotas.replace(
        body.quota_id, QuotaRequest.model_validate(body.model_dump(exclude={"quota_id"})), caller
    )


async def _delete_quota(s: GatewayServices, caller: Caller, body: api.QuotaRef) -> None:
    await s.quotas.delete(body.quota_id, caller)


async def _call(s: GatewayServices, caller: Caller, body: ToolCallRequest) -> dict[str, Any]:
    return await s.calls.call(body, caller, surface="nats")


async def _search(s: GatewayServices, caller: Caller, body: SearchRequest) -> BaseModel:
    # The owner may look into one namespace; anyone else asking for another one finds nothing.
    scope = caller.principal.scope
    namespace = scope if scope is not None else body.namespace
    return await search_visible(s.search, body, s.feed.catalog.view(namespace))


async def _state(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await reads.aggregator_state(s.backends.db, s.backends.settings, caller.principal, s.started_at)


async def _create_key(s: GatewayServices, caller: Caller, body: CreateKeyRequest) -> BaseModel:
    return await s.keys.create(body, caller.principal, caller)


async def _list_keys(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await s.keys.list(caller.principal)


async def _revoke_key(s: GatewayServices, caller: Caller, body: api.KeyRef) -> None:
    await s.keys.revoke(body.key_id, caller.principal, caller)


async def _list_apps(s: GatewayServices, caller: Caller, body: api.NoArguments) -> BaseModel:
    return await s.consents.apps(caller.principal)


async def _disconnect_app(s: GatewayServices, caller: Caller, body: api.AppRef) -> None:
    await s.consents.disconnect(body.app_id, caller)


async def _authorize(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await s.authorizations.start(body.server_id, caller)


async def _authorization(s: GatewayServices, caller: Caller, body: api.ServerRef) -> BaseModel:
    return await s.authorizations.state(body.server_id, caller)


async def _audit(s: GatewayServices, caller: Caller, body: api.AuditRequest) -> BaseModel:
    return await reads.audit_log(s.backends.db, caller.principal, body)


async def _approvals(s: GatewayServices, caller: Caller, body: api.ApprovalsRequest) -> BaseModel:
    caller.principal.require_manager("decide approvals")
    return ApprovalList(approvals=await s.approvals.listed(caller.principal, body.state, body.limit))


async def _approval(s: GatewayServices, caller: Caller, body: api.ApprovalRef) -> BaseModel:
    caller.principal.require_manager("decide approvals")
    return await s.approvals.read(body.approval_id, caller.principal)


async def _approve_call(s: GatewayServices, caller: Caller, body: api.DecideApprovalRequest) -> BaseModel:
    caller.principal.require_manager("decide approvals")
    return await s.approvals.decide(body.approval_id, caller.principal, True, body.comment)


async def _reject_call(s: GatewayServices, caller: Caller, body: api.DecideApprovalRequest) -> BaseModel:
    caller.principal.require_manager("decide approvals")
    return await s.approvals.decide(body.approval_id, caller.principal, False, body.comment)


HANDLERS: dict[str, Handler] = {
    "servers.register": _register,
    "servers.import_registry": _import_registry,
    "servers.import_plan": _import_plan,
    "servers.list": _list,
    "servers.get": _get,
    "servers.connect": _connect,
    "servers.disconnect": _disconnect,
    "servers.remove": _remove,
    "servers.authorize": _authorize,
    "servers.authorization": _authorization,
    "servers.tools": _tools,
    "servers.history": _history,
    "servers.refresh": _refresh,
    "servers.approve": _approve,
    "servers.approve_templates": _approve_templates,
    "servers.prompts": _prompts,
    "servers.approve_prompts": _approve_prompts,
    "servers.classify": _classify,
    "endpoints.create": _create_endpoint,
    "endpoints.list": _list_endpoints,
    "endpoints.get": _get_endpoint,
    "endpoints.replace": _replace_endpoint,
    "endpoints.delete": _delete_endpoint,
    "policies.create": _create_policy,
    "policies.list": _list_policies,
    "policies.get": _get_policy,
    "policies.versions": _policy_versions,
    "policies.replace": _replace_policy,
    "policies.delete": _delete_policy,
    "quotas.create": _create_quota,
    "quotas.list": _list_quotas,
    "quotas.get": _get_quota,
    "quotas.replace": _replace_quota,
    "quotas.delete": _delete_quota,
    "tools.call": _call,
    "search.query": _search,
    "aggregator.state": _state,
    "keys.create": _create_key,
    "keys.list": _list_keys,
    "keys.revoke": _revoke_key,
    "apps.list": _list_apps,
    "apps.disconnect": _disconnect_app,
    "audit.list": _audit,
    "approvals.list": _approvals,
    "approvals.get": _approval,
    "approvals.approve": _approve_call,
    "approvals.reject": _reject_call,
}
