"""Replies of the NATS API: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {...}}``."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from toolmesh.errors import ToolmeshError, ValidationFailed
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


def invalid_payload(exc: ValidationError) -> ValidationFailed:
    """A payload refused by its model, with FastAPI-like error items (``loc``, ``msg``, ``type``)."""
    errors = []
    for item in exc.errors(include_url=False, include_input=False):
        loc = list(item["loc"])
        if loc and loc[0] == "body":  # the subscriber's parameter name, not part of the payload
            loc = loc[1:]
        message = item["msg"]
        if item["type"] == "model_type" and not loc:
            message = "the payload must be a JSON object"
        errors.append({"loc": loc, "msg": message, "type": item["type"]})
    return ValidationFailed("Request validation failed", {"errors": errors})
