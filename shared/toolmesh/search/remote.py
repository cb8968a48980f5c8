"""Search across processes: a gateway without the catalog asks, over NATS, a process that holds it.

With the embedded index only the process running the indexer holds the catalog; every other
gateway replica forwards ``SearchQuery`` requests on ``SEARCH_SUBJECT`` (a queue group, so any
holder answers, one at a time per request) and gets the ``SearchResponse`` back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import ValidationError

from toolmesh.contracts.rpc import RpcReply
from toolmesh.contracts.search import (
    SEARCH_HEALTH_SUBJECT,
    SEARCH_QUEUE,
    SEARCH_SUBJECT,
    SearchHealthQuery,
    SearchQuery,
    SearchRequest,
    SearchResponse,
)
from toolmesh.errors import BackendUnavailable, RoutingFailed, ToolmeshError, error_from_body
from toolmesh.search.service import SearchService

log = logging.getLogger("toolmesh.search")
TIMEOUT_SECONDS = 5.0
CONCURRENT = 8  # searches one holder answers at once


class RemoteSearch:
    """Forwards searches to whichever process holds the catalog."""

    def __init__(self, nc: NATS, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self._nc = nc
        self._timeout = timeout

    async def _ask(self, subject: str, data: bytes) -> dict[str, Any]:
        try:
            msg = await self._nc.request(subject, data, timeout=self._timeout)
        except NoRespondersError as exc:
            raise BackendUnavailable("No process holding the search index is running (start an indexer)") from exc
        except NatsTimeout as exc:
            raise BackendUnavailable(f"The search index did not answer within {self._timeout:.0f}s") from exc
        reply = RpcReply.model_validate_json(msg.data)
        if not reply.ok:
            raise error_from_body(reply.error or {})
        return reply.result or {}

    async def search(self, request: SearchRequest, namespace: str | None) -> SearchResponse:
        """The holder's answer to ``request``."""
        query = SearchQuery(request=request, namespace=namespace)
        return SearchResponse.model_validate(await self._ask(SEARCH_SUBJECT, query.model_dump_json().encode()))

    async def health(self, namespace: str | None) -> dict[str, Any]:
        """The holder's view of the index (of one namespace's tools, unless ``namespace`` is None)."""
        query = SearchHealthQuery(namespace=namespace).model_dump_json().encode()
        return {**await self._ask(SEARCH_HEALTH_SUBJECT, query), "answered_by": "indexer (over NATS)"}


async def serve_search(nc: NATS, service: SearchService, stop: asyncio.Event) -> None:
    """Answer forwarded searches and health requests with ``service`` until ``stop`` is set."""
    gate = asyncio.Semaphore(CONCURRENT)

    async def answer(msg: Msg) -> None:
        try:
            if msg.subject == SEARCH_HEALTH_SUBJECT:
                try:
                    health = SearchHealthQuery.model_validate_json(msg.data or b"{}")
                except ValidationError as exc:
                    raise RoutingFailed(f"Malformed search health request: {exc}") from exc
                result = await service.health(health.namespace)
            else:
                try:
                    query = SearchQuery.model_validate_json(msg.data)
                except ValidationError as exc:
                    raise RoutingFailed(f"Malformed search request: {exc}") from exc
                response = await service.search(query.request, namespace=query.namespace)
                result = response.model_dump(mode="json")
            reply = RpcReply(ok=True, result=result)
        except ToolmeshError as exc:
            reply = RpcReply(ok=False, error=exc.body())
        finally:
            gate.release()
        if msg.reply:
            await msg.respond(reply.model_dump_json().encode())

    async with asyncio.TaskGroup() as group:
        subs = [await nc.subscribe(subject, queue=SEARCH_QUEUE) for subject in (SEARCH_SUBJECT, SEARCH_HEALTH_SUBJECT)]

        async def pump(sub: Any) -> None:
            async for msg in sub.messages:
                await gate.acquire()
                group.create_task(answer(msg))

        pumps = [group.create_task(pump(sub)) for sub in subs]
        await stop.wait()
        for sub in subs:
            await sub.unsubscribe()
        for task in pumps:
            task.cancel()
