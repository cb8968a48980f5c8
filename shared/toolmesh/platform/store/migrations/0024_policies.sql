-- Policies on tool calls (CEL expressions and their effect), per namespace or global (namespace NULL),
-- and every version each one had.
CREATE TABLE mcp.policies (
    id UUID PRIMARY KEY,
    namespace TEXT,
    name VARCHAR(100) NOT NULL,
    expression TEXT NOT NULL,
    effect TEXT NOT NULL,
    reason TEXT,
    redact TEXT[] NOT NULL DEFAULT '{}',
    mode TEXT NOT NULL DEFAULT 'enforce',
    version INTEGER NOT NULL,
    created_by TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_by TEXT,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX policies_namespace_name_key ON mcp.policies (COALESCE(namespace, ''), name);

CREATE TABLE mcp.policy_versions (
    policy_id UUID NOT NULL,
    version INTEGER NOT NULL,
    namespace TEXT,
    name VARCHAR(100) NOT NULL,
    expression TEXT NOT NULL,
    effect TEXT NOT NULL,
    reason TEXT,
    redact TEXT[] NOT NULL DEFAULT '{}',
    mode TEXT NOT NULL,
    deleted BOOLEAN NOT NULL DEFAULT FALSE,
    actor TEXT,
    at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (policy_id, version)
);
