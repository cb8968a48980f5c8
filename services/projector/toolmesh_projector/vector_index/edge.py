"""The embedded backend: a Qdrant Edge shard in the data dir, with the checkpoint in a file beside it.

Qdrant Edge runs in-process (no server); one process owns a shard directory. Its calls are
synchronous Rust, run in a worker thread so the event loop keeps serving. Every update goes
through the shard's write-ahead log; the checkpoint file is replaced atomically after the update
it covers, and the indexer's updates are idempotent, so a crash between the two only replays.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from toolmesh.errors import BackendUnavailable
from toolmesh.index.base import Hit, IndexState, Point, Where
from toolmesh_projector.vector_index.filters import KEYWORD_FIELDS, qdrant_filter

_SCROLL_PAGE = 1000


def private_dir(path: Path) -> None:
    """Create ``path`` private to this user (0700), or make an existing one so: the index holds every
    namespace's tool names and descriptions, and its files are written 0644."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)


class EdgeIndex:
    """A ``ToolIndex`` on ``qdrant-edge-py``, persisted under ``path`` (a directory only its user may enter)."""

    backend = "qdrant-edge"

    def __init__(self, path: Path, dimensions: int) -> None:
        self.path = path
        self._shard_path = path / "shard"
        self._state_path = path / "checkpoint.json"
        self._dimensions = dimensions
        self._lock = threading.RLock()
        self._state_cache: tuple[tuple[int, int, int], dict[str, Any]] | None = None
        self._shard = self._open()

    def _open(self) -> qe.EdgeShard:
        config = qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=self._dimensions, distance=qe.Distance.Cosine),
            payload_memory=qe.Memory.Cached,
        )
        try:
            private_dir(self.path)
            if (self._shard_path / "edge_config.json").exists() or any(self._shard_path.glob("segments*")):
                return qe.EdgeShard.load(str(self._shard_path), config)
            self._shard_path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(self._shard_path), config)
            for name in KEYWORD_FIELDS:  # filtered queries scan payloads without these
                shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
            return shard
        except Exception as exc:  # the binding raises plain Exceptions for I/O and config errors
            raise BackendUnavailable(f"cannot open the index at {self._shard_path}: {exc}") from exc

    async def _run(self, fn: Any, *args: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                try:
                    return fn(*args)
                except Exception as exc:  # translate the binding's errors at the boundary
                    raise BackendUnavailable(f"index operation failed: {exc}") from exc

        return await asyncio.to_thread(locked)

    def _update(self, operation: qe.UpdateOperation) -> None:
        self._shard.update(operation)

    async def upsert(self, points: list[Point]) -> None:
        if points:
            op = qe.UpdateOperation.upsert_points([qe.Point(p.id, list(p.vector), p.payload) for p in points])
            await self._run(self._update, op)

    async def delete(self, ids: list[str]) -> None:
        if ids:
            await self._run(self._update, qe.UpdateOperation.delete_points(list(ids)))

    async def delete_where(self, where: Where) -> None:
        await self._run(self._update, qe.UpdateOperation.delete_points_by_filter(qdrant_filter(where, qe)))

    async def set_payload(self, ids: list[str], payload: dict[str, Any]) -> None:
        if ids:
            await self._run(self._update, qe.UpdateOperation.set_payload(list(ids), payload))

    async def set_payload_where(self, where: Where, payload: dict[str, Any]) -> None:
        await self._run(self._update, qe.UpdateOperation.set_payload_by_filter(qdrant_filter(where, qe), payload))

    async def query(self, vector: list[float], where: Where, limit: int, *, with_payload: bool = True) -> list[Hit]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(list(vector)),
            filter=qdrant_filter(where, qe),
            with_payload=with_payload,
        )
        found = await self._run(self._shard.query, request)
        return [Hit(id=str(p.id), payload=dict(p.payload or {}), score=float(p.score)) for p in found]

    async def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Hit]:
        return list(await self._run(self._scroll_all, where, with_vectors))

    def _scroll_all(self, where: Where, with_vectors: bool) -> list[Hit]:
        found: list[Hit] = []
        offset: Any = None
        condition = qdrant_filter(where, qe)
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=_SCROLL_PAGE, filter=condition, with_payload=True, with_vector=with_vectors
            )
            records, offset = self._shard.scroll(request)
            found += [_hit(r, with_vectors) for r in records]
            if offset is None:
                return found

    async def retrieve(self, ids: list[str], *, with_vectors: bool = False) -> list[Hit]:
        if not ids:
            return []
        records = await self._run(self._shard.retrieve, list(ids), True, with_vectors)
        return [_hit(r, with_vectors) for r in records]

    async def load_state(self) -> IndexState:
        # Search asks on every query: parse the file again only when it was replaced.
        try:
            stat = self._state_path.stat()
            version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if self._state_cache is None or self._state_cache[0] != version:
                self._state_cache = (version, json.loads(self._state_path.read_text()))
            data = self._state_cache[1]
        except FileNotFoundError:
            return IndexState()
        except (OSError, ValueError) as exc:
            raise BackendUnavailable(f"unreadable index checkpoint {self._state_path}: {exc}") from exc
        return IndexState(
            last_seq=int(data.get("last_seq", 0)),
            servers={server_id: dict(info) for server_id, info in data.get("servers", {}).items()},
        )

    async def save_state(self, state: IndexState) -> None:
        await asyncio.to_thread(self._write_state, state)

    def _write_state(self, state: IndexState) -> None:
        temporary = self._state_path.with_suffix(".tmp")
        with temporary.open("w") as handle:
            json.dump({"last_seq": state.last_seq, "servers": state.servers}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self._state_path)
        self._state_cache = None  # never trust (inode, mtime, size) across our own writes

    async def reset(self) -> None:
        def wipe() -> None:
            with self._lock:
                self._shard.close()
                shutil.rmtree(self._shard_path, ignore_errors=True)
                self._state_path.unlink(missing_ok=True)
                self._state_cache = None
                self._shard = self._open()

        await asyncio.to_thread(wipe)

    async def close(self) -> None:
        def shut() -> None:
            with self._lock:
                self._shard.flush()
                self._shard.close()

        await asyncio.to_thread(shut)


def _hit(record: Any, with_vectors: bool) -> Hit:
    vector = list(record.vector) if with_vectors and isinstance(record.vector, list) else None
    return Hit(id=str(record.id), payload=dict(record.payload or {}), vector=vector)
