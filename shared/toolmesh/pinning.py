"""Tool-definition pinning (the "rug pull" defence), as plain functions every projection shares.

A tool's *definition hash* covers its description and its input schema (32 hex digits: the first
16 hash the description, the last 16 the schema, so a difference names the field that changed).
The first definition seen of a tool is approved by itself; a later tool list that changes it holds
the tool back — not listed, not callable — until an admin approves the new hash. A tool that
appears after a server's first tool list follows the server's ``new_tools`` policy: ``auto``
approves it, ``review`` holds it. An approval names the hash it approves, so an approval and a
tool list applied in either order end in the same state.

Pins belong to a server's *name* in its namespace: a removed server leaves its approved hashes
behind (``retired``), and a server registered again under that name reviews its first tool list
against them (``inherit``), so removing and re-registering a server approves nothing. Only owners
and admins choose ``new_tools: auto`` (``new_tools_policy``). A live tool list an upstream returns
is shown only where it matches the pins (``screen``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.errors import Forbidden
from toolmesh.storable import storable

_HALF = 16


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()[:_HALF]


def definition_hash(description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """The hash of one tool definition (description half, then input-schema half)."""
    return _digest(description or "") + _digest(dict(input_schema or {}))


def wire_definition_hash(tool: Mapping[str, Any]) -> str:
    """The hash of a tool as an upstream sends it in ``tools/list`` (``description``, ``inputSchema``),
    normalised as discovery stores it (NUL characters dropped)."""
    schema = tool.get("inputSchema")
    description = tool.get("description")
    return definition_hash(
        storable(description) if isinstance(description, str) else None,
        storable(dict(schema)) if isinstance(schema, Mapping) else None,
    )


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


def retired(pins: Iterable[tuple[str, Pin | None]]) -> dict[str, str | None]:
    """What a removed server's tools ``(name, pin)`` leave to its name: each tool's approved hash
    (None for a tool never approved, or pinned before pinning existed)."""
    return {name: pin.approved_hash if pin is not None else None for name, pin in pins}


def inherit(
    approved: Mapping[str, str | None], *, first_list: bool, left: Mapping[str, str | None] | None
) -> tuple[Mapping[str, str | None], bool]:
    """The approvals a tool list is reviewed against, and whether it counts as the first: a server's
    own, or, for the first list of a server whose name a removed server ``left`` pins to, those."""
    if first_list and left is not None:
        return left, False
    return approved, first_list


def new_tools_policy(requested: NewToolsPolicy | None, role: Role) -> NewToolsPolicy:
    """The ``new_tools`` policy of a registration by ``role``: owners and admins choose (``auto`` by
    default); every other role gets ``review`` and may not ask for ``auto`` (``Forbidden``)."""
    if role.manages:
        return requested or NewToolsPolicy.AUTO
    if requested is NewToolsPolicy.AUTO:
        raise Forbidden(
            f"Role '{role}' may not choose new_tools: auto (new tools unreviewed is an admin's decision)",
            {"role": str(role), "action": "choose new_tools: auto", "field": "new_tools"},
        )
    return NewToolsPolicy.REVIEW


@dataclass(frozen=True)
class Screened:
    """A live tool list against the pins: the ``(name, hash)`` pairs that may be shown, and the names
    whose live definition is not the one discovery recorded (unknown, or changed since)."""

    shown: frozenset[tuple[str, str]]
    unrecorded: frozenset[tuple[str, str]]


def screen(live: Iterable[tuple[str, str]], pins: Mapping[str, Pin | None]) -> Screened:
    """Which tools of a live list ``(name, definition hash)`` are pinned, approved definitions
    (shown), and which differ from the pins of the server's last discovered list ``pins``."""
    shown, unrecorded = set(), set()
    for name, current in live:
        pin = pins.get(name)
        if pin is None or pin.definition_hash != current:
            unrecorded.add((name, current))
        elif pin.hold is None and pin.approved_hash == current:
            shown.add((name, current))
    return Screened(frozenset(shown), frozenset(unrecorded))
