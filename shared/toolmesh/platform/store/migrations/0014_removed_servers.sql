-- Which servers were removed for good: the session-workers look up the ids of the sandbox homes
-- left on their host here (audit rows are projected from the event log, so a rebuild writes them
-- again; a server missing from mcp.external_servers during a rebuild is not taken for removed).
CREATE INDEX idx_audit_removed_servers ON mcp.audit_log(server_id) WHERE event = 'server.removed';
