-- Upstream OAuth tokens (issue 25): the grant an authorization gave toolmesh at an upstream's
-- authorization server, sealed with the credential key (access and refresh token, the client it was
-- issued to, the token endpoint). Written by the gateway's OAuth callback and by the session-worker
-- when it refreshes; not a projection of the event stream (events never carry a token), so a
-- rebuild of the read model leaves it alone. ``principal`` is '' for the shared (service-account)
-- identity; a per-principal identity keys its own rows by (server, principal).
CREATE TABLE IF NOT EXISTS mcp.upstream_tokens (
    server_id TEXT NOT NULL,
    principal TEXT NOT NULL DEFAULT '',
    issuer TEXT NOT NULL,
    sealed_grant TEXT NOT NULL,
    expires_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (server_id, principal)
);
