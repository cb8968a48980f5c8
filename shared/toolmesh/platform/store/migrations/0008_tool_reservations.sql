-- The total-tools limit across session-workers: a tool snapshot published but not yet projected
-- counts by its reservation (rows whose seq the projector has applied are stale and deleted).
CREATE TABLE mcp.tool_reservations (
    server_id UUID PRIMARY KEY,
    tools INTEGER NOT NULL,
    seq BIGINT NOT NULL
);
