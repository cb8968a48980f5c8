"""Polling until a condition holds or time runs out, on tenacity (one helper for the whole project)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    wait_exponential,
    wait_fixed,
)

T = TypeVar("T")

INTERVAL_SECONDS = 0.05
Clock = Callable[[], float]


def _last_value(state: RetryCallState) -> object:
    """The last check's value when time ran out; None when the last check raised."""
    outcome = state.outcome
    if outcome is None or outcome.failed:
        return None
    return outcome.result()


def _policy(
    timeout: float,
    interval: float,
    max_interval: float | None,
    retry_on: tuple[type[BaseException], ...],
    clock: Clock,
) -> dict[str, object]:
    retry: Any = retry_if_result(lambda value: not value)
    if retry_on:
        retry = retry | retry_if_exception_type(retry_on)
    wait = wait_fixed(interval) if max_interval is None else wait_exponential(multiplier=interval, max=max_interval)
    started = clock()
    return {
        "stop": lambda _: clock() - started >= timeout,
        "wait": wait,
        "retry": retry,
        "retry_error_callback": _last_value,
    }


@overload
async def poll_until(
    check: Callable[[], Awaitable[T]],
    timeout: float,
    *,
    interval: float = ...,
    max_interval: float | None = ...,
    retry_on: tuple[type[BaseException], ...] = ...,
    clock: Clock = ...,
    sleep: Callable[[float], Awaitable[None]] = ...,
) -> T | None: ...


@overload
async def poll_until(
    check: Callable[[], T],
    timeout: float,
    *,
    interval: float = ...,
    max_interval: float | None = ...,
    retry_on: tuple[type[BaseException], ...] = ...,
    clock: Clock = ...,
    sleep: Callable[[float], Awaitable[None]] = ...,
) -> T | None: ...


async def poll_until(
    check: Callable[[], Any],
    timeout: float,
    *,
    interval: float = INTERVAL_SECONDS,
    max_interval: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
    clock: Clock = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T | None:
    """Call ``check`` (sync or async) every ``interval`` s until it returns something truthy.

    Returns that value, or the last falsy one after ``timeout`` s. With ``max_interval`` the pause
    doubles from ``interval`` up to it. Exceptions of ``retry_on`` count as "not yet" (None if the
    last check raised one); any other exception propagates. ``clock`` and ``sleep`` measure and
    take the time (a test passes a simulated clock).
    """

    async def attempt() -> Any:
        value = check()
        if inspect.isawaitable(value):
            return await value
        return value

    policy = _policy(timeout, interval, max_interval, retry_on, clock)
    result: Any = await AsyncRetrying(sleep=sleep, **policy)(attempt)  # type: ignore[arg-type]
    return result


def wait_until(
    check: Callable[[], T],
    timeout: float,
    *,
    interval: float = INTERVAL_SECONDS,
    max_interval: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """``poll_until`` for code without an event loop (blocks the thread)."""
    policy = _policy(timeout, interval, max_interval, retry_on, clock)
    result: T | None = Retrying(sleep=sleep, **policy)(check)  # type: ignore[arg-type]
    return result
