"""A STDIO MCP server whose ``tally`` tool notes every execution in a ledger file shared by every process
of it, so a test can count how often each call id ran, across processes, sessions and workers.

    python tests/peers/ledger.py --ledger FILE [--name NAME]

Tools: ``tally(key)`` appends one line ``<key> <process token>`` to ``FILE`` (one ``write`` of an
``O_APPEND`` descriptor: lines of concurrent processes never interleave) and returns ``key``.
``--name`` only marks the command line, so a test can find this server's processes.
"""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path

from mcp.server.mcpserver import MCPServer

PROCESS = uuid.uuid4().hex[:12]
"""This process's token in the ledger (pids are namespaced in the sandbox)."""


def read_ledger(path: Path) -> list[tuple[str, str]]:
    """Every execution noted in ``path``: (key, process token)."""
    if not path.exists():
        return []
    return [(key, process) for key, _, process in (line.partition(" ") for line in path.read_text().splitlines())]


def build_server(name: str, ledger: Path) -> MCPServer[object]:
    """The server with its one tool."""
    server: MCPServer[object] = MCPServer(name=name)

    @server.tool()
    def tally(key: str) -> str:
        """Note one execution of ``key`` (a caller's own call id) and return ``key``."""
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, f"{key} {PROCESS}\n".encode())
        finally:
            os.close(fd)
        return key

    return server


def main() -> None:
    """Parse the command line and serve over stdio until the input closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ledger", type=Path, required=True)
    parser.add_argument("--name", default="ledger")
    args = parser.parse_args()
    build_server(args.name, args.ledger).run("stdio")


if __name__ == "__main__":
    main()
