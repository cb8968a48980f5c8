"""Search across processes: a gateway without the catalog asks, over NATS, a process that holds it.

With the embedded index only the process running the indexer holds the catalog; every other
gateway replica forwards ``SearchQuery`` requests as the ``search`` verbs of the bus registry
(``bus.verbs``; a queue group, so any holder answers, one at a time per request) and gets the
``SearchResponse`` back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import BaseModel
from pydantic_core import to_json

from toolmesh.contracts.rpc import RpcReply
from toolmesh.contracts.search import SEARCH_QUEUE, SearchHealthQuery, SearchQuery, SearchRequest, SearchResponse
from toolmesh.errors import BackendUnavailable, error_from_body
from toolmesh.platform.bus import dispatch, verbs
from toolmesh.platform.bus.dispatch import Dispatcher
from toolmesh.platform.bus.interface import Bus, Message, Subscription
from toolmesh.platform.bus.verbs import Verb
from toolmesh.search.service import SearchService

log = logging.getLogger("toolmesh.search")
TIMEOUT_SECONDS = 5.0
CONCURRENT = 8  # searches one holder answers at once
_KEY = verbs.SEARCH.key


class RemoteSearch:
    """Forwards searches to whichever process holds the catalog."""

    def __init__(self, bus: Bus, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self._bus = bus
        self._timeout = timeout

    async def _ask(self, verb: Verb, body: BaseModel) -> dict[str, Any]:
        try:
            data = await dispatch.request(self._bus, verb, _KEY, body, timeout=self._timeout)
        except NoRespondersError as exc:
            raise BackendUnavailable("No process holding the search index is running (start an indexer)") from exc
        except NatsTimeout as exc:
            raise BackendUnavailable(f"The search index did not answer within {self._timeout:.0f}s") from exc
        reply = RpcReply.model_validate_json(data)
        if not reply.ok:
            raise error_from_body(reply.error or {})
        return reply.result or {}

    async def search(self, request: SearchRequest, namespace: str | None) -> SearchResponse:
        """The holder's answer to ``request``."""
        query = SearchQuery(request=request, namespace=namespace)
        return SearchResponse.model_validate(await self._ask(verbs.SEARCH_QUERY, query))

    async def health(self, namespace: str | None) -> dict[str, Any]:
        """The holder's view of the index (of one namespace's tools, unless ``namespace`` is None)."""
        query = SearchHealthQuery(namespace=namespace)
        return {**await self._ask(verbs.SEARCH_HEALTH, query), "answered_by": "indexer (over NATS)"}


def search_dispatcher(service: SearchService) -> Dispatcher:
    """The ``search`` verbs, answered with ``service``."""

    async def query(key: str, body: SearchQuery) -> bytes:
        response = await service.search(body.request, namespace=body.namespace)
        return response.model_dump_json().encode()

    async def health(key: str, body: SearchHealthQuery) -> bytes:
        return to_json(await service.health(body.namespace))

    return Dispatcher(verbs.SEARCH, {verbs.SEARCH_QUERY: query, verbs.SEARCH_HEALTH: health}, span_name="search")


async def serve_search(bus: Bus, service: SearchService, stop: asyncio.Event) -> None:
    """Answer forwarded searches and health requests with ``service`` until ``stop`` is set (or the
    task is cancelled: either way it leaves the queue group), at most ``CONCURRENT`` at once (a
    subscription takes its next message once one of them is answered)."""
    gate = asyncio.Semaphore(CONCURRENT)
    dispatcher = search_dispatcher(service)

    async def answer(msg: Message) -> None:
        try:
            await dispatcher.dispatch(msg)
        finally:
            gate.release()

    async with asyncio.TaskGroup() as group:

        async def take(msg: Message) -> None:
            await gate.acquire()
            group.create_task(answer(msg))

        subs: list[Subscription] = []
        try:
            for verb in (verbs.SEARCH_QUERY, verbs.SEARCH_HEALTH):
                subs.append(await bus.subscribe(verb.subject(_KEY), take, queue=SEARCH_QUEUE))
            await stop.wait()
        finally:  # a member left behind would take its share of the searches and answer none
            for sub in subs:
                with contextlib.suppress(NatsError):  # a closed connection took it already
                    await sub.unsubscribe()
