"""The request payloads of the API's operations (``toolmesh.contracts.api``) that name a resource by
id or narrow a listing; a resource's own model (a server's registration, a policy, a quota) lives with
the resource."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from toolmesh.contracts.approvals import APPROVAL_ID_PATTERN, ApprovalState
from toolmesh.contracts.endpoints import EndpointRequest
from toolmesh.contracts.policies import PolicyRequest
from toolmesh.contracts.quotas import QuotaRequest
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import NAMESPACE_PATTERN, STORABLE_TEXT


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArguments(_Strict):
    """Operations that take nothing: send ``{}``."""


class ServerRef(_Strict):
    """One server of the caller's namespace, by id."""

    server_id: str = Field(min_length=1, max_length=64)


class ServerToolsRequest(ServerRef):
    """``servers.tools``: the tools of one server."""

    include_schemas: bool = False


class DisconnectServerRequest(ServerRef):
    """``servers.disconnect``: drain pending calls (up to 30 s), or cancel them with ``force``."""

    force: bool = False


class ApproveServerToolsRequest(ServerRef):
    """``servers.approve``: approve these held tools (every held tool when ``tools`` is omitted)."""

    tools: list[str] | None = None


class ApproveServerTemplatesRequest(ServerRef):
    """``servers.approve_templates``: approve these held resource templates (every held one when omitted)."""

    templates: list[str] | None = None


class ApproveServerPromptsRequest(ServerRef):
    """``servers.approve_prompts``: approve these held prompts, by original name (every held one when omitted)."""

    prompts: list[str] | None = None


class ListServersRequest(_Strict):
    """``servers.list``: a page of the caller's servers."""

    status: ServerStatus | None = None
    include_tools: bool = False
    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN, description="owner only: one namespace")
    agent: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=r"^[^\x00]*$", description="only its servers, newest first"
    )
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=2**31 - 1)


class EndpointRef(_Strict):
    """One endpoint (bundle) of the caller's namespace, by id."""

    endpoint_id: str = Field(min_length=1, max_length=64)


class ReplaceEndpointRequest(EndpointRequest):
    """``endpoints.replace``: the endpoint's id and its whole new definition."""

    endpoint_id: str = Field(min_length=1, max_length=64)


class PolicyRef(_Strict):
    """One policy the caller manages, by id."""

    policy_id: str = Field(min_length=1, max_length=64)


class ReplacePolicyRequest(PolicyRequest):
    """``policies.replace``: the policy's id and its whole new definition."""

    policy_id: str = Field(min_length=1, max_length=64)


class QuotaRef(_Strict):
    """One quota of the caller's namespace, by id."""

    quota_id: str = Field(min_length=1, max_length=64)


class ReplaceQuotaRequest(QuotaRequest):
    """``quotas.replace``: the quota's id and its whole new definition."""

    quota_id: str = Field(min_length=1, max_length=64)


class KeyRef(_Strict):
    """``keys.revoke``: one key of the caller's namespace, by id."""

    key_id: str = Field(min_length=1, max_length=64)


class AppRef(_Strict):
    """``apps.disconnect``: one connected app (an MCP client signed in with OAuth) the caller sees, by id."""

    app_id: str = Field(min_length=1, max_length=64)


class ApprovalsRequest(_Strict):
    """``approvals.list``: pending and recent approvals of tool calls, newest first."""

    state: ApprovalState | None = None
    limit: int = Field(default=100, ge=1, le=1000)


class ApprovalRef(_Strict):
    """``approvals.get``: one approval of the caller's namespace, by id."""

    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)


class DecideApprovalRequest(_Strict):
    """``approvals.approve`` / ``approvals.reject``: a decision, with an optional comment."""

    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)
    comment: str | None = Field(default=None, max_length=2000, pattern=STORABLE_TEXT)


class AuditRequest(_Strict):
    """``audit.list``: audited operations and tool calls, newest first."""

    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN)
    actor: str | None = Field(default=None, max_length=256)
    event: str | None = Field(default=None, max_length=64, description="e.g. server.registered, tool.called")
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
