"""MCP Registry ``server.json`` entries turned into toolmesh registrations (``toolmesh import`` and the
gateway's import endpoint, which the console uses)."""
