"""Reads of the read model as one caller sees them, shared by the REST routes and the NATS API."""

from __future__ import annotations

import time

import asyncpg

from toolmesh.contracts.aggregator import AggregatorState
from toolmesh.contracts.api_requests import AuditRequest, ListServersRequest
from toolmesh.contracts.audit import AuditEntry, AuditPage
from toolmesh.contracts.resources import HeldPrompt, PromptList
from toolmesh.contracts.servers import HistoryEntry, ServerList, ToolInfo, ToolList
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.config import Settings
from toolmesh.platform.store import queries
from toolmesh_gateway.audit_log import audit_page
from toolmesh_gateway.auth import Caller, Principal
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.views import history_entry, server_summary, tool_info

S = ServerStatus


async def list_servers(db: asyncpg.Pool, principal: Principal, request: ListServersRequest) -> ServerList:
    """A page of the caller's servers (the owner sees every namespace, or the one it names)."""
    limit, offset = request.limit, request.offset
    if principal.scope is not None and request.namespace not in (None, principal.scope):
        return ServerList(servers=[], total=0, limit=limit, offset=offset)
    scope = principal.scope if principal.scope is not None else request.namespace
    rows, total = await queries.list_servers(
        db, scope, status=request.status, limit=limit, offset=offset, agent=request.agent
    )
    tools_by_server: dict[str, list[ToolInfo]] = {r["id"]: [] for r in rows}
    if request.include_tools and rows:
        for tool in await queries.list_tools(db, list(tools_by_server)):
            tools_by_server[tool["server_id"]].append(tool_info(tool))
    return ServerList(
        servers=[server_summary(r, tools_by_server[r["id"]] if request.include_tools else None) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )


async def server_tools(
    db: asyncpg.Pool, commands: ServerCommands, caller: Caller, server_id: str, include_schemas: bool
) -> ToolList:
    """The tools discovered on one of the caller's servers; held tools say why they are held."""
    await commands.server(server_id, caller)
    tools = [tool_info(t, with_schema=include_schemas) for t in await queries.list_tools(db, [server_id])]
    classified = sum(1 for t in tools if t.is_classified)
    held = sum(1 for t in tools if t.held is not None)
    return ToolList(
        tools=tools, total=len(tools), classified=classified, unclassified=len(tools) - classified, held=held
    )


async def server_prompts(db: asyncpg.Pool, commands: ServerCommands, caller: Caller, server_id: str) -> PromptList:
    """The approved prompts of one of the caller's servers, as the upstream listed them, and the held
    ones by name with why they are held."""
    await commands.server(server_id, caller)
    rows = await queries.list_prompts(db, server_id)
    shown = [r["item"] for r in rows if r["held_reason"] is None]
    held = [
        HeldPrompt(name=r["original_name"], reason=r["held_reason"], fields=list(r["held_fields"] or []))
        for r in rows
        if r["held_reason"] is not None
    ]
    return PromptList(prompts=shown, total=len(shown), held=held)


async def server_history(
    db: asyncpg.Pool, commands: ServerCommands, caller: Caller, server_id: str
) -> list[HistoryEntry]:
    """The connection history of one of the caller's servers, oldest first."""
    await commands.server(server_id, caller)
    return [history_entry(r) for r in await queries.connection_history(db, server_id)]


async def aggregator_state(
    db: asyncpg.Pool, settings: Settings, principal: Principal, started_at: float
) -> AggregatorState:
    """Counts of the caller's servers by status and of their tools, and how long this gateway has run."""
    counts = await queries.status_counts(db, principal.scope)
    tools = await queries.tool_counts(db, principal.scope)
    return AggregatorState(
        total_servers=sum(counts.values()),
        connected_servers=counts.get(S.CONNECTED, 0),
        degraded_servers=counts.get(S.DEGRADED, 0),
        disconnected_servers=counts.get(S.DISCONNECTED, 0),
        error_servers=counts.get(S.ERROR, 0),
        connecting_servers=counts.get(S.CONNECTING, 0),
        total_tools=tools["total"],
        classified_tools=tools["classified"],
        unclassified_tools=tools["total"] - tools["classified"],
        held_tools=tools["held"],
        last_sync=tools["last_sync"],
        health_check_interval_seconds=settings.health_interval_seconds,
        uptime_seconds=round(time.monotonic() - started_at, 3),
    )


async def audit_log(db: asyncpg.Pool, principal: Principal, request: AuditRequest) -> AuditPage:
    """Audited operations and tool calls, newest first (admins: their namespace only)."""
    principal.require_manager("read the audit log")
    scope, limit, offset = principal.scope, request.limit, request.offset
    if scope is not None and request.namespace not in (None, scope):
        return AuditPage(entries=[], total=0, limit=limit, offset=offset)
    rows, total = await audit_page(
        db, namespace=scope or request.namespace, actor=request.actor, event=request.event, limit=limit, offset=offset
    )
    return AuditPage(entries=[AuditEntry(**dict(r)) for r in rows], total=total, limit=limit, offset=offset)
