"""Why connecting a server failed, and when it is tried again without anyone asking (BR-002).

Kinds: ``network`` (and ``limit``, a full limit) are retried on the capped backoff of
``error_retry_seconds``; ``auth`` (the upstream refused toolmesh's credentials) and ``config``
(the server cannot be started as configured) wait for a person: trying again cannot help.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from toolmesh.backoff import scheduled_delay
from toolmesh_session_worker.upstream import UpstreamError, UpstreamMisconfigured, UpstreamRefused

NOT_RETRIED = frozenset({"auth", "config"})


@dataclass(frozen=True)
class Attempts:
    """How opening a session went: the attempts made, the last error and its kind."""

    count: int
    error: str = ""
    kind: str = "network"


def error_kind(exc: UpstreamError) -> str:
    """``auth`` for refused credentials, ``config`` for a server that cannot start, else ``network``."""
    if isinstance(exc, UpstreamRefused):
        return "auth"
    return "config" if isinstance(exc, UpstreamMisconfigured) else "network"


def next_retry(auto_retry: int, schedule: tuple[float, ...]) -> tuple[float, datetime]:
    """The pause before automatic retry ``auto_retry`` (1-based) and the time it is due."""
    delay = scheduled_delay(auto_retry, schedule)
    return delay, datetime.now(UTC) + timedelta(seconds=delay)
