-- Pins belong to a server's name in its namespace: a removed server leaves its tools' approved
-- hashes here ({original_name: approved hash or null}), and the next server registered under the
-- name reviews its first tool list against them (a held definition stays held).
CREATE TABLE mcp.retired_pins (
    namespace TEXT NOT NULL,
    server_name TEXT NOT NULL,
    approved JSONB NOT NULL,
    PRIMARY KEY (namespace, server_name)
);
