-- The 2026-07-28-era versions an upstream named in ``server/discover`` besides its handshake (empty:
-- it speaks the handshake era only), and what it lists in that era only (by list: tools, prompts,
-- resources, resource_templates), which clients of that era reach in it.
ALTER TABLE mcp.external_servers ADD COLUMN IF NOT EXISTS modern_versions TEXT[] NOT NULL DEFAULT '{}';
ALTER TABLE mcp.external_servers ADD COLUMN IF NOT EXISTS modern_only JSONB NOT NULL DEFAULT '{}';
-- Whether an upstream tool runs as a task (its ``execution.taskSupport``: optional or required; NULL:
-- never) when a 2026-07-28 client that declares the Tasks extension calls it.
ALTER TABLE mcp.tools ADD COLUMN IF NOT EXISTS task_support TEXT;
