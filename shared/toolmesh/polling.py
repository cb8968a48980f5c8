"""Polling until a condition holds or time runs out, on tenacity (one helper for the whole project)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_exponential,
    wait_fixed,
)

T = TypeVar("T")

INTERVAL_SECONDS = 0.05


def _last_value(state: RetryCallState) -> object:
    """The last check's value when time ran out; None when the last check raised."""
    outcome = state.outcome
    if outcome is None or outcome.failed:
        return None
    return outcome.result()


def _policy(
    timeout: float, interval: float, max_interval: float | None, retry_on: tuple[type[BaseException], ...]
) -> dict[str, object]:
    retry: Any = retry_if_result(lambda value: not value)
    if retry_on:
        retry = retry | retry_if_exception_type(retry_on)
    wait = wait_fixed(interval) if max_interval is None else wait_exponential(multiplier=interval, max=max_interval)
    return {
        "stop": stop_after_delay(timeout),
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
) -> T | None: ...


@overload
async def poll_until(
    check: Callable[[], T],
    timeout: float,
    *,
    interval: float = ...,
    max_interval: float | None = ...,
    retry_on: tuple[type[BaseException], ...] = ...,
) -> T | None: ...


async def poll_until(
    check: Callable[[], Any],
    timeout: float,
    *,
    interval: float = INTERVAL_SECONDS,
    max_interval: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T | None:
    """Call ``check`` (sync or async) every ``interval`` s until it returns something truthy.

    Returns that value, or the last falsy one after ``timeout`` s. With ``max_interval`` the pause
    doubles from ``interval`` up to it. Exceptions of ``retry_on`` count as "not yet" (None if the
    last check raised one); any other exception propagates.
    """

    async def attempt() -> Any:
        value = check()
        if inspect.isawaitable(value):
            return await value
        return value

    result: Any = await AsyncRetrying(**_policy(timeout, interval, max_interval, retry_on))(attempt)  # type: ignore[arg-type]
    return result


def wait_until(
    check: Callable[[], T],
    timeout: float,
    *,
    interval: float = INTERVAL_SECONDS,
    max_interval: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T | None:
    """``poll_until`` for code without an event loop (blocks the thread)."""
    result: T | None = Retrying(**_policy(timeout, interval, max_interval, retry_on))(check)  # type: ignore[arg-type]
    return result
