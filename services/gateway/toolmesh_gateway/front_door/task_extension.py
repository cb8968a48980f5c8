"""Whether a request speaks the ``io.modelcontextprotocol/tasks`` extension (2026-07-28), and whether
a ``tools/call`` runs as a task: the tool's upstream lists ``execution.taskSupport`` ``optional`` or
``required`` and the request declares the extension; a ``required`` one without it is ``-32021``."""

from __future__ import annotations

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolmesh_gateway.catalog import CatalogTool
from toolmesh_gateway.front_door.client_links import Ctx

EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_CAPABILITY = -32021
"""JSON-RPC code of a request that needs a client capability the request did not declare."""


def declared(ctx: Ctx) -> bool:
    """Whether the request declares the Tasks extension (its 2026-07-28 ``clientCapabilities``)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(mcp_types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def missing_extension(what: str) -> MCPError:
    """The ``-32021`` of a request (``what`` it asks) that needs the extension and did not declare it."""
    return MCPError(
        code=MISSING_CAPABILITY,
        message=f"{what} needs the {EXTENSION} extension in the request's client capabilities",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def runs_as_task(ctx: Ctx, tool: CatalogTool | None) -> bool:
    """Whether this ``tools/call`` of ``tool`` runs as a task; ``-32021`` when the tool requires one
    and the request did not declare the extension."""
    support = tool.task_support if tool is not None else None
    if support not in ("optional", "required"):
        return False
    if declared(ctx):
        return True
    if support == "required":
        raise missing_extension(f"{tool.name if tool else 'this tool'} runs only as a task: it")
    return False
