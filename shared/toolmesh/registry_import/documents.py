"""The shapes a registry document comes in, unwrapped to ``server.json`` entries.

- a ``server.json`` itself: ``{"name": "io.github.user/weather", "packages": [...], ...}``
- one entry of the registry API: ``{"server": {...server.json...}, "_meta": {...}}``
- a page of the registry API: ``{"servers": [{"server": {...}, "_meta": {...}}, ...], "metadata": {...}}``
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.errors import RegistryEntryRefused


def is_registry_document(document: Any) -> bool:
    """True when ``document`` has one of the registry's shapes (and is no ``mcpServers`` config)."""
    if not isinstance(document, Mapping) or "mcpServers" in document:
        return False
    return isinstance(document.get("servers"), list) or "server" in document or "name" in document


def registry_entries(document: Any) -> list[Mapping[str, Any]]:
    """Every ``server.json`` of a document, in order; refused when it has none of the shapes."""
    if not is_registry_document(document):
        raise RegistryEntryRefused(
            'expected a registry server.json (with "name"), {"server": {...}} or {"servers": [...]}'
        )
    if isinstance(document.get("servers"), list):
        return [_unwrapped(item, f"servers[{i}]") for i, item in enumerate(document["servers"], 1)]
    if "server" in document:
        return [_unwrapped(document, "the document")]
    return [document]


def _unwrapped(item: Any, where: str) -> Mapping[str, Any]:
    inner = item.get("server") if isinstance(item, Mapping) else None
    if not isinstance(inner, Mapping):
        raise RegistryEntryRefused(f'{where} must be an object with a "server" object')
    return inner


def single_entry(document: Any) -> Mapping[str, Any]:
    """The one ``server.json`` of a document; refused when it holds none or several."""
    entries = registry_entries(document)
    if len(entries) != 1:
        raise RegistryEntryRefused(f"the document holds {len(entries)} servers; import one at a time")
    return entries[0]
