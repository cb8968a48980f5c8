-- Tool categories (memory, search, file, ...), inferred from name and description at discovery.
-- Rows from before keep NULL until their server's next tool list (the API infers it meanwhile).
ALTER TABLE mcp.tools ADD COLUMN category VARCHAR(32);
CREATE INDEX idx_tools_namespace_category ON mcp.tools(namespace, category);
-- Listing a namespace's servers by the agent that registered them, newest first.
CREATE INDEX idx_servers_namespace_creator ON mcp.external_servers(namespace, created_by, registered_at DESC);
