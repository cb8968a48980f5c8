"""Real MCP peers for tests: a Python demo server, launch helpers, and server-everything."""
