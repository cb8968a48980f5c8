"""Rows of the read model turned into the contract's response bodies."""

from __future__ import annotations

from toolmesh.contracts.servers import HistoryEntry, ServerDetail, ServerSummary, ToolInfo
from toolmesh.store.queries import Row


def tool_info(row: Row, *, with_schema: bool = False) -> ToolInfo:
    """One tool as listed by the API."""
    return ToolInfo(
        id=row["id"],
        name=row["name"],
        original_name=row["original_name"],
        description=row["description"],
        skill_ids=list(row["skill_ids"] or []),
        primary_skill_id=row["primary_skill_id"],
        is_classified=row["is_classified"],
        discovered_at=row["discovered_at"],
        input_schema=row["input_schema"] if with_schema else None,
    )


def server_summary(row: Row, tools: list[ToolInfo] | None = None) -> ServerSummary:
    """One server in a list."""
    return ServerSummary(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        transport_type=row["transport_type"],
        status=row["status"],
        tool_count=row["tool_count"],
        last_health_check=row["last_health_check"],
        registered_at=row["registered_at"],
        connected_at=row["connected_at"],
        tools=tools,
    )


def server_detail(row: Row) -> ServerDetail:
    """One server in full; the connection config shown is the masked copy."""
    return ServerDetail(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        transport_type=row["transport_type"],
        connection_config=row["connection_config"].get("masked", {}),
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
    )


def history_entry(row: Row) -> HistoryEntry:
    """One connection-history row."""
    return HistoryEntry(event_type=row["event_type"], details=row["details"], timestamp=row["timestamp"])
