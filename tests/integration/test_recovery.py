"""BR-002's edge cases, against real NATS, Postgres and MCP peers: a server left in ERROR by a
network failure connects again by itself on a capped backoff; an upstream refusing toolmesh's
credentials (401/403) is a security warning and is not retried."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from tests.faults.events import read_events
from tests.harness import System, eventually, running_system
from tests.peers.launch import demo_args, free_port, launch_peer, launch_rest_peer, running_process
from toolmesh.contracts.events import ServerStatusChanged
from toolmesh.platform import metrics

pytestmark = pytest.mark.integration
RECONCILE_SECONDS = 0.1
LAG_ROUNDS = 20
QUICK = {"connect_retries": 1, "connect_backoff_seconds": (0.1,), "error_retry_seconds": (0.5, 1.0)}


async def retry_state(system: System, server_id: str) -> dict[str, Any]:
    row = await system.backends.db.fetchrow(
        "SELECT status, retry_at, auto_retries, error_message FROM mcp.external_servers WHERE id = $1::uuid",
        server_id,
    )
    assert row is not None
    return dict(row)


async def error_details(system: System, server_id: str) -> list[dict[str, Any]]:
    """The details of the server's ERROR history rows, oldest first."""
    rows = await system.backends.db.fetch(
        "SELECT details FROM mcp.server_connection_history WHERE server_id = $1::uuid AND event_type = 'ERROR' "
        "ORDER BY id",
        server_id,
    )
    return [row["details"] for row in rows]


def reconcile_rounds() -> float:
    """Reconcile rounds the session-worker of the system under test finished so far."""
    return metrics.registry().get_sample_value("mcp_aggregator_reconcile_rounds_total") or 0.0


async def streamed_errors(system: System, server_id: str) -> int:
    """How many ERROR status events of the server the stream holds (projected or not)."""
    return sum(
        subject == ServerStatusChanged.subject and event["server_id"] == server_id and event["status"] == "ERROR"
        for _, subject, event in await read_events(system)
    )


async def test_a_server_that_was_unreachable_connects_by_itself_once_it_is_up(nats_url: str, database_url: str) -> None:
    port = free_port()
    async with running_system(nats_url, database_url, **QUICK) as system:
        server = await system.register("late", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})

        async def retry_scheduled() -> dict[str, Any] | None:
            state = await retry_state(system, server["id"])
            return state if state["status"] == "ERROR" and state["auto_retries"] >= 2 else None

        await eventually(retry_scheduled, what="ERROR with automatic retries scheduled")
        detail = await system.server(server["id"])
        assert detail["status"] != "ERROR" or detail["next_retry_at"] is not None
        details = await error_details(system, server["id"])
        assert {d["error_kind"] for d in details} == {"network"}
        assert [d["auto_retry"] for d in details[:2]] == [1, 2]

        argv = [sys.executable, *demo_args("http", name="late"), "--port", str(port)]
        async with running_process(argv, port=port):
            connected = await system.wait_connected(server["id"])
            assert connected["tool_count"] > 0
            state = await retry_state(system, server["id"])
            assert (state["retry_at"], state["auto_retries"]) == (None, 0)


async def test_a_failed_retry_waits_for_the_projection_before_the_server_is_claimed_again(
    nats_url: str, database_url: str
) -> None:
    """While the projector lags, a worker whose connect failed keeps the server until the read model
    shows that ERROR: a claim from the older row would retry at once and count the same retry twice."""
    port = free_port()
    settings = {**QUICK, "error_retry_seconds": (0.2,), "reconcile_interval_seconds": RECONCILE_SECONDS}
    settings["projection_wait_seconds"] = 10
    async with running_system(nats_url, database_url, **settings) as system:
        server = await system.register("late", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})

        async def failed_once() -> bool:
            state = await retry_state(system, server["id"])
            return state["status"] == "ERROR" and state["auto_retries"] >= 1

        await eventually(failed_once, what="the first automatic retry scheduled")
        async with system.backends.db.acquire() as conn, conn.transaction():
            # The projector applies each event under this row's lock: holding it holds the read model back.
            await conn.execute("SELECT 1 FROM mcp.projector_checkpoint WHERE projector = 'postgres' FOR UPDATE")
            before = await streamed_errors(system, server["id"])

            async def failed_while_lagging() -> bool:
                return await streamed_errors(system, server["id"]) > before

            await eventually(failed_while_lagging, what="a retry failing while the read model lags")
            # The scenario's lag: the read model stays behind that ERROR for twenty reconcile rounds, in
            # which a reconciler reading the older row would take the server and retry it at once.
            lagging_from = reconcile_rounds()
            await eventually(
                lambda: reconcile_rounds() >= lagging_from + LAG_ROUNDS,
                what=f"{LAG_ROUNDS} reconcile rounds while the read model lags",
            )

        async def failed_three_times() -> bool:
            return len(await error_details(system, server["id"])) >= 3

        await eventually(failed_three_times, what="three failed retries")
        counts = [d["auto_retry"] for d in await error_details(system, server["id"])]
        assert counts[:3] == [1, 2, 3], counts


async def test_an_upstream_refusing_the_key_is_a_security_warning_and_not_retried(
    nats_url: str, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="toolmesh.session")
    async with (
        launch_peer("http", token="the-right-key") as peer,
        running_system(nats_url, database_url, **QUICK) as system,
    ):
        config = {"base_url": peer.url, "headers": {"Authorization": "Bearer a-wrong-key"}}
        server = await system.register("guarded", "HTTP", config)
        failed = await system.wait_status(server["id"], "ERROR")
        assert "401" in failed["error_message"] and failed["next_retry_at"] is None
        state = await retry_state(system, server["id"])
        assert (state["retry_at"], state["auto_retries"]) == (None, 0)
        details = await error_details(system, server["id"])
        assert [(d["error_kind"], d["attempts"]) for d in details] == [("auth", 1)]
        warnings = [r for r in caplog.records if getattr(r, "security", False)]
        assert warnings and warnings[0].server == "guarded"

        ok = {"base_url": peer.url, "headers": {"Authorization": "Bearer the-right-key"}}
        good = await system.register("guarded-ok", "HTTP", ok)
        await system.wait_connected(good["id"])


async def test_a_rest_server_refusing_the_key_is_told_apart_from_a_network_failure(
    nats_url: str, database_url: str
) -> None:
    async with (
        launch_rest_peer(token="rest-key") as url,
        running_system(nats_url, database_url, rest_retry_backoff_seconds=0.05, **QUICK) as system,
    ):
        config = {"url": url, "headers": {"Authorization": "Bearer not-the-rest-key"}}
        server = await system.register("rest-guarded", "REST", config)
        await system.wait_status(server["id"], "ERROR")
        details = await error_details(system, server["id"])
        assert [d["error_kind"] for d in details] == ["auth"]
        assert (await retry_state(system, server["id"]))["retry_at"] is None


async def test_a_stdio_command_that_cannot_start_is_not_retried(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, **QUICK) as system:
        server = await system.register("missing", "STDIO", {"command": "/nonexistent/toolmesh-missing-command"})
        failed = await system.wait_status(server["id"], "ERROR")
        assert failed["next_retry_at"] is None
        details = await error_details(system, server["id"])
        assert [(d["error_kind"], d["attempts"]) for d in details] == [("config", 1)]
