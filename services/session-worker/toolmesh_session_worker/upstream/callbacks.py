"""What an upstream session tells its owner unasked: a list changed, another notification, the
connection was lost.

The owner's callbacks run in the session's runner task. ``SessionCallbacks`` routes each incoming
notification to the callback it is for, logs a callback's failure (a callback never ends the
session), and knows whether the current task is inside one of its callbacks, so that
``UpstreamSession.close()`` called from a callback does not wait for the runner that called it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.client.session import IncomingMessage

from toolmesh_session_worker.upstream.client_side import CURRENT_CALL, ClientSide
from toolmesh_session_worker.upstream.errors import describe
from toolmesh_session_worker.upstream.wire import LISTED_CHANGES

logger = logging.getLogger("toolmesh.upstream")

ToolsChangedCallback = Callable[[], Awaitable[None]]
ListChangedCallback = Callable[[str], Awaitable[None]]
"""Called with ``resources`` or ``prompts`` when the upstream says that list changed."""
LostCallback = Callable[[str], Awaitable[None]]

_callback_owner: contextvars.ContextVar[SessionCallbacks | None] = contextvars.ContextVar(
    "upstream_callback_owner", default=None
)


class SessionCallbacks:
    """The owner's callbacks of one upstream session, and the routing of its notifications to them."""

    def __init__(
        self,
        server_name: str,
        *,
        on_tools_changed: ToolsChangedCallback | None = None,
        on_list_changed: ListChangedCallback | None = None,
        on_lost: LostCallback | None = None,
        client_side: ClientSide | None = None,
    ) -> None:
        self._server_name = server_name
        self._on_tools_changed = on_tools_changed
        self._on_list_changed = on_list_changed
        self._on_lost = on_lost
        self._client_side = client_side

    @property
    def running(self) -> bool:
        """Whether the current task is inside one of these callbacks (or a task it started)."""
        return _callback_owner.get() is self

    async def message(self, message: IncomingMessage) -> None:
        """The SDK's message handler: list changes to the owner, other notifications to ``ClientSide``."""
        if isinstance(message, Exception):
            logger.warning("upstream transport reported: %s", describe(message), extra={"server": self._server_name})
            return
        wire = message.model_dump(by_alias=True, mode="json", exclude_none=True)
        changed = LISTED_CHANGES.get(wire["method"])
        if changed == "tools":
            if self._on_tools_changed is not None:
                await self._invoke(self._on_tools_changed)
        elif changed is not None:
            if self._on_list_changed is not None:
                await self._invoke(self._on_list_changed, changed)
        elif self._client_side is not None:
            await self._invoke(self._client_side.notification, wire["method"], wire.get("params"), CURRENT_CALL.get())

    async def lost(self, reason: str) -> None:
        """Tell the owner the connection was lost, and why."""
        if self._on_lost is not None:
            await self._invoke(self._on_lost, reason)

    async def _invoke(self, callback: Callable[..., Awaitable[None]], *args: Any) -> None:
        token = _callback_owner.set(self)
        try:
            await callback(*args)
        except Exception:
            logger.exception("upstream session callback failed", extra={"server": self._server_name})
        finally:
            _callback_owner.reset(token)
