"""Text Postgres can store: ``text`` and ``jsonb`` refuse the NUL character, and one event
carrying it would stop the projection. Requests with NUL are refused (422); what upstream servers
send (tool lists, stderr) has it removed before it becomes an event."""

from __future__ import annotations

from typing import Any

NUL = "\x00"


def has_nul(value: Any) -> bool:
    """True when a string, or any string or key inside a JSON-like value, contains NUL."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    return False


def storable(value: Any) -> Any:
    """``value`` with NUL removed from every string and key inside it."""
    if isinstance(value, str):
        return value.replace(NUL, "")
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    return value
