"""Wire helpers of upstream sessions: raw requests and results, list-changed methods, progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from pydantic import BaseModel, ConfigDict

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
LISTED_CHANGES = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


class RawRequest(mcp_types.Request[dict[str, Any] | None, str]):
    """Any client → server request, its params passed through untouched."""

    params: dict[str, Any] | None = None


class RawResult(BaseModel):
    """Any result, every field kept under its wire name."""

    model_config = ConfigDict(extra="allow")


class ProgressForwarder:
    """Adapts any ``(progress, total, message) -> Awaitable`` callable to the SDK's progress protocol."""

    def __init__(self, callback: ProgressCallback) -> None:
        self._callback = callback

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        await self._callback(progress, total, message)
