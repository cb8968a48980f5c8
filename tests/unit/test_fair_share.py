"""Fair share between namespaces, without servers: code-mode worker shares, per-namespace session
counts, per-namespace call rates, the failed-authentication limit per source, and each namespace's
quota from the settings."""

from __future__ import annotations

import asyncio

import pytest

from toolmesh.errors import LimitExceeded, RateLimited
from toolmesh.platform.config import Settings
from toolmesh_gateway.auth_failures import AuthFailures
from toolmesh_gateway.front_door.session_quota import NamespaceSessions
from toolmesh_gateway.front_door.worker_shares import WorkerShares
from toolmesh_gateway.rate_limit import NamespaceCallLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_namespace_at_its_cap_leaves_a_worker_to_another_namespace() -> None:
    shares = WorkerShares(2, lambda namespace: 1)
    entered: list[str] = []
    release_a = asyncio.Event()

    async def run(namespace: str, release: asyncio.Event | None) -> None:
        async with shares.worker(namespace):
            entered.append(namespace)
            if release is not None:
                await release.wait()

    first_a = asyncio.create_task(run("a", release_a))
    second_a = asyncio.create_task(run("a", None))
    await asyncio.sleep(0)  # one turn: the tasks start in the order created; both of a's runs asked for a worker
    assert entered == ["a"] and shares.held_by("a") == 1
    await run("b", None)  # b gets the second worker although a asked for it first
    assert entered == ["a", "b"] and not second_a.done()
    release_a.set()
    await asyncio.gather(first_a, second_a)
    assert entered == ["a", "b", "a"] and shares.held_by("a") == shares.held_by("b") == 0


async def test_a_freed_worker_goes_to_the_namespace_holding_fewest() -> None:
    shares = WorkerShares(2, lambda namespace: 2)
    order: list[str] = []
    gates = {name: asyncio.Event() for name in ("a1", "a2", "b1")}
    b_entered = asyncio.Event()

    async def run(label: str, namespace: str) -> None:
        async with shares.worker(namespace):
            order.append(label)
            if label == "b1":
                b_entered.set()
            if label in gates:
                await gates[label].wait()

    # a1 and a2 take both workers, a3 queues first, then b1, whose namespace holds nothing.
    starts = (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"))
    tasks = [asyncio.create_task(run(label, namespace)) for label, namespace in starts]
    await asyncio.sleep(0)  # one turn: the tasks start in the order created, each up to its first wait
    assert order == ["a1", "a2"] and shares.held_by("a") == 2
    gates["a1"].set()
    await b_entered.wait()
    assert order == ["a1", "a2", "b1"]  # the freed worker went to b, not to a's earlier run
    for gate in gates.values():
        gate.set()
    await asyncio.gather(*tasks)
    assert order[3] == "a3"


async def test_a_run_cancelled_while_waiting_gives_up_its_turn() -> None:
    shares = WorkerShares(1, lambda namespace: 1)
    release = asyncio.Event()

    async def hold() -> None:
        async with shares.worker("a"):
            await release.wait()

    holder, waiting = asyncio.create_task(hold()), asyncio.create_task(hold())
    await asyncio.sleep(0)  # one turn: the holder takes the worker, then the other run waits for it
    assert shares.held_by("a") == 1 and not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    await holder
    async with shares.worker("b"):
        assert shares.held_by("b") == 1


def test_sessions_past_a_namespace_limit_are_refused_and_a_closed_one_frees_its_place() -> None:
    held = NamespaceSessions(Settings(namespace_max_mcp_sessions=2, key_max_mcp_sessions=2).namespace_quota)
    held.open("s1", "a", "k1")
    held.open("s2", "a", "k2")
    with pytest.raises(LimitExceeded) as refused:
        held.open("s3", "a", "k3")
    assert refused.value.context == {"namespace": "a", "namespace_max_mcp_sessions": 2}
    held.open("s4", "b", "k1")  # another namespace is not affected
    held.adopt("s5", "a", "k1")  # a session opened elsewhere is served here regardless
    held.close("s1")
    held.close("s5")
    held.close("s1")  # closing twice frees one place only
    held.open("s6", "a", "k3")
    assert held.held_by("a") == 2 and held.held_by("b") == 1


def test_one_key_holds_at_most_its_share_of_its_namespaces_sessions() -> None:
    """A key at its cap is refused while another key of its namespace still opens one."""
    held = NamespaceSessions(Settings(namespace_max_mcp_sessions=8).namespace_quota)
    for n in range(2):  # a quarter of the namespace's 8
        held.open(f"a{n}", "team", "attacker")
    with pytest.raises(LimitExceeded) as refused:
        held.open("a2", "team", "attacker")
    assert refused.value.context == {"namespace": "team", "key_max_mcp_sessions": 2}
    held.open("b0", "team", "admin")
    held.open("c0", "other", "attacker")  # the same key's share in another namespace is its own
    held.close("a0")
    held.open("a3", "team", "attacker")  # a closed session frees the key's place
    assert held.held_by("team") == 3


def test_a_key_at_its_share_ends_its_least_recently_used_idle_session_for_a_new_one() -> None:
    """Clients that never end their sessions do not lock their key out: its least recently used idle
    session makes way; a key whose every session is in use is refused; another key's never make way."""
    held = NamespaceSessions(Settings(namespace_max_mcp_sessions=8).namespace_quota)  # 2 a key
    for session in ("a0", "a1", "b0", "b1"):
        assert held.open(session, "team", session[0]) is None
        held.done(session)
    with held.in_use("a0"):  # a0 used after a1: a1 is the least recently used
        pass
    assert held.open("a2", "team", "a") == "a1"
    assert held.held_by("team") == 4
    with held.in_use("a0"), pytest.raises(LimitExceeded) as refused:  # a0 in use, a2 still opening
        held.open("a3", "team", "a")
    assert refused.value.context == {"namespace": "team", "key_max_mcp_sessions": 2}
    held.done("a2")
    assert held.open("a4", "team", "a") == "a0"  # a0's request ended before a2's opening did
    assert held.open("b2", "team", "b") == "b0"  # b's own, never a's


def test_a_full_namespace_refuses_a_key_below_its_share_and_lets_a_key_at_it_replace_its_own() -> None:
    held = NamespaceSessions(Settings(namespace_max_mcp_sessions=3, key_max_mcp_sessions=2).namespace_quota)
    for session, key in (("a0", "a"), ("a1", "a"), ("b0", "b")):
        held.open(session, "team", key)
        held.done(session)
    with pytest.raises(LimitExceeded) as refused:  # b's share has room, the namespace has none: a's stay
        held.open("b1", "team", "b")
    assert refused.value.context == {"namespace": "team", "namespace_max_mcp_sessions": 3}
    assert held.open("a2", "team", "a") == "a0"
    assert held.held_by("team") == 3


@pytest.mark.parametrize(
    ("namespace_cap", "per_key", "expected"), [(100, None, 25), (3, None, 1), (100, 10, 10), (4, 10, 4)]
)
def test_a_keys_session_share_defaults_to_a_quarter_of_its_namespaces(
    namespace_cap: int, per_key: int | None, expected: int
) -> None:
    settings = Settings(namespace_max_mcp_sessions=namespace_cap, key_max_mcp_sessions=per_key)
    assert settings.namespace_quota("any").key_max_mcp_sessions == expected


def test_a_namespace_over_its_call_rate_gets_retry_after_and_another_is_not_limited() -> None:
    clock = Clock()
    limiter = NamespaceCallLimiter(
        Settings(namespace_calls_per_second=1.0, namespace_calls_burst=2, namespace_limits={"big": {"calls_burst": 5}}),
        clock,
    )
    limiter.check("a")
    limiter.check("a")
    with pytest.raises(RateLimited) as limited:
        limiter.check("a")
    assert limited.value.context == {"retry_after_seconds": 1, "namespace": "a"}
    assert limited.value.headers() == {"Retry-After": "1"}
    for _ in range(5):
        limiter.check("big")  # its own burst
    clock.now += 1.0
    limiter.check("a")


def test_failed_authentications_block_their_source_only_until_the_window_passes() -> None:
    clock = Clock()
    failures = AuthFailures(3, 60.0, clock)
    for _ in range(3):
        failures.check("10.0.0.1")
        failures.failed("10.0.0.1")
        clock.now += 1.0
    with pytest.raises(RateLimited) as limited:
        failures.check("10.0.0.1")
    assert limited.value.context == {"retry_after_seconds": 57}
    failures.check("10.0.0.2")  # another source is not locked out
    clock.now += 57.0
    failures.check("10.0.0.1")  # the oldest failure left the window: one more attempt
    failures.failed("10.0.0.1")
    with pytest.raises(RateLimited):
        failures.check("10.0.0.1")


def test_a_failure_limit_of_zero_turns_the_limit_off() -> None:
    failures = AuthFailures(0, 60.0)
    for _ in range(100):
        failures.failed("10.0.0.1")
    failures.check("10.0.0.1")


def test_namespace_quota_takes_overrides_and_defaults_code_workers_to_half_the_pool() -> None:
    settings = Settings(code_max_workers=4, namespace_limits={"team-a": {"max_servers": 40, "code_workers": 3}})
    own = settings.namespace_quota("team-a")
    other = settings.namespace_quota("team-b")
    assert (own.max_servers, own.code_workers) == (40, 3)
    assert (other.max_servers, other.code_workers) == (settings.namespace_max_servers, 2)
    assert Settings(code_max_workers=1).namespace_quota("x").code_workers == 1
