-- The tool classification state machine: DISCOVERED (waiting), CLASSIFIED, or UNCLASSIFIED after
-- the classifier gave up (with why), until a retry.
ALTER TABLE mcp.tools ADD COLUMN classification_status VARCHAR(16) NOT NULL DEFAULT 'DISCOVERED';
ALTER TABLE mcp.tools ADD COLUMN classification_error TEXT;
UPDATE mcp.tools SET classification_status = 'CLASSIFIED' WHERE is_classified;
