"""The gateway's in-memory view of servers and tools: routes calls and feeds the MCP front door.

It starts from a snapshot of the read model at a known stream sequence and then applies every later event, with the
projector's rules (a registration whose name is taken in its namespace is dropped, tools of an unknown server are
ignored, a tool list is a full snapshot, tool definitions are pinned by ``toolmesh.pinning``, and a removed server's
pins stay with its name for the next server registered under it; prompts likewise, and approvals of flagged resource
templates, in their ``ServerOffer``). Callers read it through a ``CatalogView`` of one namespace (or of every
namespace, for the owner), which is the ``RouteSource`` of routing and what the front door lists. ``version`` moves
when the *visible* tool set (tools of CONNECTED or DEGRADED servers that are not held back) changes, to announce
``notifications/tools/list_changed``; ``resources_version`` and ``prompts_version`` do the same for resources (and
templates) and prompts. Each server's ``ServerOffer`` (``offers``) holds its own description and lists for
``/mcp/{server}``. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from toolmesh.categories import ToolCategory
from toolmesh.contracts.events import (
    Event,
    InstructionsApproved,
    PromptsApproved,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerDescribed,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    TemplatesApproved,
    ToolsApproved,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.contracts.namespace_events import EndpointDeleted, EndpointSaved
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.lifecycle import SERVING, ServerStatus
from toolmesh.pinning import (
    ApprovedText,
    EveryLeft,
    Hold,
    Pin,
    approve,
    approve_instructions,
    definition_hash,
    inherit,
    pin_instructions,
    retired,
    review,
)
from toolmesh.poisoning.holds import flagged_instructions, flagged_tools
from toolmesh_gateway.bundles import Bundle
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.offers import ServerDescription, ServerOffer
from toolmesh_gateway.routing import ServerRoute


@dataclass(frozen=True, slots=True)
class CatalogServer(ServerRoute):
    """A registered server: what routing needs, plus its transport and its new-tools policy."""

    transport: str = "STDIO"
    new_tools: NewToolsPolicy = NewToolsPolicy.AUTO
    registered_seq: int = 0
    """The stream sequence of its registration: who came first, for the resource URI collision rule."""

    @property
    def visible(self) -> bool:
        """True when its tools are listed and callable (CONNECTED, or DEGRADED with a warning)."""
        return self.status in SERVING


@dataclass(frozen=True, slots=True)
class CatalogTool:
    """One upstream tool: its original name, description, input schema, pin and category, and the
    title, annotations and output schema the front door lists with it."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)
    pin: Pin | None = None
    category: ToolCategory = ToolCategory.GENERAL
    title: str | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    task_support: str | None = None  # "optional" or "required": may run as a task (``front_door.tasks``)
    skills: tuple[str, ...] = ()
    """The skill ids the classifier gave it (none until classified, none again once its description changes)."""

    @property
    def hold(self) -> Hold | None:
        """Why the tool is held back from clients, or None."""
        return self.pin.hold if self.pin is not None else None


class Catalog:
    """Servers by id and by (namespace, name), their last tool lists, and which servers have a tool."""

    def __init__(self) -> None:
        self._servers: dict[str, CatalogServer] = {}
        self._ids_by_name: dict[tuple[str, str], str] = {}
        self._tools: dict[str, dict[str, CatalogTool]] = {}  # a key exists once a tool list was seen
        self._servers_by_tool: dict[str, dict[str, None]] = {}  # original name -> server ids, in order
        self._held: dict[str, int] = {}  # server id -> how many of its tools are held back
        self._offers: dict[str, ServerOffer] = {}
        self._bundles: dict[tuple[str, str], Bundle] = {}  # (namespace, name) -> endpoint
        self._retired: dict[tuple[str, str], dict[str, str | None]] = {}  # (namespace, name) -> pins left
        self._retired_prompts: dict[tuple[str, str], dict[str, str | None]] = {}  # the same, of prompts
        self._retired_instructions: dict[tuple[str, str], ApprovedText] = {}  # approved instructions left
        self._template_approvals: dict[tuple[str, str], dict[str, str]] = {}  # flagged templates approved
        self.applied_seq = 0
        self.version = 0
        self.resources_version = 0
        self.prompts_version = 0

    def view(self, namespace: str | None) -> CatalogView:
        """What a caller of ``namespace`` sees (None: every namespace, for the owner)."""
        return CatalogView(self, namespace)

    def server(self, server_id: str) -> CatalogServer | None:
        """A server by id, in any namespace."""
        return self._servers.get(server_id)

    def tools_of(self, server_id: str) -> list[CatalogTool]:
        """The last discovered tools of a server (held ones included), by name."""
        return sorted(self._tools.get(server_id, {}).values(), key=lambda t: t.name)

    def tool(self, server_id: str, name: str) -> CatalogTool | None:
        """One tool of a server by its original name."""
        return self._tools.get(server_id, {}).get(name)

    def bundle(self, namespace: str, name: str) -> Bundle | None:
        """The endpoint (bundle) of that name in a namespace."""
        return self._bundles.get((namespace, name))

    def offer(self, server_id: str) -> ServerOffer:
        """A server's description, resources, templates and prompts (empty when unknown)."""
        return self._offers.get(server_id) or ServerOffer()

    # -- feeding ---------------------------------------------------------------------------------

    def load(
        self,
        servers: Iterable[CatalogServer],
        tools: Iterable[tuple[str, CatalogTool]],
        applied_seq: int,
        *,
        seen: Iterable[str] = (),
        offers: dict[str, ServerOffer] | None = None,
        bundles: Iterable[Bundle] = (),
        left: EveryLeft | None = None,
    ) -> None:
        """Replace everything with a snapshot: servers, ``(server_id, tool)`` pairs, the servers whose
        tool list was seen (even if empty), offers by server id, endpoints, the tool and prompt pins and
        the instructions removed servers left by (namespace, name), and the snapshot's sequence."""
        self._servers, self._ids_by_name, self._tools, self._servers_by_tool, self._held = {}, {}, {}, {}, {}
        for server in servers:
            self._servers[server.id] = server
            self._ids_by_name[(server.namespace, server.name)] = server.id
        by_server: dict[str, dict[str, CatalogTool]] = {s: {} for s in seen if s in self._servers}
        for server_id, tool in tools:
            if server_id in self._servers:
                by_server.setdefault(server_id, {})[tool.name] = tool
        for server_id, listed in by_server.items():
            self._set_tools(server_id, listed)
        self._offers = {k: v for k, v in (offers or {}).items() if k in self._servers}
        self._bundles = {(b.namespace, b.name): b for b in bundles}
        self._retired = dict(left.tools) if left else {}
        self._retired_prompts = dict(left.prompts) if left else {}
        self._retired_instructions = dict(left.instructions) if left else {}
        self._template_approvals = {k: dict(v) for k, v in left.templates.items()} if left else {}
        self.applied_seq = applied_seq
        self.version += 1
        self.resources_version += 1
        self.prompts_version += 1

    def apply(self, event: Event, seq: int) -> bool:
        """Apply the event at stream sequence ``seq``; True when the visible tool set changed.

        A sequence already applied changes nothing (False).
        """
        if seq <= self.applied_seq:
            return False
        self.applied_seq = seq
        changed = self._apply(event, seq)
        if changed:
            self.version += 1
        return changed

    def skip(self, seq: int) -> None:
        """Record a sequence that carried nothing for the catalog (an unknown or malformed event)."""
        self.applied_seq = max(self.applied_seq, seq)

    def _apply(self, event: Event, seq: int) -> bool:
        if isinstance(event, EndpointSaved | EndpointDeleted):
            return self._apply_bundle(event)
        current = self._servers.get(event.server_id) if event.server_id else None
        if isinstance(event, ServerRegistered):
            key = (event.namespace, event.name)
            if current is None and key not in self._ids_by_name:
                self._servers[event.server_id] = CatalogServer(
                    event.server_id,
                    event.name,
                    ServerStatus.DISCONNECTED,
                    event.namespace,
                    str(event.transport_type),
                    event.new_tools,
                    seq,
                )
                self._ids_by_name[key] = event.server_id
            return False
        if current is None:
            return False
        if isinstance(event, ServerStatusChanged):
            updated = replace(current, status=event.status)
            self._servers[current.id] = updated
            if current.visible != updated.visible:
                self._offer_changed(current.id)
            return current.visible != updated.visible and bool(self._tools.get(current.id))
        if isinstance(event, InstructionsApproved):
            described = self.offer(current.id).description
            approved = approve_instructions(described.instructions, described.approved, event.definition_hash)
            self._offers.setdefault(current.id, ServerOffer()).description = replace(described, approved=approved)
            return False
        if isinstance(
            event, ServerDescribed | ResourcesDiscovered | PromptsDiscovered | PromptsApproved | TemplatesApproved
        ):
            self._apply_offer(current, event)
            return False
        if isinstance(event, ServerRemoved):
            if current.visible:
                self._offer_changed(current.id)
            removed = self._offers.pop(current.id, None)
            if removed is not None and removed.prompt_pins is not None:
                self._retired_prompts[(current.namespace, current.name)] = retired(removed.prompt_pins.items())
            if removed is not None and removed.description.approved is not None:
                self._retired_instructions[(current.namespace, current.name)] = removed.description.approved
            del self._servers[current.id]
            if self._ids_by_name.get((current.namespace, current.name)) == current.id:
                del self._ids_by_name[(current.namespace, current.name)]
            had_tools = any(t.hold is None for t in self._tools.get(current.id, {}).values())
            if current.id in self._tools:
                left = retired((t.name, t.pin) for t in self._tools[current.id].values())
                self._retired[(current.namespace, current.name)] = left
            self._set_tools(current.id, {})
            self._tools.pop(current.id, None)
            return current.visible and had_tools
        if isinstance(event, ToolsDiscovered):
            return self._tools_discovered(current, event)
        if isinstance(event, ToolsApproved):
            return self._tools_approved(current, event)
        if isinstance(event, ToolsClassified):
            tools = self._tools.get(current.id, {})
            for given in event.tools:
                if (tool := tools.get(given.original_name)) is not None:
                    tools[tool.name] = replace(tool, skills=tuple(s.skill_id for s in given.skills))
        return False

    def _tools_discovered(self, server: CatalogServer, event: ToolsDiscovered) -> bool:
        previous = self._tools.get(server.id)
        approved, first_list = inherit(
            {t.name: (t.pin.approved_hash if t.pin else None) for t in (previous or {}).values()},
            first_list=previous is None,
            left=self._retired.get((server.namespace, server.name)),
        )
        hashes = {t.original_name: definition_hash(t) for t in event.tools}
        pins = review(
            hashes.items(), approved, first_list=first_list, policy=server.new_tools, flagged=flagged_tools(event.tools)
        )
        listed = {
            t.original_name: CatalogTool(
                t.original_name,
                t.description,
                dict(t.input_schema),
                pins[t.original_name],
                t.category,
                title=t.title,
                annotations=t.annotations,
                output_schema=t.output_schema,
                task_support=t.task_support,
                skills=_kept_skills(previous, t.original_name, t.description),
            )
            for t in event.tools
        }
        self._set_tools(server.id, listed)
        return server.visible and _shown(listed) != _shown(previous or {})

    def _tools_approved(self, server: CatalogServer, event: ToolsApproved) -> bool:
        tools = self._tools.get(server.id, {})
        before = _shown(tools)
        for approval in event.tools:
            tool = tools.get(approval.original_name)
            if tool is not None and tool.pin is not None:
                tools[tool.name] = replace(tool, pin=approve(tool.pin, approval.definition_hash))
        self._count_held(server.id)
        return server.visible and _shown(tools) != before

    def _apply_bundle(self, event: EndpointSaved | EndpointDeleted) -> bool:
        """An endpoint changed: every list of its clients may have changed (announced as list_changed)."""
        for key, known in list(self._bundles.items()):
            if known.id == event.endpoint_id:
                del self._bundles[key]
        if isinstance(event, EndpointSaved):
            key = (event.namespace, event.name)
            if key in self._bundles:
                return False  # the name is taken (the projector drops it too)
            self._bundles[key] = Bundle.of(
                event.endpoint_id,
                event.name,
                event.namespace,
                event.include,
                event.exclude,
                event.overrides,
                event.description,
            )
        self.resources_version += 1
        self.prompts_version += 1
        return True

    def _apply_offer(self, server: CatalogServer, event: Event) -> None:
        offer = self._offers.setdefault(server.id, ServerOffer())
        if isinstance(event, ServerDescribed):
            approved = offer.description.approved or self._retired_instructions.get((server.namespace, server.name))
            offer.description = ServerDescription(
                event.protocol_version,
                dict(event.capabilities),
                dict(event.server_info),
                event.instructions,
                pin_instructions(event.instructions, approved, bool(flagged_instructions(event.instructions))),
                tuple(event.modern_versions),
                {kind: frozenset(keys) for kind, keys in event.modern_only.items()},
                event.modern_tasks,
            )
        elif isinstance(event, ResourcesDiscovered | TemplatesApproved):
            approvals = self._template_approvals.setdefault((server.namespace, server.name), {})
            resources, templates = offer.resources, offer.listed_templates
            if isinstance(event, TemplatesApproved):
                approvals.update((t.original_name, t.definition_hash) for t in event.templates)
            else:
                resources = {r.uri: r.item for r in event.resources}
                templates = {t.uri_template: t.item for t in event.templates}
            if offer.load_resources(resources, templates, approvals) and server.visible:
                self.resources_version += 1
        elif isinstance(event, PromptsDiscovered | PromptsApproved):
            shown = offer.prompts
            if isinstance(event, PromptsApproved):
                offer.approve_prompts((p.original_name, p.definition_hash) for p in event.prompts)
            else:
                left = self._retired_prompts.get((server.namespace, server.name))
                offer.pin_prompts({p.original_name: p.item for p in event.prompts}, server.new_tools, left)
            if offer.prompts != shown and server.visible:
                self.prompts_version += 1

    def _offer_changed(self, server_id: str) -> None:
        """A server's resources and prompts appeared or vanished with its status."""
        offer = self._offers.get(server_id)
        if offer is None:
            return
        if offer.resources or offer.templates:
            self.resources_version += 1
        if offer.prompts:
            self.prompts_version += 1

    def _set_tools(self, server_id: str, listed: dict[str, CatalogTool]) -> None:
        """Replace a server's tool list (and the by-name index)."""
        previous = self._tools.get(server_id, {})
        for gone in previous.keys() - listed.keys():
            holders = self._servers_by_tool.get(gone)
            if holders is not None:
                holders.pop(server_id, None)
                if not holders:
                    del self._servers_by_tool[gone]
        for new in listed.keys() - previous.keys():
            self._servers_by_tool.setdefault(new, {})[server_id] = None
        self._tools[server_id] = listed
        self._count_held(server_id)

    def _count_held(self, server_id: str) -> None:
        held = sum(1 for tool in self._tools.get(server_id, {}).values() if tool.hold is not None)
        if held:
            self._held[server_id] = held
        else:
            self._held.pop(server_id, None)

    # -- for views ---------------------------------------------------------------------------------

    def servers_sorted(self) -> list[CatalogServer]:
        """Every server, by name."""
        return sorted(self._servers.values(), key=lambda s: (s.name, s.namespace))

    def id_named(self, namespace: str, name: str) -> str | None:
        """The id of the server registered under ``name`` in ``namespace``."""
        return self._ids_by_name.get((namespace, name))

    def holders(self, original_name: str) -> list[str]:
        """Ids of the servers whose tool list has ``original_name``."""
        return list(self._servers_by_tool.get(original_name, ()))

    def held_counts(self) -> dict[str, int]:
        """How many tools each server holds back, by server id."""
        return self._held


def _kept_skills(previous: dict[str, CatalogTool] | None, name: str, description: str | None) -> tuple[str, ...]:
    """A relisted tool's skills: kept while its description is the same (as the projector keeps them), else none."""
    tool = (previous or {}).get(name)
    return tool.skills if tool is not None and tool.description == description else ()


def _shown(tools: dict[str, CatalogTool]) -> dict[str, CatalogTool]:
    """The tools clients see: every tool that is not held back."""
    return {name: tool for name, tool in tools.items() if tool.hold is None}
