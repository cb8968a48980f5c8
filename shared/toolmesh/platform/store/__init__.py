"""Postgres read model (schema ``mcp``): migrations, the projection's writes, and the API's reads."""
