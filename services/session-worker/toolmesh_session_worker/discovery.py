"""Turning an upstream's lists (tools, resources, templates, prompts) and initialize result into events,
a tool list into the ``tools.changed`` event when definitions wait for approval (rug-pull defence),
and into a ``tool.discovered`` event per tool the server did not list before."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types
from pydantic import BaseModel

from toolmesh.contracts.events import (
    DiscoveredPrompt,
    DiscoveredResource,
    DiscoveredResourceTemplate,
    DiscoveredTool,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerDescribed,
    ToolChange,
    ToolDiscovered,
    ToolsChanged,
    ToolsDiscovered,
)
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.naming import namespace_tool
from toolmesh.pinning import approvals, definition_hash, inherit, recorded, review, upgraded_approval
from toolmesh.platform.config import Settings
from toolmesh.platform.store.queries import Row
from toolmesh.poisoning.holds import flagged_tools
from toolmesh.tool_definitions import PRESENTATION, refusal, shown_name

log = logging.getLogger("toolmesh.discovery")


@dataclass(frozen=True)
class ToolLimits:
    """How many tools of one server, and how large a description and input schema, discovery keeps."""

    per_server: int
    description_chars: int
    schema_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> ToolLimits:
        """The limits the settings give."""
        return cls(settings.max_tools_per_server, settings.max_tool_description_chars, settings.max_tool_schema_bytes)


def tools_snapshot(
    server_id: str, server_name: str, namespace: str, tools: list[mcp_types.Tool], limits: ToolLimits
) -> ToolsDiscovered:
    """The ``tools.discovered`` event for a full tool list (duplicates keep the last, BR-003).

    A tool whose name breaks the MCP tool-name rule, or whose description or input schema is past
    ``limits``, is left out with a warning and counted in the event's ``left_out``. Each tool is
    recorded with its title, annotations, output schema and icons (``toolmesh.pinning.recorded``).
    """
    by_name: dict[str, DiscoveredTool] = {}
    left_out = 0
    for tool in tools:
        definition = recorded(tool)
        why = refusal(
            tool.name,
            tool.description,
            tool.input_schema,
            presentation={k: getattr(definition, k) for k in PRESENTATION},
            max_description=limits.description_chars,
            max_schema=limits.schema_bytes,
        )
        if why is not None:
            left_out += 1
            log.warning(
                "server %s lists tool %s; left out: %s",
                server_name,
                shown_name(tool.name),
                why,
                extra={"server": server_name, "security": True},
            )
            continue
        by_name[definition.original_name] = definition
    found = list(by_name.values())
    if not found:
        log.warning("server %s returned an empty tool list", server_name, extra={"server": server_name})
    limit = limits.per_server
    if len(found) > limit:
        log.warning(
            "server %s has %d tools; keeping the first %d (max tools per server)",
            server_name,
            len(found),
            limit,
            extra={"server": server_name},
        )
        found = found[:limit]
    return ToolsDiscovered(
        server_id=server_id, namespace=namespace, server_name=server_name, tools=found, left_out=left_out
    )


def newly_held(
    snapshot: ToolsDiscovered, server: Row | None, stored: list[Row], left: Mapping[str, str | None] | None = None
) -> ToolsChanged | None:
    """The ``tools.changed`` event for tools this snapshot holds back that were not held already
    with the same definition (a hash from before the upgrade counts, see ``upgraded_approval``; None
    when there is nothing new to report); ``left``: the pins a removed server of the same name left,
    for the server's first list."""
    if server is None:
        return None
    listed = {t.original_name: definition_hash(t) for t in snapshot.tools}
    descriptions = {t.original_name: t.description for t in snapshot.tools}
    approved, first_list = inherit(
        approvals(((r["original_name"], r["definition_hash"], r["approved_hash"]) for r in stored), listed),
        first_list=not server["tools_seen"],
        left=left,
    )
    policy = NewToolsPolicy(server["new_tools"])
    pins = review(listed.items(), approved, first_list=first_list, policy=policy, flagged=flagged_tools(snapshot.tools))
    already = {r["original_name"]: r["definition_hash"] for r in stored if r["held_reason"] is not None}
    changes = [
        ToolChange(
            original_name=name,
            reason=pin.hold.reason,  # type: ignore[arg-type]
            fields=pin.hold.fields,
            approved_hash=pin.approved_hash,
            definition_hash=pin.definition_hash,
            description=descriptions[name],
        )
        for name, pin in sorted(pins.items())
        if pin.hold is not None and upgraded_approval(already.get(name, ""), pin.definition_hash) != pin.definition_hash
    ]
    if not changes:
        return None
    return ToolsChanged(
        server_id=snapshot.server_id, namespace=snapshot.namespace, server_name=snapshot.server_name, changes=changes
    )


def newly_discovered(snapshot: ToolsDiscovered, stored: list[Row]) -> list[ToolDiscovered]:
    """A ``tool.discovered`` event for each tool of the snapshot that the server's stored tools
    (rows with ``original_name``) do not have."""
    known = {row["original_name"] for row in stored}
    return [
        ToolDiscovered(
            server_id=snapshot.server_id,
            namespace=snapshot.namespace,
            server_name=snapshot.server_name,
            name=namespace_tool(snapshot.server_name, tool.original_name),
            original_name=tool.original_name,
            description=tool.description,
            category=tool.category,
        )
        for tool in snapshot.tools
        if tool.original_name not in known
    ]


def _wire(item: BaseModel) -> dict[str, Any]:
    return item.model_dump(by_alias=True, mode="json", exclude_none=True)


def resources_snapshot(
    server_id: str,
    server_name: str,
    namespace: str,
    resources: list[mcp_types.Resource],
    templates: list[mcp_types.ResourceTemplate],
) -> ResourcesDiscovered:
    """The ``resources.discovered`` event: every resource and template as the upstream spelled it
    (a repeated URI keeps the last)."""
    by_uri = {str(r.uri): DiscoveredResource(uri=str(r.uri), item=_wire(r)) for r in resources}
    by_template = {
        t.uri_template: DiscoveredResourceTemplate(uri_template=t.uri_template, item=_wire(t)) for t in templates
    }
    return ResourcesDiscovered(
        server_id=server_id,
        namespace=namespace,
        server_name=server_name,
        resources=list(by_uri.values()),
        templates=list(by_template.values()),
    )


def prompts_snapshot(
    server_id: str, server_name: str, namespace: str, prompts: list[mcp_types.Prompt]
) -> PromptsDiscovered:
    """The ``prompts.discovered`` event (a repeated name keeps the last)."""
    by_name = {p.name: DiscoveredPrompt(original_name=p.name, item=_wire(p)) for p in prompts}
    return PromptsDiscovered(
        server_id=server_id, namespace=namespace, server_name=server_name, prompts=list(by_name.values())
    )


def description(
    server_id: str,
    namespace: str,
    result: mcp_types.InitializeResult,
    modern_versions: tuple[str, ...] = (),
    modern_only: Mapping[str, tuple[str, ...]] | None = None,
    modern_tasks: bool = False,
) -> ServerDescribed:
    """The ``server.described`` event of an upstream's initialize result (and the 2026-07-28-era
    versions it named in ``server/discover``, what it lists in that era only, whether it runs tasks)."""
    return ServerDescribed(
        modern_versions=list(modern_versions),
        modern_tasks=modern_tasks,
        modern_only={kind: list(keys) for kind, keys in (modern_only or {}).items() if keys},
        server_id=server_id,
        namespace=namespace,
        protocol_version=result.protocol_version,
        capabilities=_wire(result.capabilities),
        server_info=_wire(result.server_info),
        instructions=result.instructions,
    )
