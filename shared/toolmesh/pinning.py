"""Tool-definition pinning (the "rug pull" defence), as plain functions every projection shares.

A tool's *definition hash* covers its description and its input schema (32 hex digits: the first
16 hash the description, the last 16 the schema, so a difference names the field that changed).
The first definition seen of a tool is approved by itself; a later tool list that changes it holds
the tool back — not listed, not callable — until an admin approves the new hash. A tool that
appears after a server's first tool list follows the server's ``new_tools`` policy: ``auto``
approves it, ``review`` holds it. An approval names the hash it approves, so an approval and a
tool list applied in either order end in the same state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.contracts.servers import NewToolsPolicy

_HALF = 16


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()[:_HALF]


def definition_hash(description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """The hash of one tool definition (description half, then input-schema half)."""
    return _digest(description or "") + _digest(dict(input_schema or {}))


def changed_fields(approved: str, current: str) -> list[str]:
    """Which parts of the definition differ between two hashes."""
    fields = []
    if approved[:_HALF] != current[:_HALF]:
        fields.append("description")
    if approved[_HALF:] != current[_HALF:]:
        fields.append("input_schema")
    return fields


@dataclass(frozen=True)
class Hold:
    """Why a tool is held back: ``changed`` (``fields`` differ from the approved hash) or ``new``."""

    reason: str
    fields: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Pin:
    """A tool's current definition hash, the hash approved for it, and the hold when they differ."""

    definition_hash: str
    approved_hash: str | None
    hold: Hold | None = None


def approvals(stored: Iterable[tuple[str, str | None, str | None]], listed: Mapping[str, str]) -> dict[str, str | None]:
    """Approved hashes by tool from stored ``(name, definition_hash, approved_hash)`` rows; a row from
    before pinning existed (no definition hash) approves the definition listed now."""
    return {name: approved if current else listed.get(name) for name, current, approved in stored}


def review(
    listed: Iterable[tuple[str, str]],
    approved: Mapping[str, str | None],
    *,
    first_list: bool,
    policy: NewToolsPolicy,
) -> dict[str, Pin]:
    """Pins of a server's new tool list ``(name, definition hash)`` against the approved hashes
    the server's tools had so far (a tool absent from ``approved`` is new)."""
    pins: dict[str, Pin] = {}
    for name, current in listed:
        if name in approved and approved[name] is not None:
            pinned = approved[name]
            assert pinned is not None
            hold = None if pinned == current else Hold("changed", changed_fields(pinned, current))
            pins[name] = Pin(current, pinned, hold)
        elif name in approved or (not first_list and policy is NewToolsPolicy.REVIEW):
            pins[name] = Pin(current, None, Hold("new"))  # known unapproved, or new under review
        else:
            pins[name] = Pin(current, current)
    return pins


def approve(pin: Pin, approved_hash: str) -> Pin:
    """The pin after an admin approved ``approved_hash`` (held only if the tool moved on since)."""
    if pin.definition_hash == approved_hash:
        return Pin(pin.definition_hash, approved_hash)
    return Pin(pin.definition_hash, approved_hash, Hold("changed", changed_fields(approved_hash, pin.definition_hash)))
