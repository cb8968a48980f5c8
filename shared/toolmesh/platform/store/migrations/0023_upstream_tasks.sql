-- Whether an upstream declared the Tasks extension (io.modelcontextprotocol/tasks) in ``server/discover``:
-- its own tasks are passed through to 2026-07-28 clients that declare the extension too.
ALTER TABLE mcp.external_servers ADD COLUMN IF NOT EXISTS modern_tasks BOOLEAN NOT NULL DEFAULT FALSE;
