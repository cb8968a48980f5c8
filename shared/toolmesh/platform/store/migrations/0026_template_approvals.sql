-- Approvals of resource templates the poisoning scanner flags: the definition hash an admin approved
-- for each URI template of a server's name in its namespace. Keyed by the name, not the server's id,
-- so the approval of a removed server stays with its name (like tool and prompt pins).
CREATE TABLE mcp.template_approvals (
    namespace TEXT NOT NULL,
    server_name TEXT NOT NULL,
    uri_template TEXT NOT NULL,
    approved_hash TEXT NOT NULL,
    PRIMARY KEY (namespace, server_name, uri_template)
);
