"""Why connecting a server failed, and when it is tried again without anyone asking (BR-002).

Kinds: ``network`` (and ``limit``, a full limit) are retried on the capped backoff of
``error_retry_seconds``; ``auth`` (the upstream refused toolmesh's credentials) and ``config``
(the server cannot be started as configured) wait for a person: trying again cannot help.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
)

from toolmesh.platform.backoff import scheduled_delay
from toolmesh_session_worker.upstream import UpstreamError, UpstreamMisconfigured, UpstreamRefused

log = logging.getLogger("toolmesh.session")
NOT_RETRIED = frozenset({"auth", "config"})
FINAL = (UpstreamRefused, UpstreamMisconfigured)
"""Failures that end the attempts to open a session at once (no other attempt can succeed)."""
T = TypeVar("T")


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


async def open_with_retries(
    open_once: Callable[[], Awaitable[T]],
    delays: Sequence[float],
    server: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[T | None, Attempts]:
    """Call ``open_once`` up to ``len(delays) + 1`` times, pausing ``delays[i]`` after failed attempt
    ``i``, until it opens; an ``UpstreamError`` is retried, a ``FINAL`` one ends the attempts at once.

    Returns what it opened (None when it did not) and how the attempts went.
    """

    def failed(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning("connect attempt %d failed: %s", state.attempt_number, error, extra={"server": server})

    retrying = AsyncRetrying(
        stop=stop_after_attempt(len(delays) + 1),
        # tenacity asks for the pause before it checks the stop: after the last attempt there is none
        wait=lambda state: delays[state.attempt_number - 1] if state.attempt_number <= len(delays) else 0.0,
        retry=retry_if_exception_type(UpstreamError) & retry_if_not_exception_type(FINAL),
        after=failed,
        sleep=sleep,
    )
    try:
        opened: T = await retrying(open_once)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        summary = last.summary if isinstance(last, UpstreamError) else str(last)  # the raw text goes to the log only
        return None, Attempts(len(delays) + 1, summary)
    except FINAL as exc:
        attempt = retrying.statistics["attempt_number"]
        log.warning("connect attempt %d failed: %s", attempt, exc, extra={"server": server})
        return None, Attempts(attempt, exc.summary, error_kind(exc))
    return opened, Attempts(retrying.statistics["attempt_number"])
