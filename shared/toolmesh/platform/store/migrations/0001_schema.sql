-- The read model of the design contract, plus audit log, principals and projector bookkeeping.
CREATE SCHEMA IF NOT EXISTS mcp;

CREATE TABLE mcp.external_servers (
    id UUID PRIMARY KEY,
    name VARCHAR(255) NOT NULL UNIQUE,
    description TEXT,
    transport_type VARCHAR(32) NOT NULL,
    connection_config JSONB NOT NULL,          -- {"sealed": <AES-256-GCM token>, "masked": {...}}
    health_check_url TEXT,
    status VARCHAR(32) NOT NULL DEFAULT 'DISCONNECTED',
    last_health_check TIMESTAMPTZ,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_response_time_ms DOUBLE PRECISION,
    last_error TEXT,
    tool_count INTEGER NOT NULL DEFAULT 0,
    error_message TEXT,
    registered_at TIMESTAMPTZ NOT NULL,
    connected_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_external_servers_status ON mcp.external_servers(status);

CREATE TABLE mcp.tools (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    original_name VARCHAR(255),
    description TEXT,
    input_schema JSONB NOT NULL DEFAULT '{}'::jsonb,
    source_server_id UUID REFERENCES mcp.external_servers(id) ON DELETE CASCADE,
    is_external BOOLEAN NOT NULL DEFAULT FALSE,
    is_classified BOOLEAN NOT NULL DEFAULT FALSE,
    skill_ids TEXT[] NOT NULL DEFAULT '{}',
    primary_skill_id TEXT,
    discovered_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_tools_source_server ON mcp.tools(source_server_id) WHERE source_server_id IS NOT NULL;
CREATE INDEX idx_tools_original_name ON mcp.tools(original_name);

CREATE TABLE mcp.server_connection_history (
    id BIGSERIAL PRIMARY KEY,
    server_id UUID REFERENCES mcp.external_servers(id) ON DELETE CASCADE,
    event_type VARCHAR(32) NOT NULL,
    details JSONB NOT NULL DEFAULT '{}'::jsonb,
    timestamp TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_history_server ON mcp.server_connection_history(server_id, id);

CREATE TABLE mcp.audit_log (
    id BIGSERIAL PRIMARY KEY,
    event VARCHAR(64) NOT NULL,
    event_id UUID NOT NULL,
    server_id UUID,
    server_name VARCHAR(255),
    actor TEXT,
    ip_address TEXT,
    details JSONB NOT NULL DEFAULT '{}'::jsonb,
    timestamp TIMESTAMPTZ NOT NULL
);

-- Idempotency of the projector: an event id is applied once; the checkpoint is the last
-- stream sequence applied, written in the same transaction as the event's effect.
CREATE TABLE mcp.applied_events (
    event_id UUID PRIMARY KEY,
    stream_seq BIGINT NOT NULL
);
CREATE TABLE mcp.projector_checkpoint (
    projector TEXT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);

-- API principals (keys stored hashed); not part of the event-sourced read model.
CREATE TABLE mcp.principals (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    token_hash TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT 'default',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
