"""``toolmesh probe URL``: connect to an MCP server as toolmesh would, authorize if asked, show what it offers.

``authorization`` builds the OAuth 2.1 client (the ``mcp`` SDK's ``OAuthClientProvider``) with
its token storage and the two ways to complete an authorization (headless, loopback callback);
``connection`` opens the session (Streamable HTTP, else SSE) and reads the server's offer;
``scenario`` turns the conformance suite's environment into probe options; ``command`` is the CLI.
"""
