-- Namespaces (tenants), tool-definition pinning, API keys with roles. Existing rows move to 'default'.
ALTER TABLE mcp.external_servers ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE mcp.external_servers ADD COLUMN new_tools VARCHAR(16) NOT NULL DEFAULT 'auto';
ALTER TABLE mcp.external_servers ADD COLUMN created_by TEXT;
-- True once the server's first tool list was applied: later new tools follow the new_tools policy.
ALTER TABLE mcp.external_servers ADD COLUMN tools_seen BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE mcp.external_servers s SET tools_seen = EXISTS (
    SELECT 1 FROM mcp.server_connection_history h WHERE h.server_id = s.id AND h.event_type = 'TOOLS_DISCOVERED');
ALTER TABLE mcp.external_servers DROP CONSTRAINT external_servers_name_key;
ALTER TABLE mcp.external_servers ADD CONSTRAINT external_servers_namespace_name_key UNIQUE (namespace, name);

ALTER TABLE mcp.tools ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE mcp.tools DROP CONSTRAINT tools_name_key;
CREATE UNIQUE INDEX tools_server_original_key ON mcp.tools(source_server_id, original_name);
CREATE INDEX idx_tools_namespace_name ON mcp.tools(namespace, name);
-- Pinning: the hash of the definition (description + input schema) now listed, the hash an admin
-- approved (or that was first seen), and why a tool is held back when the two differ.
ALTER TABLE mcp.tools ADD COLUMN definition_hash TEXT;
ALTER TABLE mcp.tools ADD COLUMN approved_hash TEXT;
ALTER TABLE mcp.tools ADD COLUMN held_reason VARCHAR(16);
ALTER TABLE mcp.tools ADD COLUMN held_fields TEXT[] NOT NULL DEFAULT '{}';

ALTER TABLE mcp.audit_log ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
CREATE INDEX idx_audit_namespace ON mcp.audit_log(namespace, id);

ALTER TABLE mcp.principals ADD COLUMN key_id UUID;
UPDATE mcp.principals SET key_id = gen_random_uuid();
ALTER TABLE mcp.principals ALTER COLUMN key_id SET NOT NULL;
ALTER TABLE mcp.principals ADD CONSTRAINT principals_key_id_key UNIQUE (key_id);
ALTER TABLE mcp.principals ADD COLUMN created_by TEXT;
ALTER TABLE mcp.principals DROP CONSTRAINT principals_name_key;
ALTER TABLE mcp.principals ADD CONSTRAINT principals_namespace_name_key UNIQUE (namespace, name);
-- The bootstrap key seeded before roles existed is the owner.
UPDATE mcp.principals SET role = 'owner' WHERE name = 'admin' AND role = 'admin';
