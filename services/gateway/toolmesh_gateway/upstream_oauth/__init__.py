"""toolmesh as the OAuth 2.1 client of its upstreams, on the gateway's side (issue 25: shared and
per-user identity).

``discovery`` finds an upstream's protected-resource metadata and authorization server (with the
``mcp`` SDK's client auth helpers, so toolmesh discovers as the SDK and ``toolmesh probe`` do);
``registration`` picks the client to authorize as (pre-registered, the gateway's Client ID Metadata
Document, or registered dynamically), ``client_urls`` holds the callback and document addresses;
``flows`` keeps each authorization in progress in a NATS KV bucket, sealed, for the callback on any
replica; ``exchange`` trades a JWT caller's token for its upstream grant (RFC 8693); ``authorizing``
starts an authorization and finishes it at ``/oauth/callback``.
"""
