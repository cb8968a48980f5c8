"""The session-worker role: owns upstream MCP sessions (connect, discover, call, ping)."""
