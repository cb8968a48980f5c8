"""``toolmesh up --config``: how a registration the API refused is told, one line per server."""

from __future__ import annotations

import pytest

from toolmesh.errors import LimitExceeded, ValidationFailed
from toolmesh_cli.provisioning import describe

pytestmark = pytest.mark.unit


def test_a_refused_registration_is_its_detail_and_code() -> None:
    assert describe(LimitExceeded("Too many servers in this namespace")) == (
        "Too many servers in this namespace (LIMIT_EXCEEDED)"
    )


def test_a_validation_failure_names_each_invalid_field() -> None:
    errors = [
        {"loc": ["body", "connection_config", "command"], "msg": "Field required"},
        {"loc": ["body", "name"], "msg": "String should have at most 100 characters"},
    ]
    told = describe(ValidationFailed("Request validation failed", {"errors": errors}))
    assert told == (
        "connection_config.command: Field required; name: String should have at most 100 characters (VALIDATION_ERROR)"
    )
    assert describe(ValidationFailed("Header X-A is not valid")) == "Header X-A is not valid (VALIDATION_ERROR)"
