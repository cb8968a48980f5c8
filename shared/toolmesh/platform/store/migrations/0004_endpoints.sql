-- Endpoints (bundles): named selections of tools, prompts and resources served at /mcp/{name};
-- and keys that may use only some of them.
CREATE TABLE mcp.endpoints (
    id UUID PRIMARY KEY,
    namespace TEXT NOT NULL,
    name VARCHAR(255) NOT NULL,
    description TEXT,
    include TEXT[] NOT NULL,
    exclude TEXT[] NOT NULL DEFAULT '{}',
    overrides JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_by TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT endpoints_namespace_name_key UNIQUE (namespace, name)
);

ALTER TABLE mcp.principals ADD COLUMN endpoints TEXT[];  -- NULL: every endpoint (and the whole API)
