"""Replies of the NATS API: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {...}}``."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from toolmesh.errors import ToolmeshError
from toolmesh_gateway.idempotency import Stored

JSON = "application/json"


def _jsonable(result: Any) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True)
    if isinstance(result, list):
        return [_jsonable(item) for item in result]
    return result


def success(result: Any) -> Stored:
    """The reply of an operation that returned ``result`` (a model, a list of models, a dict or None)."""
    body = json.dumps({"ok": True, "result": _jsonable(result)}, separators=(",", ":"), default=str)
    return Stored(200, body, JSON)


def failure(exc: ToolmeshError) -> Stored:
    """The reply of an operation that failed: the error body of the REST API, and its status."""
    return Stored(exc.status, json.dumps({"ok": False, "error": exc.body()}, separators=(",", ":"), default=str), JSON)
