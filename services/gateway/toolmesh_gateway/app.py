"""The gateway's FastAPI application, built around connections opened by the caller."""

from __future__ import annotations

import time

import httpx2
from fastapi import FastAPI

from toolmesh.credentials import CredentialBox
from toolmesh.platform.bus.topology import (
    approvals_bucket,
    idempotency_bucket,
    names_bucket,
    oauth_flows_bucket,
)
from toolmesh.platform.runtime import Backends
from toolmesh.search.setup import build_search
from toolmesh_gateway import observability
from toolmesh_gateway.approvals.gate import Approvals
from toolmesh_gateway.approvals.records import ApprovalRecords
from toolmesh_gateway.auth import Authenticator
from toolmesh_gateway.authorization_server.clients import ClientDirectory
from toolmesh_gateway.authorization_server.consent import Consents
from toolmesh_gateway.authorization_server.identity_provider import IdentityProvider
from toolmesh_gateway.authorization_server.provider import AuthorizationProvider
from toolmesh_gateway.authorization_server.revocation import AppRevocations
from toolmesh_gateway.authorization_server.routes import AuthorizationRoutes
from toolmesh_gateway.body_limit import BodyLimit
from toolmesh_gateway.call_audit import CallAudit
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.endpoints import EndpointService
from toolmesh_gateway.entry import GatewayEntry
from toolmesh_gateway.errors import install_error_handlers
from toolmesh_gateway.event_hub import EventHub
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.mount import mount_front_door
from toolmesh_gateway.idempotency import IdempotencyStore
from toolmesh_gateway.idempotent_http import IdempotencyMiddleware
from toolmesh_gateway.keys import KeyService
from toolmesh_gateway.policies.service import PolicyService
from toolmesh_gateway.quota_counters import QuotaCounters
from toolmesh_gateway.quota_meter import QuotaMeter
from toolmesh_gateway.quotas import QuotaService
from toolmesh_gateway.rate_limit import RateLimiter
from toolmesh_gateway.routers import (
    aggregator,
    approvals,
    audit,
    connected_apps,
    endpoints,
    events,
    identity,
    keys,
    policies,
    prompts,
    quotas,
    resources,
    search,
    server_cards,
    servers,
    tools,
    upstream_oauth,
)
from toolmesh_gateway.routers.console import mount_console
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.tool_calls import ToolCalls
from toolmesh_gateway.upstream_oauth.authorizing import UpstreamAuthorizations
from toolmesh_gateway.upstream_oauth.flows import FLOW_TTL_SECONDS, FlowStore

APPROVALS_KEPT_SECONDS = 86_400.0
"""How long a decided approval stays listed (``GET /api/v1/approvals``)."""
OAUTH_CLIENT_LIMITS = httpx2.Limits(max_connections=8, max_keepalive_connections=0)
"""Connections for fetching Client ID Metadata Documents (one short request each)."""


async def create_app(backends: Backends, box: CredentialBox) -> FastAPI:
    """An app serving ``/api/v1/...`` with OpenAPI at ``/openapi.json``."""
    settings = backends.settings
    app = FastAPI(title="toolmesh", version="0.1.0", summary="MCP server aggregator")
    app.state.backends = backends
    app.state.credential_box = box
    app.state.started_at = time.monotonic()
    authenticator = Authenticator(backends.db, backends.settings)
    app.state.authenticator = authenticator
    app.state.keys = KeyService(backends, authenticator)
    names = await names_bucket(backends.js, replicas=settings.nats_replicas)
    app.state.server_commands = ServerCommands(backends, names, box)
    app.state.endpoints = EndpointService(backends, names)
    flows = FlowStore(await oauth_flows_bucket(backends.js, FLOW_TTL_SECONDS, replicas=settings.nats_replicas), box)
    app.state.upstream_authorizations = UpstreamAuthorizations(backends, box, flows, app.state.server_commands)
    feed = CatalogFeed(backends.js, backends.db)
    feed.listeners.append(authenticator.on_event)
    await feed.start()
    app.state.catalog_feed = feed
    call_audit = CallAudit(backends.js)
    call_audit.start()
    app.state.call_audit = call_audit
    meter = QuotaMeter(backends.db, QuotaCounters(backends.js), settings.quota_refresh_seconds)
    await meter.start()
    app.state.quotas = QuotaService(backends, meter)
    pending = await approvals_bucket(backends.js, APPROVALS_KEPT_SECONDS, replicas=settings.nats_replicas)
    records = ApprovalRecords(pending, box)
    app.state.approvals = Approvals(records, backends.js, backends.bus, settings.approval_timeout_seconds)
    app.state.tool_calls = ToolCalls(
        backends.bus,
        backends.js,
        feed,
        backends.settings,
        call_audit,
        app.state.upstream_authorizations,
        backends.context.loop_lag,
        meter,
        app.state.approvals,
    )
    app.state.tool_calls.results.start()
    app.state.policies = PolicyService(backends)
    app.state.forwarder = Forwarder(backends.bus, app.state.tool_calls, backends.settings)
    revocations = AppRevocations(backends.db, backends.js, authenticator.forget)
    clients = ClientDirectory(backends.db, box, settings, OAUTH_CLIENT_LIMITS)
    provider = AuthorizationProvider(backends.db, settings, clients, revocations)
    identity_provider = IdentityProvider.configured(settings)
    app.state.consents = Consents(provider, revocations, feed.catalog, identity_provider)
    app.state.search = await build_search(backends)
    app.state.rate_limiter = RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    app.state.event_hub = EventHub(backends.js)
    await app.state.event_hub.start()
    kept = await idempotency_bucket(backends.js, settings.idempotency_window_seconds, replicas=settings.nats_replicas)
    app.state.idempotency = IdempotencyStore(kept, settings.idempotency_claim_seconds)
    install_error_handlers(app)
    app.add_middleware(IdempotencyMiddleware)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_body_bytes, max_depth=settings.max_request_json_depth)
    app.add_middleware(observability.TracingMiddleware)  # the last added runs first
    app.include_router(observability.router)
    app.include_router(servers.router)
    app.include_router(aggregator.router)
    app.include_router(aggregator.probes)
    app.include_router(tools.router)
    app.include_router(search.router)
    app.include_router(keys.router)
    app.include_router(audit.router)
    app.include_router(approvals.router)
    app.include_router(endpoints.router)
    app.include_router(policies.router)
    app.include_router(resources.router)
    app.include_router(prompts.router)
    app.include_router(identity.router)
    app.include_router(events.router)
    app.include_router(upstream_oauth.router)
    app.include_router(connected_apps.router)
    app.include_router(quotas.router)
    app.include_router(server_cards.router)
    app.router.routes.extend(AuthorizationRoutes(provider, settings, identity_provider).routes())
    mount_console(app)
    app.state.mcp = await mount_front_door(app, backends, feed, app.state.tool_calls)
    return app


def http_entry(app: FastAPI) -> GatewayEntry:
    """The ASGI app to serve over HTTP: ``app``'s MCP routes on their own short path, the rest through ``app``."""
    return GatewayEntry(app, app.state.mcp_routes, app.state.backends.settings, app.state.tool_calls.admission)


async def close_app(app: FastAPI) -> None:
    """Release what ``create_app`` opened (the front door, then the catalog feed's subscription)."""
    await app.state.mcp.close()
    await app.state.event_hub.close()
    await app.state.tool_calls.results.close()
    await app.state.call_audit.close()
    await app.state.tool_calls.quotas.close()
    await app.state.catalog_feed.close()
