"""The server state machine of the logic contract, as plain data and small functions."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from toolmesh.errors import InvalidStateTransition


class ServerStatus(StrEnum):
    """States of an external server."""

    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    DEGRADED = "DEGRADED"
    ERROR = "ERROR"


S = ServerStatus

# The contract's table, plus: a user may stop a server that is still connecting, degraded or in
# error (disconnect is the operator's stop button), and a lost session makes DEGRADED go to ERROR.
TRANSITIONS: dict[ServerStatus, frozenset[ServerStatus]] = {
    S.DISCONNECTED: frozenset({S.CONNECTING, S.ERROR}),
    S.CONNECTING: frozenset({S.CONNECTED, S.ERROR, S.DISCONNECTED}),
    S.CONNECTED: frozenset({S.DISCONNECTED, S.DEGRADED, S.ERROR}),
    S.DEGRADED: frozenset({S.CONNECTED, S.ERROR, S.DISCONNECTED}),
    S.ERROR: frozenset({S.CONNECTING, S.DISCONNECTED}),
}

# Where a live session is wanted: the reconciler keeps these servers owned and connected.
SESSION_WANTED = frozenset({S.CONNECTING, S.CONNECTED, S.DEGRADED})


# Where tools are visible to search and listing, and may execute (DEGRADED with a warning).
SERVING = frozenset({S.CONNECTED, S.DEGRADED})


def wants_session(status: ServerStatus, retry_at: datetime | None, now: datetime) -> bool:
    """Whether a session-worker should hold a session: the state wants one, or the server is in
    ERROR and its automatic retry (BR-002) is due."""
    return status in SESSION_WANTED or (status is S.ERROR and retry_at is not None and retry_at <= now)


def check_transition(current: ServerStatus, target: ServerStatus) -> None:
    """Raise ``InvalidStateTransition`` unless ``current -> target`` is allowed."""
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current]))
        raise InvalidStateTransition(
            f"Invalid state transition: {current} -> {target}. Allowed: {allowed}",
            {"current": str(current), "attempted": str(target), "allowed": sorted(TRANSITIONS[current])},
        )


def can_transition(current: ServerStatus, target: ServerStatus) -> bool:
    """True when ``current -> target`` is allowed."""
    return target in TRANSITIONS[current]
