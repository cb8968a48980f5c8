"""Payloads refused by their model: the spec's ``VALIDATION_ERROR`` naming each field and why."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from toolmesh.errors import ValidationFailed

Model = TypeVar("Model", bound=BaseModel)


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


def parse_payload(model: type[Model], data: bytes) -> Model:
    """``data`` decoded as ``model``; ``ValidationFailed`` when it is not one (bad JSON, a field of the
    wrong type, nesting past the parser's depth limit)."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise invalid_payload(exc) from exc
