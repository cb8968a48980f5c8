"""The scanner's findings as pinning reads them: one summary line per finding, by name, for a
server's whole tool list, prompt list, template or resource list (its siblings are the other names of
that list), and for its instructions.

Every role that pins (session-worker, projector, each gateway) scans each list it applies; a
definition listed again unchanged (a refresh, a reconnect) is answered from a bounded cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from toolmesh.contracts.events import DiscoveredTool
from toolmesh.pinning import template_definition_hash
from toolmesh.poisoning.scan import scan_instructions, scan_prompt, scan_resource, scan_template, scan_tool

CACHED = 20_000
"""Scanned tool definitions remembered (with their server's tool names)."""


def wire_tool(tool: DiscoveredTool) -> dict[str, Any]:
    """A discovered tool in the wire form the scanner reads."""
    return {
        "name": tool.original_name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }


def flagged_tools(tools: Iterable[DiscoveredTool]) -> dict[str, list[str]]:
    """Findings (summary lines) by tool name, for the tools of one list that have any."""
    listed = list(tools)
    names = frozenset(t.original_name for t in listed)
    found = {t.original_name: _tool_lines(json.dumps(wire_tool(t), sort_keys=True, default=str), names) for t in listed}
    return {name: list(lines) for name, lines in found.items() if lines}


@lru_cache(maxsize=CACHED)
def _tool_lines(definition: str, siblings: frozenset[str]) -> tuple[str, ...]:
    return tuple(f.summary() for f in scan_tool(json.loads(definition), siblings))


def flagged_prompts(prompts: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Findings by prompt name, for the prompts (wire items by name) of one list that have any."""
    found = {name: [f.summary() for f in scan_prompt(item, list(prompts))] for name, item in prompts.items()}
    return {name: lines for name, lines in found.items() if lines}


def flagged_templates(templates: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Findings by URI template, for the resource templates (wire items by URI template) that have any."""
    names = [str(item.get("name", "")) for item in templates.values()]
    found = {key: [f.summary() for f in scan_template(item, names)] for key, item in templates.items()}
    return {key: lines for key, lines in found.items() if lines}


def held_templates(
    templates: Mapping[str, Mapping[str, Any]], approved: Mapping[str, str] | None = None
) -> dict[str, list[str]]:
    """Findings by URI template, for the flagged templates that stay held: all but those whose exact
    definition an admin approved (``approved``: approved hash by URI template)."""
    approved = approved or {}
    return {
        key: lines
        for key, lines in flagged_templates(templates).items()
        if approved.get(key) != template_definition_hash(templates[key])
    }


@lru_cache(maxsize=1_000)
def flagged_instructions(text: str | None) -> tuple[str, ...]:
    """Findings in a server's instructions (none when clean or absent); every role that pins them asks."""
    return tuple(f.summary() for f in scan_instructions(text))


def flagged_resources(resources: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Findings by URI, for the fixed resources (wire items by URI) of one list that have any."""
    names = [str(item.get("name", "")) for item in resources.values()]
    found = {uri: [f.summary() for f in scan_resource(item, names)] for uri, item in resources.items()}
    return {uri: lines for uri, lines in found.items() if lines}
