"""A STDIO MCP server shaped like a code host, noting every tool it runs in a ledger file, so a test can
tell that a call refused by the gateway never reached it.

    REPO_HOST_LEDGER=FILE python tests/peers/repo_host.py

Tools: ``get_repo(name)`` (read-only; a repository with its owner's e-mail and a deploy token, as
structured content and as JSON text), ``delete_repo(name)`` (destructive), ``read_file(path)``. Each
appends one line ``<tool> <json arguments>`` to ``FILE`` (named in the environment: a path among the
arguments would be bound read-only into the STDIO sandbox).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mcp_types
from mcp.server.mcpserver import MCPServer


def read_calls(path: Path) -> list[tuple[str, Any]]:
    """Every tool the server ran, with its arguments, in order."""
    if not path.exists():
        return []
    calls = []
    for line in path.read_text().splitlines():
        tool, _, arguments = line.partition(" ")
        calls.append((tool, json.loads(arguments)))
    return calls


def build_server(ledger: Path) -> MCPServer[object]:
    """The server with its three tools."""
    server: MCPServer[object] = MCPServer(name="repo-host")

    def note(tool: str, arguments: dict[str, Any]) -> None:
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, f"{tool} {json.dumps(arguments)}\n".encode())
        finally:
            os.close(fd)

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    def get_repo(name: str) -> dict[str, Any]:
        """A repository: its name, its owner (with e-mail) and its deploy token."""
        note("get_repo", {"name": name})
        return {"name": name, "owner": {"login": "octo", "email": "octo@example.com"}, "deploy_token": "tok-123"}

    @server.tool(annotations=mcp_types.ToolAnnotations(destructive_hint=True))
    def delete_repo(name: str) -> str:
        """Delete a repository."""
        note("delete_repo", {"name": name})
        return f"deleted {name}"

    @server.tool()
    def read_file(path: Any) -> str:
        """The text of a file (any path value is accepted, to test how policies see odd types)."""
        note("read_file", {"path": path})
        return f"contents of {path}"

    return server


def main() -> None:
    """Serve over stdio until the input closes."""
    build_server(Path(os.environ["REPO_HOST_LEDGER"])).run("stdio")


if __name__ == "__main__":
    main()
