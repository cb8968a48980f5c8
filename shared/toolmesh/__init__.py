"""What more than one toolmesh service needs: contracts (all a client needs), the platform every role
runs on, the sandbox and egress rules, search, and the shared domain rules."""
