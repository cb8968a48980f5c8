"""BR-002: opening an upstream session is tried again with the configured pauses; refused
credentials or an unstartable server end the attempts at once."""

from __future__ import annotations

import pytest

from toolmesh_session_worker.failures import Attempts, open_with_retries
from toolmesh_session_worker.upstream import UpstreamError, UpstreamMisconfigured, UpstreamRefused

pytestmark = pytest.mark.unit

DELAYS = [1.0, 2.0, 4.0]


class Upstream:
    """Fails with the given errors in turn, then opens; records the attempts and the pauses."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.attempts = 0
        self.pauses: list[float] = []

    async def open_once(self) -> str:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return "session"

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)

    async def open(self) -> tuple[str | None, Attempts]:
        return await open_with_retries(self.open_once, DELAYS, "demo", sleep=self.sleep)


def unreachable(n: int) -> UpstreamError:
    return UpstreamError(f"raw driver text {n}", summary=f"demo: connect failed ({n})")


async def test_br002_failed_attempts_are_retried_after_their_pauses() -> None:
    upstream = Upstream(unreachable(1), unreachable(2))
    assert await upstream.open() == ("session", Attempts(3))
    assert upstream.pauses == [1.0, 2.0]


async def test_br002_after_the_last_attempt_it_gives_up_with_the_last_summary_and_no_pause() -> None:
    upstream = Upstream(*(unreachable(n) for n in range(1, 6)))
    assert await upstream.open() == (None, Attempts(4, "demo: connect failed (4)", "network"))
    assert upstream.attempts == 4 and upstream.pauses == DELAYS


@pytest.mark.parametrize(
    ("final", "kind"),
    [
        (UpstreamRefused("401", summary="demo: refused"), "auth"),
        (UpstreamMisconfigured("x", summary="demo: x"), "config"),
    ],
)
async def test_br002_refused_or_unstartable_ends_the_attempts_at_once(final: UpstreamError, kind: str) -> None:
    upstream = Upstream(unreachable(1), final)
    assert await upstream.open() == (None, Attempts(2, final.summary, kind))
    assert upstream.attempts == 2 and upstream.pauses == [1.0]


async def test_a_failure_that_is_no_upstream_error_is_not_retried() -> None:
    upstream = Upstream(RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        await upstream.open()
    assert upstream.attempts == 1 and upstream.pauses == []


async def test_without_pauses_it_tries_once() -> None:
    upstream = Upstream(unreachable(1))
    assert await open_with_retries(upstream.open_once, [], "demo", sleep=upstream.sleep) == (
        None,
        Attempts(1, "demo: connect failed (1)"),
    )
