"""Tool-definition pinning (the "rug pull" defence), as plain functions every projection shares.

A tool's *definition hash* covers what a client is shown of it besides its name: one 16-hex-digit
part for each of ``PARTS`` (description, input schema, title, annotations, output schema, icons),
so a difference names the part that changed. ``_meta`` is not pinned: it is protocol metadata for
hosts, not the tool's contract with the model, upstreams put per-listing values there (trace ids,
timestamps), and the aggregate ``/mcp`` replaces it with its own. Hashes from before the last four
parts existed have two parts (32 digits, ``LEGACY_LENGTH``): a tool list upgrades such an approval once
(``upgraded_approval``), an admin's approval names no part it lacks (``approve``).
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

Prompts are pinned the same way, by the same functions: a prompt's hash has one part for each of
``PROMPT_PARTS`` (description, title, arguments with their names, titles, descriptions and
``required``, icons), pins and holds follow the server's first prompt list and its ``new_tools``
policy, and a removed server's prompt pins stay with its name. A server's ``instructions`` (from its initialize
result) are pinned as one text: the first seen approve themselves (unless the poisoning scanner flags them:
then none are served), a change keeps the approved text served (``pin_instructions``) until an admin
approves the new one. Resource templates are held only
when the poisoning scanner flags them, until an admin approves that exact definition
(``template_definition_hash``; approvals stay with the server's name).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types
from pydantic import BaseModel, ValidationError

from toolmesh.contracts.events import ApprovedTool, DiscoveredTool
from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.errors import Forbidden
from toolmesh.storable import storable

PART_LENGTH = 16
PARTS = ("description", "input_schema", "title", "annotations", "output_schema", "icons")
"""The parts of a definition hash, in order; ``changed_fields`` names them."""
LEGACY_LENGTH = 2 * PART_LENGTH
"""The length of a hash stored before pinning covered more than the description and input schema."""
PROMPT_PARTS = ("description", "title", "arguments", "icons")
"""The parts of a prompt's definition hash, in order."""
UNRECOGNISED = "unrecognised"
"""The hash of a live tool that is not a valid MCP tool: it equals no pin."""


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()[:PART_LENGTH]


def definition_hash(tool: DiscoveredTool) -> str:
    """The hash of one tool definition as discovery records it: one part per entry of ``PARTS``
    (an absent part hashes like an empty one)."""
    parts = (
        tool.description or "",
        dict(tool.input_schema or {}),
        tool.title or "",
        dict(tool.annotations or {}),
        dict(tool.output_schema or {}),
        list(tool.icons or []),
    )
    return "".join(_digest(part) for part in parts)


_UNSHOWN = definition_hash(DiscoveredTool(original_name="-"))[LEGACY_LENGTH:]
"""The parts after ``LEGACY_LENGTH`` of a tool with no title, annotations, output schema or icons."""


def _wire(item: BaseModel | None) -> Any:
    return storable(item.model_dump(by_alias=True, mode="json", exclude_none=True)) if item is not None else None


def recorded(tool: mcp_types.Tool) -> DiscoveredTool:
    """A tool of an upstream's ``tools/list`` as discovery records it (NUL characters dropped, see
    ``storable``; annotations and icons in their wire spelling, fields the protocol does not know left out)."""
    return DiscoveredTool(
        original_name=storable(tool.name),
        description=storable(tool.description),
        input_schema=storable(dict(tool.input_schema or {})),
        title=storable(tool.title),
        annotations=_wire(tool.annotations),
        output_schema=storable(dict(tool.output_schema)) if tool.output_schema is not None else None,
        icons=[_wire(icon) for icon in tool.icons] if tool.icons is not None else None,
        task_support=_task_support(tool),
    )


def _task_support(tool: mcp_types.Tool) -> Literal["optional", "required"] | None:
    support = tool.execution.task_support if tool.execution is not None else None
    return support if support in ("optional", "required") else None


def prompt_definition_hash(prompt: Mapping[str, Any]) -> str:
    """The hash of a prompt in its wire form (as ``prompts/list`` gives it and discovery records it):
    one part per entry of ``PROMPT_PARTS``; ``UNRECOGNISED`` for something that is not an MCP prompt."""
    try:
        parsed = mcp_types.Prompt.model_validate(storable(dict(prompt)))
    except ValidationError:
        return UNRECOGNISED
    arguments = [  # a title only when set: arguments without one hash as before titles were pinned
        {"name": a.name, "description": a.description or "", "required": bool(a.required)}
        | ({"title": a.title} if a.title else {})
        for a in parsed.arguments or []
    ]
    parts = (parsed.description or "", parsed.title or "", arguments, [_wire(i) for i in parsed.icons or []])
    return "".join(_digest(part) for part in parts)


def template_definition_hash(template: Mapping[str, Any]) -> str:
    """The hash of a resource template in its wire form (everything but ``_meta``): what an admin's
    approval of a template the poisoning scanner flags names."""
    return _digest({k: v for k, v in storable(dict(template)).items() if k != "_meta"})


def wire_definition_hash(tool: Mapping[str, Any]) -> str:
    """The hash of a tool as an upstream sends it in ``tools/list``, read as discovery reads it
    (``recorded``); ``UNRECOGNISED`` for something that is not an MCP tool."""
    try:
        return definition_hash(recorded(mcp_types.Tool.model_validate(dict(tool))))
    except ValidationError:
        return UNRECOGNISED


def changed_fields(approved: str, current: str, parts: tuple[str, ...] = PARTS) -> list[str]:
    """Which ``parts`` of the definition differ between two hashes (of an old-format ``approved``
    tool hash, only the description and input schema, the parts it pinned)."""
    return [
        part
        for i, part in enumerate(parts)
        if (i + 1) * PART_LENGTH <= len(approved)
        and approved[i * PART_LENGTH : (i + 1) * PART_LENGTH] != current[i * PART_LENGTH : (i + 1) * PART_LENGTH]
    ]


def upgraded_approval(approved: str, current: str) -> str:
    """``approved`` in the format of ``current``: an approved hash stored before pinning covered the
    title, annotations, output schema and icons (``LEGACY_LENGTH`` digits) takes those parts from
    ``current``, whether or not its description and input schema still match (the first tool list
    after the upgrade is trusted for the parts never pinned; what is stored from it is in today's
    format, so that happens once); any other hash is returned unchanged."""
    if len(approved) == LEGACY_LENGTH and len(current) > LEGACY_LENGTH:
        return approved + current[LEGACY_LENGTH:]
    return approved


def _named(approved_hash: str, current: str) -> str:
    """What an admin's ``approved_hash`` names, in the format of ``current``: a hash from before the
    upgrade names its description and input schema with no title, annotations, output schema or icons."""
    if len(approved_hash) == LEGACY_LENGTH and len(current) > LEGACY_LENGTH:
        return approved_hash + _UNSHOWN
    return approved_hash


@dataclass(frozen=True)
class Hold:
    """Why a tool is held back: ``changed`` (``fields`` differ from the approved hash), ``new``, or
    ``flagged`` (the poisoning scanner found something in a definition no admin approved; ``fields``
    are its findings, see ``toolmesh.poisoning``)."""

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
    parts: tuple[str, ...] = PARTS,
    flagged: Mapping[str, list[str]] | None = None,
) -> dict[str, Pin]:
    """Pins of a server's new tool (or prompt: ``PROMPT_PARTS``) list ``(name, definition hash)``
    against the approved hashes the server's tools had so far (a tool absent from ``approved`` is new).

    A definition with findings of the poisoning scanner (``flagged``: findings by name) is held
    (``flagged``) unless exactly it was approved: neither a first list nor ``new_tools: auto``
    approves it."""
    pins: dict[str, Pin] = {}
    for name, current in listed:
        findings = (flagged or {}).get(name)
        if name in approved and approved[name] is not None:
            pinned = approved[name]
            assert pinned is not None
            pinned = upgraded_approval(pinned, current)
            hold = None if pinned == current else Hold("changed", changed_fields(pinned, current, parts))
            pins[name] = Pin(current, pinned, Hold("flagged", findings) if hold and findings else hold)
        elif findings:
            pins[name] = Pin(current, None, Hold("flagged", findings))
        elif name in approved or (not first_list and policy is NewToolsPolicy.REVIEW):
            pins[name] = Pin(current, None, Hold("new"))  # known unapproved, or new under review
        else:
            pins[name] = Pin(current, current)
    return pins


def approve(pin: Pin, approved_hash: str, parts: tuple[str, ...] = PARTS) -> Pin:
    """The pin after an admin approved ``approved_hash`` (held only if the tool moved on since; an
    approval from before the upgrade approves no title, annotations, output schema or icons)."""
    approved_hash = _named(approved_hash, pin.definition_hash)
    if pin.definition_hash == approved_hash:
        return Pin(pin.definition_hash, approved_hash)
    return Pin(
        pin.definition_hash, approved_hash, Hold("changed", changed_fields(approved_hash, pin.definition_hash, parts))
    )


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


def held_approvals(listed: Mapping[str, Any], names: list[str] | None) -> list[ApprovedTool]:
    """Approvals of the current definitions of the held ones among ``names`` (every one when None) of a
    server's tools or prompts (by name, each with its ``definition_hash`` and ``held_reason``)."""
    wanted = names if names is not None else list(listed)
    return [
        ApprovedTool(original_name=name, definition_hash=listed[name]["definition_hash"])
        for name in sorted(set(wanted))
        if listed[name]["held_reason"] is not None
    ]


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
            unrecorded.add((name, current))  # a pin in the old format too: discovery records the new parts
        if pin is not None and _shows(pin, current):
            shown.add((name, current))
    return Screened(frozenset(shown), frozenset(unrecorded))


@dataclass(frozen=True)
class ApprovedText:
    """A server's approved instructions: their hash (``instructions_hash``) and the text itself."""

    hash: str
    text: str | None


@dataclass(frozen=True)
class EveryLeft:
    """What removed servers left to their names, by (namespace, server name): approved hashes of their
    tools and of their prompts by name (``retired``), and their approved instructions; and the approved
    hashes of flagged resource templates by URI template, which every server name keeps, removed or not."""

    tools: dict[tuple[str, str], dict[str, str | None]]
    prompts: dict[tuple[str, str], dict[str, str | None]]
    instructions: dict[tuple[str, str], ApprovedText]
    templates: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)


def instructions_hash(text: str | None) -> str:
    """The hash of a server's ``instructions`` (absent ones hash like empty ones)."""
    return _digest(text or "")


def pin_instructions(current: str | None, approved: ApprovedText | None, flagged: bool = False) -> ApprovedText:
    """The approved instructions once the upstream described itself with ``current``: the first seen
    (``approved`` None) approve themselves unless the poisoning scanner ``flagged`` them (then no
    instructions are approved), unchanged ones stay approved, a change keeps ``approved``."""
    digest = instructions_hash(current)
    if approved is not None and approved.hash == digest:
        return approved
    if approved is None:
        return ApprovedText(instructions_hash(None), None) if flagged else ApprovedText(digest, current)
    return approved


def approve_instructions(current: str | None, approved: ApprovedText | None, approved_hash: str) -> ApprovedText | None:
    """The approved instructions after an admin approved ``approved_hash`` (unchanged when the
    upstream's ``current`` instructions moved on since)."""
    return ApprovedText(approved_hash, current) if instructions_hash(current) == approved_hash else approved


def _shows(pin: Pin, current: str) -> bool:
    """True when ``pin`` is an approved, unheld pin of the definition ``current`` (in either format)."""
    if pin.hold is not None or pin.approved_hash is None:
        return False
    return upgraded_approval(pin.definition_hash, current) == current == upgraded_approval(pin.approved_hash, current)
