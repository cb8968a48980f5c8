"""The public NATS API of the gateway: ``toolmesh.api.v1.*`` request/reply, served with faststream."""
