"""Requests to the session-worker that owns a server; the helper lives in ``toolmesh.bus.requests``."""

from toolmesh.bus.requests import NoOwner, ask_owner

__all__ = ["NoOwner", "ask_owner"]
