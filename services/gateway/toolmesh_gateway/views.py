"""Rows of the read model turned into the contract's response bodies."""

from __future__ import annotations

from typing import Any

from toolmesh.categories import ToolCategory, categorize
from toolmesh.contracts.servers import HeldChange, HistoryEntry, ServerDetail, ServerSummary, ToolInfo
from toolmesh.contracts.upstream_auth import waits_for_authorization
from toolmesh.credentials import mask_config
from toolmesh.platform.store.queries import Row
from toolmesh.secret_text import MASK


def held_change(row: Row) -> HeldChange | None:
    """Why a tool is held back, or None when it is listed and callable."""
    if row["held_reason"] is None:
        return None
    return HeldChange(
        reason=row["held_reason"],
        fields=list(row["held_fields"] or []),
        definition_hash=row["definition_hash"],
        approved_hash=row["approved_hash"],
    )


def tool_category(row: Row) -> ToolCategory:
    """The projected category; for a row from before categories, the one its next tool list will give."""
    stored = row["category"]
    return ToolCategory(stored) if stored else categorize(row["original_name"] or row["name"], row["description"])


def tool_info(row: Row, *, with_schema: bool = False) -> ToolInfo:
    """One tool as listed by the API."""
    return ToolInfo(
        id=row["id"],
        name=row["name"],
        original_name=row["original_name"],
        description=row["description"],
        category=tool_category(row),
        skill_ids=list(row["skill_ids"] or []),
        primary_skill_id=row["primary_skill_id"],
        is_classified=row["is_classified"],
        discovered_at=row["discovered_at"],
        input_schema=row["input_schema"] if with_schema else None,
        held=held_change(row),
        classification_status=row["classification_status"],
        classification_error=row["classification_error"],
        title=row["title"],
        annotations=row["annotations"],
        output_schema=row["output_schema"] if with_schema else None,
    )


def server_summary(row: Row, tools: list[ToolInfo] | None = None) -> ServerSummary:
    """One server in a list."""
    return ServerSummary(
        id=row["id"],
        name=row["name"],
        namespace=row["namespace"],
        description=row["description"],
        transport_type=row["transport_type"],
        status=row["status"],
        tool_count=row["tool_count"],
        last_health_check=row["last_health_check"],
        registered_at=row["registered_at"],
        connected_at=row["connected_at"],
        created_by=row["created_by"],
        tools=tools,
        consecutive_failures=row["consecutive_failures"],
        last_response_time_ms=row["last_response_time_ms"],
        error_message=row["error_message"],
        needs_authorization=waits_for_authorization(row["status"], row["error_message"]),
    )


def shown_config(masked: dict[str, Any], *, command_visible: bool) -> dict[str, Any]:
    """A masked connection config as a caller sees it: without ``command_visible`` (a role that does
    not manage the server) a STDIO command's ``args`` are hidden entirely (``env`` values are masked for every role)."""
    shown = mask_config(masked)  # rows masked by older rules too
    if command_visible:
        return shown
    if shown.get("args"):
        shown["args"] = [MASK]
    return shown


def server_detail(row: Row, *, command_visible: bool = False) -> ServerDetail:
    """One server in full; the connection config shown is the masked copy, and a STDIO command's
    ``args`` only for ``command_visible`` (callers that manage the server)."""
    return ServerDetail(
        id=row["id"],
        name=row["name"],
        namespace=row["namespace"],
        new_tools=row["new_tools"],
        description=row["description"],
        transport_type=row["transport_type"],
        connection_config=shown_config(row["connection_config"].get("masked", {}), command_visible=command_visible),
        status=row["status"],
        health_check_url=row["health_check_url"],
        last_health_check=row["last_health_check"],
        tool_count=row["tool_count"],
        error_message=row["error_message"],
        registered_at=row["registered_at"],
        connected_at=row["connected_at"],
        updated_at=row["updated_at"],
        consecutive_failures=row["consecutive_failures"],
        last_response_time_ms=row["last_response_time_ms"],
        last_error=row["last_error"],
        created_by=row["created_by"],
        next_retry_at=row["retry_at"],
        needs_authorization=waits_for_authorization(row["status"], row["error_message"]),
    )


def history_entry(row: Row) -> HistoryEntry:
    """One connection-history row."""
    return HistoryEntry(event_type=row["event_type"], details=row["details"], timestamp=row["timestamp"])
