"""``GET /api/v1/events``: the caller's events as Server-Sent Events (the web console's live feed).

The stream opens with one ``ready`` message (``StreamReady``): from there on every event of the
caller's namespace arrives as a message whose SSE ``event`` is the event's type (its subject
without ``toolmesh.evt.``, e.g. ``server.status_changed``), whose ``id`` is its stream sequence
and whose ``data`` is a ``StreamedEvent``. A client loads the state it shows after ``ready`` and
applies the events that follow; after a reconnect it loads again. Comment lines (``: keepalive``)
keep idle connections open. Sealed configs and client addresses never leave the gateway; key
events and call records reach admins and the owner only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

EVENTS_PATH = "/api/v1/events"
READY = "ready"
"""SSE ``event`` of the first message."""
EVENT_PREFIX = "toolmesh.evt."


class StreamReady(BaseModel):
    """The first message: the stream is live; ``namespace`` None means every namespace (the owner)."""

    namespace: str | None
    role: str


class StreamedEvent(BaseModel):
    """One event as the stream carries it: the envelope, and the event's own fields in ``data``."""

    seq: int
    type: str
    event_id: str
    occurred_at: datetime
    namespace: str
    server_id: str | None = None
    actor: str | None = None
    data: dict[str, Any]
