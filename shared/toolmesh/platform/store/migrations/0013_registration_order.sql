-- The stream sequence of each server's registration event: the first-come order of the resource URI
-- collision rule (a server registered later never takes a URI over). It comes from the event log, so
-- `toolmesh projector --rebuild` writes the same numbers; rows of an older projector get theirs from
-- the registration's audit row.
ALTER TABLE mcp.external_servers ADD COLUMN registered_seq BIGINT;

UPDATE mcp.external_servers s
   SET registered_seq = a.stream_seq
  FROM mcp.audit_log l
  JOIN mcp.applied_events a ON a.event_id = l.event_id
 WHERE l.event = 'server.registered' AND l.server_id = s.id;
