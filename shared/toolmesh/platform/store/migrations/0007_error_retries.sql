-- BR-002: a server left in ERROR by a network failure is tried again on a capped backoff.
-- retry_at: when the next automatic attempt is due (NULL: none scheduled); auto_retries: automatic
-- attempts since the server was last CONNECTED (the backoff's step).
ALTER TABLE mcp.external_servers ADD COLUMN retry_at TIMESTAMPTZ;
ALTER TABLE mcp.external_servers ADD COLUMN auto_retries INTEGER NOT NULL DEFAULT 0;
CREATE INDEX external_servers_retry_at ON mcp.external_servers (retry_at) WHERE retry_at IS NOT NULL;
