"""The gateway role: HTTP API (REST + MCP facade); publishes commands, reads the projection."""
