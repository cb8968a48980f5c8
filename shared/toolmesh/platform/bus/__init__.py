"""The event backbone on NATS JetStream: connection, topology, publishing, leases, names."""
