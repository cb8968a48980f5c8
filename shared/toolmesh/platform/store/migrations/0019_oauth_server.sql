-- The gateway's own authorization server (issue 26): MCP clients sign in with OAuth instead of a
-- pasted key. Clients registered dynamically (RFC 7591) are kept here; clients named by a Client ID
-- Metadata Document are fetched, not stored. An authorization request waits for the person's consent
-- in ``oauth_requests``; the code it yields is single-use (``oauth_codes``, kept after use so a
-- replay revokes what the code gave). A consented client is a "connected app" (``oauth_grants``):
-- its access and refresh tokens are stored as hashes and act as the API key that consented, so
-- revoking that key removes its apps. Shared by every gateway replica (the browser and the client
-- may reach different ones). Not a projection of the event stream.
CREATE TABLE IF NOT EXISTS mcp.oauth_clients (
    client_id TEXT PRIMARY KEY,
    metadata JSONB NOT NULL,
    sealed_secret TEXT,
    registered_from TEXT,
    registered_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS mcp.oauth_requests (
    request_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    client_name TEXT,
    issuer TEXT NOT NULL,
    params JSONB NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS mcp.oauth_grants (
    grant_id UUID PRIMARY KEY,
    key_id UUID NOT NULL REFERENCES mcp.principals(key_id) ON DELETE CASCADE,
    client_id TEXT NOT NULL,
    client_name TEXT,
    resource TEXT NOT NULL,
    scopes TEXT[] NOT NULL,
    access_hash TEXT UNIQUE,
    access_expires_at TIMESTAMPTZ,
    refresh_hash TEXT UNIQUE,
    refresh_expires_at TIMESTAMPTZ,
    previous_refresh_hash TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    refreshed_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS oauth_grants_key ON mcp.oauth_grants(key_id);
CREATE INDEX IF NOT EXISTS oauth_grants_previous_refresh ON mcp.oauth_grants(previous_refresh_hash);

CREATE TABLE IF NOT EXISTS mcp.oauth_codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    key_id UUID NOT NULL REFERENCES mcp.principals(key_id) ON DELETE CASCADE,
    params JSONB NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    grant_id UUID
);
