-- Durable quotas (/api/v1/quotas): limits of tool calls per minute, UTC day and UTC month of one key
-- (target: its name), one namespace or one server (target: its name). The counts live in JetStream.
CREATE TABLE IF NOT EXISTS mcp.quotas (
    id UUID PRIMARY KEY,
    namespace TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('key', 'namespace', 'server')),
    target TEXT NOT NULL,
    per_minute INTEGER CHECK (per_minute > 0),
    per_day INTEGER CHECK (per_day > 0),
    per_month INTEGER CHECK (per_month > 0),
    created_by TEXT,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    UNIQUE (namespace, scope, target)
);
