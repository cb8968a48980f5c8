"""The embedded indexes the roles of one process share: one open instance per path, closed by its
last user.

Kept apart from the backends (``toolmesh_projector.vector_index``) so that the process context can
hold one without loading an index backend (a session-worker process never opens an index).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from toolmesh.index.base import ToolIndex


class SharedIndexes:
    """The indexes open in one process, each with the number of roles using it."""

    def __init__(self) -> None:
        self._open: dict[Path, tuple[ToolIndex, int]] = {}
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def use(self, path: Path, opener: Callable[[Path], Awaitable[ToolIndex]]) -> AsyncIterator[ToolIndex]:
        """The index at ``path``: opened by ``opener`` unless another role has it open, closed when
        the last role using it leaves."""
        async with self._lock:
            index, users = self._open.get(path, (None, 0))
            if index is None:
                index = await opener(path)
            self._open[path] = (index, users + 1)
        try:
            yield index
        finally:
            async with self._lock:
                index, users = self._open[path]
                if users <= 1:
                    del self._open[path]
                    await index.close()
                else:
                    self._open[path] = (index, users - 1)

    def get(self, path: Path) -> ToolIndex | None:
        """The index at ``path`` if a role of this process has it open, else None."""
        entry = self._open.get(path)
        return entry[0] if entry else None
