-- The 2026-07-28-era versions an upstream named in ``server/discover`` besides its handshake (empty:
-- it speaks the handshake era only): the gateway relays clients of that era in it.
ALTER TABLE mcp.external_servers ADD COLUMN IF NOT EXISTS modern_versions TEXT[] NOT NULL DEFAULT '{}';
