"""What each upstream offers besides tools: its own description, resources, templates and prompts.

Items are kept in the upstream's wire form (``item``), so ``/mcp/{server}`` serves them unchanged.
The resource index answers "which server serves this URI" for the aggregate ``/mcp``, with the
collision rule of docs/usage.md: an exact URI beats a template, and among several servers the one
registered first wins (first come, first served: a server registered later, whatever its name,
never takes a URI over). Prompts are pinned like tools (``toolmesh.pinning``): ``prompts`` holds
only the approved ones, ``prompt_pins`` every listed prompt's pin. A resource template the poisoning
scanner flags is held until an admin approves that definition (``held_templates``). No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.pinning import PROMPT_PARTS, ApprovedText, Hold, Pin, approve, inherit, prompt_definition_hash, review
from toolmesh.poisoning.holds import flagged_prompts, held_templates
from toolmesh_gateway.front_door.uri_templates import template_matches

S = TypeVar("S")
MODERN_ERA_LISTS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
_TARGETS = {"tools/call": ("tools", "name"), "prompts/get": ("prompts", "name"), "resources/read": ("resources", "uri")}


@dataclass(frozen=True)
class ServerDescription:
    """An upstream's initialize result: protocol version, capabilities, server info, instructions, and
    the instructions approved for it (``toolmesh.pinning.pin_instructions``); the 2026-07-28-era
    versions it speaks besides (``modern_versions``) and what it lists in that era only
    (``modern_only``: tool and prompt names, resource URIs and URI templates, by list), and whether it
    runs tasks of its own (``modern_tasks``)."""

    protocol_version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None
    approved: ApprovedText | None = None
    modern_versions: tuple[str, ...] = ()
    modern_only: Mapping[str, frozenset[str]] = field(default_factory=dict)
    modern_tasks: bool = False
    """Whether it runs tasks of its own in that era (it declared the Tasks extension in ``server/discover``)."""

    def reached_in_modern_era(self, method: str, params: Mapping[str, Any]) -> bool:
        """Whether a 2026-07-28 client's request goes to the upstream in that era: its lists (so that
        what only that era offers shows), and a call, prompt or read of what only that era lists. The
        rest goes through the handshake session, where the upstream's requests to the client (sampling,
        elicitation, roots) work for such a client too (``front_door.input_required``). An upstream
        that speaks that era only (its protocol version is one of it) gets every request in it."""
        if not self.modern_versions:
            return False
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return True
        if method in MODERN_ERA_LISTS:
            return True
        kind, key = _TARGETS.get(method, (None, ""))
        return kind is not None and str(params.get(key)) in self.modern_only.get(kind, frozenset())

    @property
    def served_instructions(self) -> str | None:
        """The instructions clients are shown: the approved ones (the upstream's before pinning knew them)."""
        return self.approved.text if self.approved is not None else self.instructions


@dataclass
class ServerOffer:
    """One server's description and lists (wire items, by key)."""

    description: ServerDescription = field(default_factory=ServerDescription)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # uri -> item
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # uri template -> item, served ones
    held_templates: dict[str, list[str]] = field(default_factory=dict)  # uri template -> the scanner's findings
    listed_templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # uri template -> item, held too
    template_approvals: Mapping[str, str] = field(default_factory=dict)  # uri template -> approved hash
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)  # original name -> item, approved ones
    prompt_pins: dict[str, Pin] | None = None  # original name -> pin of every listed prompt; None: never listed
    listed_prompts: dict[str, dict[str, Any]] = field(default_factory=dict)  # original name -> item, held too

    def load_templates(self, templates: dict[str, dict[str, Any]], approved: Mapping[str, str] | None = None) -> None:
        """A server's resource templates: those the poisoning scanner flags are held (``held_templates``),
        neither listed nor used to route a read, unless an admin approved exactly that definition
        (``approved``: hash by URI template); the others are served (``templates``)."""
        self.listed_templates, self.template_approvals = templates, approved or {}
        self.held_templates = held_templates(templates, approved)
        self.templates = {key: item for key, item in templates.items() if key not in self.held_templates}

    def load_resources(
        self, resources: dict[str, dict[str, Any]], templates: dict[str, dict[str, Any]], approved: Mapping[str, str]
    ) -> bool:
        """A server's resources and templates (``load_templates``); True when what is served changed."""
        before = (self.resources, self.templates)
        self.resources = resources
        self.load_templates(templates, approved)
        return (self.resources, self.templates) != before

    def held_template(self, uri: str) -> tuple[str, list[str]] | None:
        """The held template (with its findings) a read of ``uri`` would reach: one matching ``uri``
        when no listed resource and no served template of the server does, else None."""
        if uri in self.resources or any(template_matches(t, uri) for t in self.templates):
            return None
        return next(((t, found) for t, found in self.held_templates.items() if template_matches(t, uri)), None)

    def prompt_hold(self, name: str) -> Hold | None:
        """Why the listed prompt ``name`` is held back, or None."""
        pin = (self.prompt_pins or {}).get(name)
        return pin.hold if pin is not None else None

    def pin_prompts(
        self, listed: dict[str, dict[str, Any]], policy: NewToolsPolicy, left: dict[str, str | None] | None
    ) -> None:
        """A new prompt list, pinned against the server's approved prompts (or, for its first list,
        against what a removed server of its name ``left``)."""
        previous = self.prompt_pins
        approved, first_list = inherit(
            {n: p.approved_hash for n, p in (previous or {}).items()}, first_list=previous is None, left=left
        )
        hashes = {name: prompt_definition_hash(item) for name, item in listed.items()}
        self.load_prompts(
            listed,
            review(
                hashes.items(),
                approved,
                first_list=first_list,
                policy=policy,
                parts=PROMPT_PARTS,
                flagged=flagged_prompts(listed),
            ),
        )

    def approve_prompts(self, approved: Iterable[tuple[str, str]]) -> None:
        """An admin approved ``(name, definition hash)`` pairs of held prompts."""
        pins = dict(self.prompt_pins or {})
        for name, approved_hash in approved:
            if name in pins:
                pins[name] = approve(pins[name], approved_hash, PROMPT_PARTS)
        self.load_prompts(self.listed_prompts, pins)

    def load_prompts(self, listed: dict[str, dict[str, Any]], pins: dict[str, Pin]) -> None:
        """Every listed prompt with its pin; the approved ones are shown (``prompts``)."""
        self.listed_prompts, self.prompt_pins = listed, pins
        self.prompts = {n: item for n, item in listed.items() if n in pins and pins[n].hold is None}


def unflagged_templates(listed: dict[str, Any], approved: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An upstream's own ``resources/templates/list`` result without the held templates: those the
    poisoning scanner flags and no admin approved (``approved``: hash by URI template)."""
    templates = [t for t in listed.get("resourceTemplates") or () if isinstance(t, dict)]
    held = held_templates({str(t.get("uriTemplate")): t for t in templates}, approved)
    return {**listed, "resourceTemplates": [t for t in templates if str(t.get("uriTemplate")) not in held]}


def serving_server(uri: str, offers: Iterable[tuple[S, ServerOffer]]) -> S | None:
    """The server that serves ``uri``: an exact listing first, then a template; ties go to the server
    that comes first in ``offers`` (``(server, offer)`` pairs, first registered first)."""
    ordered = list(offers)
    for server, offer in ordered:
        if uri in offer.resources:
            return server
    for server, offer in ordered:
        if any(template_matches(t, uri) for t in offer.templates):
            return server
    return None


def template_owner(template: str, offers: Iterable[tuple[S, ServerOffer]]) -> S | None:
    """The first server in ``offers`` (first registered first) listing the resource template ``template``."""
    for server, offer in offers:
        if template in offer.templates:
            return server
    return None
