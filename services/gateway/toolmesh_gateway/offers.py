"""What each upstream offers besides tools: its own description, resources, templates and prompts.

Items are kept in the upstream's wire form (``item``), so ``/mcp/{server}`` serves them unchanged.
The resource index answers "which server serves this URI" for the aggregate ``/mcp``, with the
collision rule of the README: an exact URI beats a template, and among several servers the one
registered first wins (first come, first served: a server registered later, whatever its name,
never takes a URI over). No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp.shared.uri_template import UriTemplate

S = TypeVar("S")


@dataclass(frozen=True)
class ServerDescription:
    """An upstream's initialize result: protocol version, capabilities, server info, instructions."""

    protocol_version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None


@dataclass
class ServerOffer:
    """One server's description and lists (wire items, by key)."""

    description: ServerDescription = field(default_factory=ServerDescription)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # uri -> item
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # uri template -> item
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)  # original name -> item


def template_matches(template: str, uri: str) -> bool:
    """True when ``uri`` is an expansion of the RFC 6570 ``template``."""
    try:
        return UriTemplate.parse(template).match(uri) is not None
    except ValueError:
        return False


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
