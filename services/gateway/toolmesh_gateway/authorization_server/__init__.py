"""The gateway as an OAuth 2.1 authorization server and protected resource for MCP clients: they
discover it from a 401 on an MCP endpoint, register (dynamically or by a Client ID Metadata
Document), send a person to the console's consent page, and get tokens that act as that person's
API key at one MCP endpoint."""
