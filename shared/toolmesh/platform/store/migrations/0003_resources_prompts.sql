-- Resources, resource templates and prompts of each server (snapshots like tools), and what each
-- upstream said about itself at initialize (served unchanged at /mcp/{server}).
ALTER TABLE mcp.external_servers
    ADD COLUMN protocol_version TEXT,
    ADD COLUMN capabilities JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN server_info JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN instructions TEXT;

CREATE TABLE mcp.resources (
    server_id UUID NOT NULL REFERENCES mcp.external_servers(id) ON DELETE CASCADE,
    uri TEXT NOT NULL,
    name TEXT,
    description TEXT,
    mime_type TEXT,
    item JSONB NOT NULL,                       -- the resource exactly as resources/list gave it
    discovered_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server_id, uri)
);
CREATE INDEX idx_resources_uri ON mcp.resources(uri);

CREATE TABLE mcp.resource_templates (
    server_id UUID NOT NULL REFERENCES mcp.external_servers(id) ON DELETE CASCADE,
    uri_template TEXT NOT NULL,
    name TEXT,
    description TEXT,
    item JSONB NOT NULL,
    discovered_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server_id, uri_template)
);

CREATE TABLE mcp.prompts (
    server_id UUID NOT NULL REFERENCES mcp.external_servers(id) ON DELETE CASCADE,
    original_name TEXT NOT NULL,
    description TEXT,
    arguments JSONB NOT NULL DEFAULT '[]'::jsonb,
    item JSONB NOT NULL,
    discovered_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server_id, original_name)
);
