"""The public NATS API: request/reply on ``toolmesh.api.<version>.<resource>.<verb>``.

Every operation the REST API offers is also a NATS request, with the same payload models, the
same authorization (the caller's key in the ``Authorization`` header) and the same error codes.
A reply is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"detail", "error_code",
"context"}}``. Each operation is declared once here, with its subject, request and result models
and the REST route that does the same thing, so the gateway, the Python client and the AsyncAPI
document are all built from this table. Resources added later (``endpoints``, ``bundles``) are new
rows under the same version; a change that breaks a payload is a new version (``v2``) served next
to the old one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from toolmesh.contracts.aggregator import AggregatorState, ErrorBody, ResealReport
from toolmesh.contracts.api_requests import (
    AppRef,
    ApprovalRef,
    ApprovalsRequest,
    ApproveServerPromptsRequest,
    ApproveServerTemplatesRequest,
    ApproveServerToolsRequest,
    AuditRequest,
    DecideApprovalRequest,
    DisconnectServerRequest,
    EndpointRef,
    KeyRef,
    ListServersRequest,
    NoArguments,
    PolicyRef,
    QuotaRef,
    ReplaceEndpointRequest,
    ReplacePolicyRequest,
    ReplaceQuotaRequest,
    ServerRef,
    ServerToolsRequest,
)
from toolmesh.contracts.approvals import Approval, ApprovalList
from toolmesh.contracts.audit import AuditPage
from toolmesh.contracts.connected_apps import ConnectedAppList
from toolmesh.contracts.endpoints import EndpointInfo, EndpointList, EndpointRequest
from toolmesh.contracts.keys import CreatedKey, CreateKeyRequest, KeyList
from toolmesh.contracts.policies import PolicyInfo, PolicyList, PolicyRequest, PolicyVersionList
from toolmesh.contracts.quotas import QuotaInfo, QuotaList, QuotaRequest
from toolmesh.contracts.registry_import import RegistryImportPlan, RegistryImportRequest, RegistryPlanRequest
from toolmesh.contracts.resources import ApprovePromptsResponse, ApproveTemplatesResponse, PromptList
from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.contracts.servers import (
    ApproveToolsResponse,
    ClassifyResponse,
    ConnectResponse,
    DisconnectResponse,
    HistoryEntry,
    RefreshResponse,
    RegisterServerRequest,
    ServerCreated,
    ServerDetail,
    ServerList,
    ToolList,
)
from toolmesh.contracts.tools import ToolCallRequest, ToolCallResponse
from toolmesh.contracts.upstream_auth import AuthorizationState, AuthorizeResponse

API_PREFIX = "toolmesh.api"
API_VERSION = "v1"
SUPPORTED_VERSIONS = (API_VERSION,)
API_WILDCARD = f"{API_PREFIX}.>"
API_QUEUE = "toolmesh-api"
"""The queue group of every gateway replica: one of them answers each request."""
UNSERVED_QUEUE = "toolmesh-api-unserved"
"""The queue group answering subjects no operation serves. NATS groups queue subscriptions by name
whatever their subjects, so it must not share ``API_QUEUE`` (it would take the served requests)."""
AUTHORIZATION_HEADER = "Authorization"
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
"""Set to ``true`` on a reply (NATS header or HTTP header) that repeats a stored first result."""
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"


def api_subject(operation: str, version: str = API_VERSION) -> str:
    """The request subject of one operation, e.g. ``toolmesh.api.v1.servers.register``."""
    return f"{API_PREFIX}.{version}.{operation}"


T = TypeVar("T")


class ApiSuccess(BaseModel, Generic[T]):
    """The reply of an operation that succeeded."""

    ok: Literal[True] = True
    result: T


class ApiFailure(BaseModel):
    """The reply of an operation that failed: the error body of the REST API."""

    ok: Literal[False] = False
    error: ErrorBody


@dataclass(frozen=True)
class Operation:
    """One request/reply operation of the API, and the REST route that does the same."""

    name: str
    request: type[BaseModel]
    result: Any
    summary: str
    write: bool
    method: str
    path: str

    @property
    def subject(self) -> str:
        """Its subject in the current version."""
        return api_subject(self.name)

    @property
    def path_fields(self) -> tuple[str, ...]:
        """Request fields that the REST route takes in its path."""
        return tuple(f for f in self.request.model_fields if "{" + f + "}" in self.path)


SERVERS = "/api/v1/aggregator/servers"
APPROVALS = "/api/v1/approvals"
SERVER = SERVERS + "/{server_id}"
ENDPOINTS = "/api/v1/endpoints"
ENDPOINT = ENDPOINTS + "/{endpoint_id}"
APPS = "/api/v1/auth/apps"
POLICIES = "/api/v1/policies"
POLICY = POLICIES + "/{policy_id}"
QUOTAS = "/api/v1/quotas"
QUOTA = QUOTAS + "/{quota_id}"

AUTHORIZE = Operation(
    "servers.authorize",
    ServerRef,
    AuthorizeResponse,
    "Start the OAuth authorization of a server (shared identity: owner or admin; per-user: for yourself)",
    True,
    "POST",
    SERVER + "/authorize",
)
AUTHORIZATION = Operation(
    "servers.authorization",
    ServerRef,
    AuthorizationState,
    "Whether a server holds an OAuth grant for you (per-user identity) or for everyone (shared)",
    False,
    "GET",
    SERVER + "/authorization",
)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "servers.register", RegisterServerRequest, ServerCreated, "Register a server (BR-001)", True, "POST", SERVERS
    ),
    Operation(
        "servers.import_registry",
        RegistryImportRequest,
        ServerCreated,
        "Register an MCP Registry server.json entry, with values for its inputs",
        True,
        "POST",
        SERVERS + "/import-registry",
    ),
    Operation(
        "servers.import_plan",
        RegistryPlanRequest,
        RegistryImportPlan,
        "What importing an MCP Registry server.json entry would register, and the inputs it takes",
        False,
        "POST",
        SERVERS + "/import-registry/plan",
    ),
    Operation("servers.list", ListServersRequest, ServerList, "A page of the caller's servers", False, "GET", SERVERS),
    Operation("servers.get", ServerRef, ServerDetail, "One server, its config masked", False, "GET", SERVER),
    Operation("servers.connect", ServerRef, ConnectResponse, "Connect (BR-002)", True, "POST", SERVER + "/connect"),
    Operation(
        "servers.disconnect",
        DisconnectServerRequest,
        DisconnectResponse,
        "Disconnect (BR-007), draining or cancelling pending calls",
        True,
        "POST",
        SERVER + "/disconnect",
    ),
    Operation("servers.remove", ServerRef, None, "Remove a server and its tools (BR-008)", True, "DELETE", SERVER),
    AUTHORIZE,
    AUTHORIZATION,
    Operation(
        "servers.tools", ServerToolsRequest, ToolList, "The tools of one server", False, "GET", SERVER + "/tools"
    ),
    Operation(
        "servers.history",
        ServerRef,
        list[HistoryEntry],
        "The connection history of one server",
        False,
        "GET",
        SERVER + "/history",
    ),
    Operation(
        "servers.refresh",
        ServerRef,
        RefreshResponse,
        "Run tool discovery again",
        True,
        "POST",
        SERVER + "/tools/refresh",
    ),
    Operation(
        "servers.approve",
        ApproveServerToolsRequest,
        ApproveToolsResponse,
        "Approve held tool definitions",
        True,
        "POST",
        SERVER + "/tools/approve",
    ),
    Operation(
        "servers.approve_templates",
        ApproveServerTemplatesRequest,
        ApproveTemplatesResponse,
        "Approve held resource templates (flagged by the poisoning scan)",
        True,
        "POST",
        SERVER + "/resources/approve",
    ),
    Operation(
        "servers.prompts",
        ServerRef,
        PromptList,
        "The prompts of one server, and those held for approval",
        False,
        "GET",
        SERVER + "/prompts",
    ),
    Operation(
        "servers.approve_prompts",
        ApproveServerPromptsRequest,
        ApprovePromptsResponse,
        "Approve held prompts (changed, new under review, or flagged by the poisoning scan)",
        True,
        "POST",
        SERVER + "/prompts/approve",
    ),
    Operation(
        "tools.call", ToolCallRequest, ToolCallResponse, "Call a tool (BR-005)", True, "POST", "/api/v1/tools/call"
    ),
    Operation("search.query", SearchRequest, SearchResponse, "Hybrid tool search", False, "POST", "/api/v1/search"),
    Operation(
        "aggregator.state",
        NoArguments,
        AggregatorState,
        "Counts of servers by status and of tools",
        False,
        "GET",
        "/api/v1/aggregator/state",
    ),
    Operation(
        "servers.classify",
        ServerRef,
        ClassifyResponse,
        "Classify the server's tools again (those UNCLASSIFIED after failed attempts)",
        True,
        "POST",
        SERVER + "/tools/classify",
    ),
    Operation(
        "endpoints.create",
        EndpointRequest,
        EndpointInfo,
        "Create an endpoint (bundle) served at /mcp/{name}",
        True,
        "POST",
        ENDPOINTS,
    ),
    Operation("endpoints.list", NoArguments, EndpointList, "The endpoints of the caller", False, "GET", ENDPOINTS),
    Operation("endpoints.get", EndpointRef, EndpointInfo, "One endpoint", False, "GET", ENDPOINT),
    Operation(
        "endpoints.replace",
        ReplaceEndpointRequest,
        EndpointInfo,
        "Replace an endpoint's definition",
        True,
        "PUT",
        ENDPOINT,
    ),
    Operation("endpoints.delete", EndpointRef, None, "Delete an endpoint", True, "DELETE", ENDPOINT),
    Operation(
        "policies.create", PolicyRequest, PolicyInfo, "Create a policy on tool calls (CEL)", True, "POST", POLICIES
    ),
    Operation(
        "policies.list",
        NoArguments,
        PolicyList,
        "The policies of the caller's namespace and the global ones",
        False,
        "GET",
        POLICIES,
    ),
    Operation("policies.get", PolicyRef, PolicyInfo, "One policy", False, "GET", POLICY),
    Operation(
        "policies.versions",
        PolicyRef,
        PolicyVersionList,
        "Every version of a policy",
        False,
        "GET",
        POLICY + "/versions",
    ),
    Operation(
        "policies.replace", ReplacePolicyRequest, PolicyInfo, "Replace a policy's definition", True, "PUT", POLICY
    ),
    Operation("policies.delete", PolicyRef, None, "Delete a policy", True, "DELETE", POLICY),
    Operation(
        "quotas.create",
        QuotaRequest,
        QuotaInfo,
        "Set a quota of tool calls per minute, day and/or month on a key, a namespace or a server",
        True,
        "POST",
        QUOTAS,
    ),
    Operation("quotas.list", NoArguments, QuotaList, "The quotas of the caller, with usage", False, "GET", QUOTAS),
    Operation("quotas.get", QuotaRef, QuotaInfo, "One quota, with usage", False, "GET", QUOTA),
    Operation("quotas.replace", ReplaceQuotaRequest, QuotaInfo, "Change a quota", True, "PUT", QUOTA),
    Operation("quotas.delete", QuotaRef, None, "Remove a quota", True, "DELETE", QUOTA),
    Operation("keys.create", CreateKeyRequest, CreatedKey, "Create an API key", True, "POST", "/api/v1/auth/keys"),
    Operation("keys.list", NoArguments, KeyList, "The keys the caller manages", False, "GET", "/api/v1/auth/keys"),
    Operation("keys.revoke", KeyRef, None, "Revoke an API key", True, "DELETE", "/api/v1/auth/keys/{key_id}"),
    Operation(
        "apps.list",
        NoArguments,
        ConnectedAppList,
        "Connected apps (MCP clients signed in with OAuth): your own; an admin's namespace's; the owner's all",
        False,
        "GET",
        APPS,
    ),
    Operation("apps.disconnect", AppRef, None, "Revoke a connected app's tokens", True, "DELETE", APPS + "/{app_id}"),
    Operation("audit.list", AuditRequest, AuditPage, "The audit log", False, "GET", "/api/v1/audit"),
    Operation(
        "approvals.list",
        ApprovalsRequest,
        ApprovalList,
        "Tool calls waiting for a human, and recent decisions (admins, owner)",
        False,
        "GET",
        APPROVALS,
    ),
    Operation("approvals.get", ApprovalRef, Approval, "One approval", False, "GET", APPROVALS + "/{approval_id}"),
    Operation(
        "approvals.approve",
        DecideApprovalRequest,
        Approval,
        "Let a waiting tool call run",
        True,
        "POST",
        APPROVALS + "/{approval_id}/approve",
    ),
    Operation(
        "approvals.reject",
        DecideApprovalRequest,
        Approval,
        "Refuse a waiting tool call (its caller gets APPROVAL_REJECTED with the comment)",
        True,
        "POST",
        APPROVALS + "/{approval_id}/reject",
    ),
)
OPERATIONS_BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
OPERATIONS_BY_SUBJECT: dict[str, Operation] = {op.subject: op for op in OPERATIONS}

# Operations of the REST API alone (not in ``OPERATIONS``: no NATS subject serves them).
RESEAL = Operation(
    "credentials.reseal",
    NoArguments,
    ResealReport,
    "Seal every server's config again under the current credential key (REST only)",
    True,
    "POST",
    "/api/v1/aggregator/credentials/reseal",
)


def reply_model(operation: Operation) -> Any:
    """The pydantic type of the operation's reply (success or failure)."""
    return ApiSuccess[operation.result] | ApiFailure  # type: ignore[name-defined]
