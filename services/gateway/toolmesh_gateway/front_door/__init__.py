"""The gateway as an MCP server: ``/mcp`` (Streamable HTTP) in two modes, and code mode (``run``)."""
