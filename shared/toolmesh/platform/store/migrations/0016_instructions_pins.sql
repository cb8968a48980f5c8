-- Instructions pinning: the hash and text of a server's approved instructions (from its initialize
-- result); NULL until the server describes itself after this, when its instructions approve
-- themselves. A removed server leaves {"hash", "text"} of its approved instructions to its name.
ALTER TABLE mcp.external_servers ADD COLUMN instructions_hash TEXT, ADD COLUMN approved_instructions TEXT;
ALTER TABLE mcp.retired_pins ADD COLUMN instructions JSONB;
