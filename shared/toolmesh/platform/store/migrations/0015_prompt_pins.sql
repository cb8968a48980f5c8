-- Prompt pinning, like tools: each prompt's definition hash, the hash an admin (or the server's
-- first prompt list) approved, and why it is held; whether a server's prompt list was seen; and the
-- approved prompt hashes a removed server leaves to its name ({original_name: approved hash or null}).
-- A prompt stored before this (no definition hash) approves the definition its next list shows.
ALTER TABLE mcp.prompts
    ADD COLUMN definition_hash TEXT,
    ADD COLUMN approved_hash TEXT,
    ADD COLUMN held_reason TEXT,
    ADD COLUMN held_fields TEXT[] NOT NULL DEFAULT '{}';
ALTER TABLE mcp.external_servers ADD COLUMN prompts_seen BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE mcp.external_servers s SET prompts_seen = EXISTS (SELECT 1 FROM mcp.prompts p WHERE p.server_id = s.id);
ALTER TABLE mcp.retired_pins ALTER COLUMN approved DROP NOT NULL, ADD COLUMN prompts JSONB;
