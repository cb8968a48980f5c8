"""What the roles of one process share besides its connections, held by one object that is created
with the process's ``Backends`` (``runtime.open_backends``) and reached through it.

``toolmesh up`` runs the indexer, the gateway and the classifier-worker in one process: they share
one embedding model and its bulk lane, and the gateway's searches read the catalog the indexer keeps
(the indexer alone opens the index). A process that runs one role has a context all the same, used
by that role alone. Nothing of it lives in a module's globals: each test builds its own.

This module loads neither the model's runtime nor an index backend, so a role that never embeds (a
session-worker) does not pay for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.platform.loop_lag import LoopLag

if TYPE_CHECKING:
    from toolmesh.embed.model import Embedder
    from toolmesh.search.table import SearchTable


class ProcessContext:
    """The state the roles of one process share.

    * ``lanes``: the bulk embedding lane of each embedder (``EmbeddingLanes``).
    * ``lent_table``: the catalog of this process's indexer, which its gateway's searches read
      (``search.setup.lend_table``); None while no indexer runs here.
    * the embedder, loaded by the first role that asks (``embedder``).
    * ``loop_lag``: how late the process's event loop runs (``loop_lag``), which its roles' admission
      control follows (``capacity``).
    """

    def __init__(self) -> None:
        self.lanes = EmbeddingLanes()
        self.loop_lag = LoopLag()
        self.lent_table: SearchTable | None = None
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._embedder_lock = threading.Lock()

    def embedder(self, load: Callable[[], Embedder | None]) -> Embedder | None:
        """The process's embedder: loaded by ``load`` (``embed.model.load_embedder``, on the caller's
        thread) for the first role that asks, the same one for the others; None when it cannot load."""
        with self._embedder_lock:
            if not self._embedder_loaded:
                self._embedder = load()
                self._embedder_loaded = True
            return self._embedder
