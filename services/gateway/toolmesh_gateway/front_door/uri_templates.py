"""Resource URI templates (RFC 6570) as the MCP SDK reads them, for the collision rule of
``toolmesh_gateway.offers`` (the REST API and ``/mcp`` resolve a resource URI the same way)."""

from __future__ import annotations

from mcp.shared.uri_template import UriTemplate


def template_matches(template: str, uri: str) -> bool:
    """True when ``uri`` is an expansion of the RFC 6570 ``template`` (False for a template that does not parse)."""
    try:
        return UriTemplate.parse(template).match(uri) is not None
    except ValueError:
        return False
