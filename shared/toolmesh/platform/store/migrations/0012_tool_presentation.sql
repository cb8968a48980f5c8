-- What a client is shown of a tool besides its description and input schema, pinned with them
-- (toolmesh.pinning): title, annotations (readOnlyHint, destructiveHint, ...), output schema, icons.
-- Rows an older projector wrote have none until their server's next tool list.
ALTER TABLE mcp.tools ADD COLUMN title TEXT;
ALTER TABLE mcp.tools ADD COLUMN annotations JSONB;
ALTER TABLE mcp.tools ADD COLUMN output_schema JSONB;
ALTER TABLE mcp.tools ADD COLUMN icons JSONB;
