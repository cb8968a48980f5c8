"""Tool search and skills against real NATS, Postgres and MCP peers (BR-003/004/007/008/009, EC-009)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from tests.harness import ADMIN_TOKEN, RoleProcess, System, eventually, make_settings, running_system
from tests.peers.launch import launch_peer
from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.model import load_embedder
from toolmesh.index.base import Where
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh.search.service import SearchService
from toolmesh.search.setup import local_catalogs
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_cli.embedded import free_port
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.indexer import LEASE as INDEXER_LEASE
from toolmesh_projector.vector_index.edge import EdgeIndex
from toolmesh_projector.vector_index.factory import open_index

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
QUERY = {"query": "search documents in the library", "strategy": "flat", "limit": 20}
ALL_BUT_CLASSIFIER = ["gateway", "session-worker", "projector", "indexer"]


async def search(system: System, **body: Any) -> dict[str, Any]:
    response = await system.api.post("/api/v1/search", json={**QUERY, **body})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def found(result: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(t["name"], t["source_server"]["name"], t["source_server"]["status"]) for t in result["tools"]}


async def search_until(system: System, check: Any, what: str, **body: Any) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        result = await search(system, **body)
        return result if check(result) else None

    return await eventually(probe, timeout=30, what=what)


async def test_br009_br007_br008_search_follows_server_lifecycle(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with running_system(nats_url, database_url, data_dir=tmp_path) as system:
        async with launch_peer("stdio") as peer_a, launch_peer("stdio") as peer_b:
            a = await system.register("alpha", "STDIO", peer_a.config)
            b = await system.register("beta", "STDIO", peer_b.config)
            await system.wait_connected(a["id"])
            await system.wait_connected(b["id"])
            both = {("alpha.search", "alpha", "CONNECTED"), ("beta.search", "beta", "CONNECTED")}
            await search_until(system, lambda r: both <= found(r), "both search tools")
            result = await search(system)
            top = result["tools"][0]
            assert top["original_name"] == "search" and top["type"] == "tool"
            assert top["db_id"] is not None and top["id"] == str(top["db_id"])
            assert top["source_server"]["id"] in (a["id"], b["id"])
            assert "input_schema" not in top or top["input_schema"] is None
            assert result["metadata"]["servers_searched"] == 2
            assert result["metadata"]["strategy_used"] == "flat"

            only_beta = await search(system, server_filter=["beta"], include_schemas=True)
            assert {t["source_server"]["name"] for t in only_beta["tools"]} == {"beta"}
            schema = next(t for t in only_beta["tools"] if t["original_name"] == "search")["input_schema"]
            assert schema["properties"]["query"]["type"] == "string"
            assert (await search(system, include_external=False))["tools"] == []

            # BR-007: a disconnected server's tools leave the results, and come back on reconnect.
            await system.api.post(f"{SERVERS}/{a['id']}/disconnect", json={"force": True})
            await search_until(system, lambda r: "alpha" not in {n for _, n, _ in found(r)}, "alpha to drop out")
            await system.api.post(f"{SERVERS}/{a['id']}/connect")
            await system.wait_connected(a["id"])
            await search_until(system, lambda r: both <= found(r), "alpha to come back")

            # BR-008: removal deletes its points from the index (before they leave the catalog searches read).
            assert (await system.api.delete(f"{SERVERS}/{a['id']}")).status_code == 204
            await search_until(system, lambda r: "alpha" not in {n for _, n, _ in found(r)}, "alpha removed")
    # The index as the indexer left it, opened as the indexer opens it (an embedded one is its process's
    # while the indexer runs).
    async with open_index(system.settings) as index:
        assert await index.scroll(Where(server_id=a["id"])) == []
        assert await index.scroll(Where(server_id=b["id"])) != []


async def test_br004_classification_lands_and_hierarchical_search(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with running_system(nats_url, database_url, data_dir=tmp_path) as system:
        async with launch_peer("stdio") as peer:
            created = await system.register("demo", "STDIO", peer.config)
            await system.wait_connected(created["id"])

            async def classified() -> dict[str, Any] | None:
                body = (await system.api.get(f"{SERVERS}/{created['id']}/tools")).json()
                return body if body["unclassified"] == 0 and body["total"] > 0 else None

            tools = await eventually(classified, timeout=60, what="every tool classified")
            search_tool = next(t for t in tools["tools"] if t["original_name"] == "search")
            assert search_tool["is_classified"] is True
            assert 1 <= len(search_tool["skill_ids"]) <= 3
            assert search_tool["primary_skill_id"] == search_tool["skill_ids"][0]

            result = await search_until(
                system,
                lambda r: any(t["name"] == "demo.search" and t["skill_ids"] for t in r["tools"]),
                "classification in the index",
                strategy="hierarchical",
                skill_threshold=0.2,
            )
            assert result["matched_skills"], result
            assert result["metadata"]["strategy_used"] in ("hierarchical", "flat")
            hit = next(t for t in result["tools"] if t["name"] == "demo.search")
            assert hit["primary_skill_id"] == search_tool["primary_skill_id"]
            # No skill matches at an impossible threshold: flat fallback still finds the tool.
            fallback = await search(system, strategy="hierarchical", skill_threshold=1.0)
            assert fallback["metadata"]["strategy_used"] == "flat" and fallback["matched_skills"] == []
            assert "demo.search" in {t["name"] for t in fallback["tools"]}
            health = (await system.api.get("/api/v1/search/health")).json()
            assert health["index"] == "ok" and health["embedder"].startswith("ok")


async def test_ec009_tools_searchable_while_classifier_down_then_classified(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with running_system(nats_url, database_url, roles=ALL_BUT_CLASSIFIER, data_dir=tmp_path) as system:
        async with launch_peer("stdio") as peer:
            created = await system.register("lonely", "STDIO", peer.config)
            await system.wait_connected(created["id"])
            result = await search_until(
                system, lambda r: "lonely.search" in {t["name"] for t in r["tools"]}, "unclassified tool found"
            )
            assert all(t["is_classified"] is False for t in result["tools"])
            tools = (await system.api.get(f"{SERVERS}/{created['id']}/tools")).json()
            assert tools["classified"] == 0
            # The classifier-worker comes back (as its own process's role): the durable consumer kept
            # the discovery for it.
            async with running_system(nats_url, database_url, roles=["classifier-worker"], data_dir=tmp_path):

                async def classified() -> bool:
                    body = (await system.api.get(f"{SERVERS}/{created['id']}/tools")).json()
                    return bool(body["total"]) and body["unclassified"] == 0

                await eventually(classified, timeout=60, what="classification after the worker returned")
            await search_until(
                system,
                lambda r: any(t["name"] == "lonely.search" and t["is_classified"] for t in r["tools"]),
                "classified in the index",
            )


async def test_index_rebuilt_by_replay_answers_the_same(nats_url: str, database_url: str, tmp_path: Path) -> None:
    async with running_system(nats_url, database_url, data_dir=tmp_path / "live") as system:
        async with launch_peer("stdio") as peer_a, launch_peer("stdio", tools=30) as peer_b:
            a = await system.register("one", "STDIO", peer_a.config)
            b = await system.register("two", "STDIO", peer_b.config)
            await system.wait_connected(a["id"])
            await system.wait_connected(b["id"])

            async def settled() -> int | None:
                """The last event in the catalog searches read, once all is classified, indexed and embedded."""
                body = (await system.api.get(f"{SERVERS}/{b['id']}/tools")).json()
                info = await system.backends.js.stream_info(EVENTS_STREAM)
                health = (await system.api.get("/api/v1/search/health")).json()
                applied = int(health["last_applied_seq"])
                indexed = applied == info.state.last_seq and health["tools_without_vector"] == 0
                return applied if body["unclassified"] == 0 and indexed else None

            last_seq = await eventually(settled, timeout=60, what="classification, indexing and embedding to settle")

            rebuilt = EdgeIndex(tmp_path / "rebuilt", 384)
            context = system.backends.context
            embedder = context.embedder(load_embedder)  # the model the system's indexer loaded
            projection = IndexProjection(rebuilt, embedder, load_taxonomy(), lanes=context.lanes)
            await projection.start()
            config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE)
            sub = await system.backends.js.pull_subscribe(EVENTS_SUBJECTS, stream=EVENTS_STREAM, config=config)
            seq = 0
            while seq < last_seq:
                try:
                    messages = await sub.fetch(50, timeout=2)
                except (NatsTimeout, TimeoutError):
                    break
                for msg in messages:
                    seq = msg.metadata.sequence.stream
                    if seq <= last_seq:
                        await projection.apply(decode_event(msg.subject, msg.data), seq)
            await sub.unsubscribe()
            await projection.embed_all()
            await projection.flush()

            source_live, source_rebuilt = local_catalogs(context), projection.table.catalog
            for query in ("search documents", "add two numbers", "echo the text back", "tool 7"):
                for strategy in ("flat", "hierarchical"):
                    request = SearchRequest(query=query, strategy=strategy, limit=15, include_schemas=True)
                    expected = await SearchService(source_live, embedder).search(request)
                    got = await SearchService(source_rebuilt, embedder).search(request)
                    assert [t.model_dump() for t in got.tools] == [t.model_dump() for t in expected.tools]
                    assert got.matched_skills == expected.matched_skills
            await rebuilt.close()


async def test_every_gateway_replica_answers_search_and_reports_index_lag(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    # The embedded index lives in the process running the indexer; gateways elsewhere forward.
    async with running_system(nats_url, database_url, data_dir=tmp_path / "main") as system:
        async with launch_peer("stdio") as peer:
            created = await system.register("shared", "STDIO", peer.config)
            await system.wait_connected(created["id"])
            expected = await search_until(
                system, lambda r: "shared.search" in {t["name"] for t in r["tools"]}, "the tool in the index"
            )
            ports = [free_port(), free_port()]
            replicas = [
                RoleProcess("gateway", make_settings(nats_url, database_url, port=port, data_dir=tmp_path / f"g{port}"))
                for port in ports
            ]
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}", headers=headers, timeout=30) for p in ports]
            try:
                for client in clients:

                    async def answers(c: httpx.AsyncClient = client) -> tuple[dict[str, Any], dict[str, Any]] | None:
                        """The replica's answer beside the indexer's own answer at the same moment (the
                        ranking settles as vectors and skills arrive, on both alike)."""
                        try:
                            response = await c.post("/api/v1/search", json=QUERY)
                        except httpx.TransportError:
                            return None
                        if response.status_code != 200:
                            return None
                        own = await search(system, **QUERY)
                        got = response.json()
                        same = [t["name"] for t in got["tools"]] == [t["name"] for t in own["tools"]]
                        return (got, own) if same else None

                    got, own = await eventually(answers, timeout=60, what="a gateway replica to answer as the indexer")
                    assert {t["name"] for t in got["tools"]} >= {t["name"] for t in expected["tools"][:1]}
                    assert [t["id"] for t in got["tools"]] == [t["id"] for t in own["tools"]]  # db ids
                    health = (await client.get("/api/v1/search/health")).json()
                    assert health["index"] == "ok" and health["tools"] >= 1
                    assert health["events_behind"] >= 0 and "catalog_age_s" in health
                    assert health["answered_by"] == "indexer (over NATS)"
                local = (await system.api.get("/api/v1/search/health")).json()
                info = await system.backends.js.stream_info(EVENTS_STREAM)
                assert local["stream_last_seq"] <= info.state.last_seq
                assert local["events_behind"] == local["stream_last_seq"] - local["last_applied_seq"]
            finally:
                for client in clients:
                    await client.aclose()
                for replica in replicas:
                    replica.terminate()


async def test_a_gateway_without_any_indexer_says_search_is_unavailable(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with running_system(nats_url, database_url, roles=["gateway"], data_dir=tmp_path) as system:
        response = await system.api.post("/api/v1/search", json=QUERY)
        assert response.status_code == 503, response.text
        assert response.json()["error_code"] == "BACKEND_UNAVAILABLE"
        health = (await system.api.get("/api/v1/search/health")).json()
        assert health["index"].startswith("error")


async def test_one_indexer_replica_is_active_and_a_standby_takes_over(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    standby_settings = make_settings(nats_url, database_url, data_dir=tmp_path / "standby")
    observer = await nats.connect(nats_url)
    kv = await leases_bucket(observer.jetstream(), standby_settings.lease_ttl_seconds)
    leases = LeaseTable(kv, "test-observer")
    standby: RoleProcess | None = None
    try:
        async with running_system(nats_url, database_url, data_dir=tmp_path / "active") as system:
            async with launch_peer("stdio") as peer:
                created = await system.register("failover", "STDIO", peer.config)
                await system.wait_connected(created["id"])
                await search_until(system, lambda r: "failover.search" in {t["name"] for t in r["tools"]}, "indexed")
                assert await leases.holder_of(INDEXER_LEASE) == system.backends.process_id
                standby = RoleProcess("indexer", standby_settings)

                async def standby_waits() -> bool:  # started, asked for the lease, and did not get it
                    holder = await leases.holder_of(INDEXER_LEASE)
                    return (
                        standby is not None and standby.process.poll() is None and holder == system.backends.process_id
                    )

                await eventually(standby_waits, what="the standby to run without the lease")
        # The active replica stopped and gave the lease back: the standby takes it, replays the
        # stream into its own index, and answers searches for a gateway of a third process.
        standby_id = f"{socket.gethostname()}:{standby.pid}"

        async def taken_over() -> bool:
            return await leases.holder_of(INDEXER_LEASE) == standby_id

        await eventually(taken_over, timeout=30, what="the standby to take the indexer lease")
        async with running_system(nats_url, database_url, roles=["gateway"], data_dir=tmp_path / "gw") as gateway:

            async def answered() -> dict[str, Any] | None:
                health = (await gateway.api.get("/api/v1/search/health")).json()
                return health if health.get("index") == "ok" and health.get("tools", 0) >= 1 else None

            health = await eventually(answered, timeout=60, what="the standby to answer with the replayed index")
            assert health["answered_by"] == "indexer (over NATS)"
    finally:
        await observer.close()
        if standby is not None:
            assert standby.terminate() == 0, standby.stderr_text()
