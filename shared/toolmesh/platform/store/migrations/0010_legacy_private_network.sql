-- Servers registered before the egress policy: whether their URLs may reach loopback and private
-- addresses is decided by who registered them (an owner or admin may, anyone else may not).
-- mcp.registered_by_manager is that rule, used by this migration for rows an older projector wrote
-- and by the projection for registration events that lack the flag (so a rebuild decides the same).

CREATE OR REPLACE FUNCTION mcp.registered_by_manager(
    registrant TEXT, server_namespace TEXT, registered_before BIGINT, bootstrap_owner TEXT
) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    -- The role of the key of that name when the server was registered: the latest key.created before
    -- it, of the server's namespace first, else an owner's of any namespace; without one, only the
    -- bootstrap owner (seeded at start-up, never an event) counts as an owner.
    SELECT COALESCE(
        (SELECT k.details->>'role' IN ('owner', 'admin')
           FROM mcp.audit_log k
          WHERE k.event = 'key.created'
            AND k.details->>'name' = registrant
            AND (k.namespace = server_namespace OR k.details->>'role' = 'owner')
            AND (registered_before IS NULL OR k.id < registered_before)
          ORDER BY (k.namespace = server_namespace) DESC, k.id DESC
          LIMIT 1),
        registrant = bootstrap_owner,
        FALSE)
$$;

UPDATE mcp.external_servers s
   SET connection_config = s.connection_config || jsonb_build_object(
       'private_network',
       mcp.registered_by_manager(
           s.created_by,
           s.namespace,
           (SELECT min(r.id) FROM mcp.audit_log r WHERE r.event = 'server.registered' AND r.server_id = s.id),
           'admin'))
 WHERE NOT s.connection_config ? 'private_network';
