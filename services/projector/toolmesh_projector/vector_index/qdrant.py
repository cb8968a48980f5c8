"""The deployment backend: a Qdrant server through ``qdrant-client`` (collection ``mcp_unified_search``).

The checkpoint lives in the same Qdrant, in a one-point collection beside the index, so a
restored or wiped Qdrant brings its own position in the event stream with it.
"""

from __future__ import annotations

import uuid
from typing import Any

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ApiException, ResponseHandlingException, UnexpectedResponse

from toolmesh.errors import BackendUnavailable
from toolmesh.index.base import COLLECTION, Hit, IndexState, Point, Where
from toolmesh_projector.vector_index.filters import KEYWORD_FIELDS, qdrant_filter

_STATE_ID = str(uuid.UUID(int=1))
_SCROLL_PAGE = 1000
_ERRORS = (ApiException, ResponseHandlingException, UnexpectedResponse, OSError, ValueError)


class QdrantIndex:
    """A ``ToolIndex`` on a Qdrant server (or qdrant-client's local mode, for tests)."""

    backend = "qdrant"

    def __init__(self, client: AsyncQdrantClient, dimensions: int, collection: str = COLLECTION) -> None:
        self._client = client
        self._dimensions = dimensions
        self._collection = collection
        self._state_collection = f"{collection}_state"

    @classmethod
    async def connect(cls, url: str, dimensions: int, *, api_key: str | None = None) -> QdrantIndex:
        """Open the client and make sure both collections exist."""
        index = cls(AsyncQdrantClient(url=url, api_key=api_key, timeout=10), dimensions)
        await index.ensure_collections()
        return index

    async def ensure_collections(self) -> None:
        """Create the collections and payload indexes if missing (safe to repeat)."""
        try:
            if not await self._client.collection_exists(self._collection):
                await self._client.create_collection(
                    self._collection,
                    vectors_config=models.VectorParams(size=self._dimensions, distance=models.Distance.COSINE),
                )
                for name in KEYWORD_FIELDS:
                    await self._client.create_payload_index(self._collection, name, models.PayloadSchemaType.KEYWORD)
            if not await self._client.collection_exists(self._state_collection):
                await self._client.create_collection(
                    self._state_collection, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
                )
        except _ERRORS as exc:
            raise BackendUnavailable(f"Qdrant unavailable: {exc}") from exc

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except _ERRORS as exc:
            raise BackendUnavailable(f"Qdrant operation failed: {exc}") from exc

    async def upsert(self, points: list[Point]) -> None:
        if points:
            structs = [models.PointStruct(id=p.id, vector=list(p.vector), payload=p.payload) for p in points]
            await self._call(self._client.upsert(self._collection, structs, wait=True))

    async def delete(self, ids: list[str]) -> None:
        if ids:
            selector = models.PointIdsList(points=list(ids))
            await self._call(self._client.delete(self._collection, selector, wait=True))

    async def delete_where(self, where: Where) -> None:
        selector = models.FilterSelector(filter=qdrant_filter(where, models))
        await self._call(self._client.delete(self._collection, selector, wait=True))

    async def set_payload(self, ids: list[str], payload: dict[str, Any]) -> None:
        if ids:
            await self._call(self._client.set_payload(self._collection, payload, points=list(ids), wait=True))

    async def set_payload_where(self, where: Where, payload: dict[str, Any]) -> None:
        selector = models.FilterSelector(filter=qdrant_filter(where, models))
        await self._call(self._client.set_payload(self._collection, payload, points=selector, wait=True))

    async def query(self, vector: list[float], where: Where, limit: int, *, with_payload: bool = True) -> list[Hit]:
        response = await self._call(
            self._client.query_points(
                self._collection,
                query=list(vector),
                query_filter=qdrant_filter(where, models),
                limit=limit,
                with_payload=with_payload,
            )
        )
        return [Hit(id=str(p.id), payload=dict(p.payload or {}), score=float(p.score)) for p in response.points]

    async def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Hit]:
        found: list[Hit] = []
        offset: Any = None
        condition = qdrant_filter(where, models)
        while True:
            records, offset = await self._call(
                self._client.scroll(
                    self._collection,
                    scroll_filter=condition,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            )
            found += [_hit(r, with_vectors) for r in records]
            if offset is None:
                return found

    async def retrieve(self, ids: list[str], *, with_vectors: bool = False) -> list[Hit]:
        if not ids:
            return []
        records = await self._call(
            self._client.retrieve(self._collection, list(ids), with_payload=True, with_vectors=with_vectors)
        )
        return [_hit(r, with_vectors) for r in records]

    async def load_state(self) -> IndexState:
        records = await self._call(self._client.retrieve(self._state_collection, [_STATE_ID], with_payload=True))
        if not records:
            return IndexState()
        payload = records[0].payload or {}
        return IndexState(
            last_seq=int(payload.get("last_seq", 0)),
            servers=dict(payload.get("servers", {})),
        )

    async def save_state(self, state: IndexState) -> None:
        point = models.PointStruct(
            id=_STATE_ID,
            vector=[1.0],
            payload={"last_seq": state.last_seq, "servers": state.servers},
        )
        await self._call(self._client.upsert(self._state_collection, [point], wait=True))

    async def reset(self) -> None:
        for name in (self._collection, self._state_collection):
            await self._call(self._client.delete_collection(name))
        await self.ensure_collections()

    async def close(self) -> None:
        await self._client.close()


def _hit(record: Any, with_vectors: bool) -> Hit:
    vector = record.vector if with_vectors and isinstance(record.vector, list) else None
    return Hit(id=str(record.id), payload=dict(record.payload or {}), vector=vector)
