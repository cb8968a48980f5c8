-- Refresh tokens a connected app has rotated away from (issue 26), hashed. Any of them presented
-- again was stolen and ends the grant (RFC 9700 §4.14.2), not only the one rotated last (which is all
-- ``previous_refresh_hash`` could recognise). They go with their grant.
CREATE TABLE IF NOT EXISTS mcp.oauth_spent_refresh (
    refresh_hash TEXT PRIMARY KEY,
    grant_id UUID NOT NULL REFERENCES mcp.oauth_grants(grant_id) ON DELETE CASCADE,
    spent_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_spent_refresh_grant ON mcp.oauth_spent_refresh(grant_id);

INSERT INTO mcp.oauth_spent_refresh(refresh_hash, grant_id)
    SELECT previous_refresh_hash, grant_id FROM mcp.oauth_grants WHERE previous_refresh_hash IS NOT NULL
    ON CONFLICT DO NOTHING;
DROP INDEX IF EXISTS mcp.oauth_grants_previous_refresh;
ALTER TABLE mcp.oauth_grants DROP COLUMN IF EXISTS previous_refresh_hash;
