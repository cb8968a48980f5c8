"""The tool lists of the two modes, and tool results as the MCP wire spells them.

*all*: every tool of every CONNECTED or DEGRADED server, under a public name (``names``).
*search*: three meta-tools: ``search_tools``, ``call_tool`` (namespaced ``server.tool``), ``run``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types

from toolmesh.errors import ToolmeshError
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.front_door.names import NameMap

Mode = Literal["all", "search"]
MODES: tuple[Mode, ...] = ("all", "search")
SEARCH_TOOLS, CALL_TOOL, RUN = "search_tools", "call_tool", "run"
CATEGORY_META = "toolmesh/category"
"""``_meta`` key of a listed tool's category (memory, search, file, ...)."""

META_TOOLS = [
    mcp_types.Tool(
        name=SEARCH_TOOLS,
        description="Find tools of the servers behind this gateway by what they do (hybrid semantic + keyword "
        "search). Returns namespaced names (server.tool) with descriptions and input schemas, for call_tool. "
        'With group_by "server": the servers that fit, best first, each with its best matching tools (no '
        "schemas: search again with server_filter for them). When more results follow, the answer has a "
        "next_cursor: repeat the call with the same query, filter and group_by, and that cursor, for the next page.",
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do"},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                    "default": 10,
                    "description": "Results per page (servers when grouped by server)",
                },
                "server_filter": {"type": "array", "items": {"type": "string"}, "description": "Only these servers"},
                "group_by": {
                    "type": "string",
                    "enum": ["tool", "server"],
                    "default": "tool",
                    "description": "tool: a page of tools; server: a page of servers with their best tools",
                },
                "tools_per_server": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "default": 3,
                    "description": "With group_by server: how many of each server's best tools to show",
                },
                "cursor": {"type": "string", "description": "next_cursor of the previous page of this search"},
            },
            "required": ["query"],
        },
    ),
    mcp_types.Tool(
        name=CALL_TOOL,
        description="Call a tool by its namespaced name (server.tool) as search_tools returned it.",
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Namespaced tool name, e.g. github.create_issue"},
                "arguments": {"type": "object", "description": "The tool's arguments"},
            },
            "required": ["name"],
        },
    ),
    mcp_types.Tool(
        name=RUN,
        description="Run Python code in a sandbox. Every server is a pack: `x = server.tool(arg=...)` calls a tool "
        "and returns its structured result (or text), so calls chain within one snippet. `proxy.list_servers()`, "
        "`proxy.list_tools(server=...)` and `toolmesh.search(query)` help find tools. No imports of os, files or "
        "network. The value of the last expression is returned, with everything printed.",
        input_schema={
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python source"},
                "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["code"],
        },
    ),
]


@dataclass
class AllTools:
    """The "all tools" listing of one catalog version, with its name map (rebuilt when the version moves)."""

    version: int
    names: NameMap
    tools: list[mcp_types.Tool]


def all_tools(catalog: CatalogView, separator: str) -> AllTools:
    """Every visible tool under its public name, with its pinned title, annotations and output
    schema; the title and description say where it comes from (an endpoint's overrides rename and
    re-describe tools).

    Held tools get a name too (a call then says why it is refused) but are not listed; naming them
    keeps every other tool's name stable while one is held.
    """
    named = catalog.visible(include_held=True)
    renames = catalog.renames()
    chosen = {pair: o.name for pair, o in renames.items() if o.name is not None}
    names = NameMap.build(((s.name, t.name) for s, t in named), separator, chosen)
    tools = []
    for server, tool in named:
        if tool.hold is not None:
            continue
        public = names.public(server.name, tool.name)
        assert public is not None
        schema = tool.input_schema if tool.input_schema.get("type") == "object" else {"type": "object"}
        override = renames.get((server.name, tool.name))
        if override is not None and override.description is not None:
            description = override.description
        else:
            description = f"[{server.name}] {tool.description or tool.name}"
        tools.append(
            mcp_types.Tool(
                name=public,
                title=f"{tool.title} ({server.name})" if tool.title else f"{server.name}.{tool.name}",
                description=description,
                input_schema=schema,
                output_schema=tool.output_schema,
                annotations=mcp_types.ToolAnnotations.model_validate(tool.annotations) if tool.annotations else None,
                _meta={CATEGORY_META: str(tool.category)},
            )
        )
    return AllTools(catalog.catalog.version, names, tools)


def call_result(body: dict[str, Any]) -> mcp_types.CallToolResult:
    """A ``ToolCalls`` response body as an MCP result; routing metadata goes to ``_meta``."""
    wire: dict[str, Any] = {"content": body.get("content", []), "isError": bool(body.get("isError"))}
    if body.get("structuredContent") is not None:
        wire["structuredContent"] = body["structuredContent"]
    if body.get("metadata"):
        wire["_meta"] = {"toolmesh/metadata": body["metadata"]}
    return mcp_types.CallToolResult.model_validate(wire)


def error_result(exc: ToolmeshError) -> mcp_types.CallToolResult:
    """A toolmesh error as a tool error the model can read: the spec's error body as text."""
    return text_result(exc.body(), is_error=True)


def text_result(value: Any, *, is_error: bool = False) -> mcp_types.CallToolResult:
    """``value`` as JSON text, and as structured content when it is an object."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)],
        structured_content=value if isinstance(value, dict) else None,
        is_error=is_error,
    )
