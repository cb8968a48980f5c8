"""toolmesh as the OAuth 2.1 client of its upstreams, on the gateway's side (issue 25, shared identity).

``discovery`` finds an upstream's protected-resource metadata and authorization server (with the
``mcp`` SDK's client auth helpers, so toolmesh discovers as the SDK and ``toolmesh probe`` do);
``flows`` keeps each authorization in progress in a NATS KV bucket, sealed, for the callback on any
replica; ``authorizing`` starts an authorization and finishes it at ``/oauth/callback``.
"""
