-- A person may consent as an identity of the identity provider instead of an API key: the consent page
-- signs them in there (OpenID Connect), and the request keeps who signed in (``identity``) and the
-- hash of the browser's consent cookie, plus the sign-in's own state, nonce and PKCE verifier while
-- it runs. Codes and grants of such a person have no key: ``identity`` names them (``principal_id``
-- ``jwt:<sub>``, name, role and namespace as the provider's ID token gave them at consent).
ALTER TABLE mcp.oauth_requests ADD COLUMN IF NOT EXISTS sign_in_state_hash TEXT UNIQUE;
ALTER TABLE mcp.oauth_requests ADD COLUMN IF NOT EXISTS sign_in JSONB;
ALTER TABLE mcp.oauth_requests ADD COLUMN IF NOT EXISTS identity JSONB;
ALTER TABLE mcp.oauth_requests ADD COLUMN IF NOT EXISTS identity_secret_hash TEXT;

ALTER TABLE mcp.oauth_codes ALTER COLUMN key_id DROP NOT NULL;
ALTER TABLE mcp.oauth_codes ADD COLUMN IF NOT EXISTS identity JSONB;

ALTER TABLE mcp.oauth_grants ALTER COLUMN key_id DROP NOT NULL;
ALTER TABLE mcp.oauth_grants ADD COLUMN IF NOT EXISTS identity JSONB;
CREATE INDEX IF NOT EXISTS oauth_grants_identity ON mcp.oauth_grants((identity->>'principal_id'));
DO $$ BEGIN
    ALTER TABLE mcp.oauth_grants ADD CONSTRAINT oauth_grants_one_principal
        CHECK ((key_id IS NULL) <> (identity IS NULL));
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
