"""Validators of the published MCP JSON Schemas bundled in ``tests/data/mcp_schemas`` (provenance in
its ``SOURCE.json``): the Server Card and the MCP Registry's ``server.json``."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parent / "data" / "mcp_schemas"


def card_validator() -> Draft202012Validator:
    """The Server Card schema's ``ServerCard`` definition (the published file has only ``$defs``)."""
    schema = json.loads((SCHEMAS / "server-card.schema.json").read_text())
    registry: Registry = Registry().with_resource("urn:server-card", Resource.from_contents(schema))
    return Draft202012Validator(
        {"$ref": "urn:server-card#/$defs/ServerCard"}, registry=registry, format_checker=FormatChecker()
    )


def server_json_validator() -> Draft7Validator:
    """The MCP Registry ``server.json`` schema of 2025-12-11."""
    schema = json.loads((SCHEMAS / "server.schema.json").read_text())
    return Draft7Validator(schema, format_checker=FormatChecker())
