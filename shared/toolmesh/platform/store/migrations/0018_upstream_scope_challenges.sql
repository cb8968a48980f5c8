-- Scope step-up (issue 25): when an upstream answers a request with 403 insufficient_scope, the
-- session-worker records here the scope a new authorization of that grant must ask for (the granted
-- scope with the one the challenge required), and the gateway's authorize asks for it. A scope is not
-- a secret (it is in the authorization URL); a new authorization (``save_grant``) clears it.
ALTER TABLE mcp.upstream_tokens ADD COLUMN IF NOT EXISTS wanted_scope TEXT;
