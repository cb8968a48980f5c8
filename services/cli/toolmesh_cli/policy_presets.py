"""Policies offered ready-made, none of them on until someone adds it (``toolmesh policies add --preset``).

Tool annotations are what the upstream says of its own tools (``readOnlyHint``, ``destructiveHint``);
a server that lies about them is not caught by these presets. By the MCP specification a tool without
annotations may be destructive: ``not-read-only-needs-approval`` is the stricter choice.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "destructive-needs-approval": {
        "expression": "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint == true",
        "effect": "require_approval",
        "reason": "This tool is annotated destructive: a human approves each call",
    },
    "not-read-only-needs-approval": {
        "expression": "!(has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint == true)",
        "effect": "require_approval",
        "reason": "This tool is not annotated read-only: a human approves each call",
    },
}
"""Each preset's ``expression``, ``effect`` and ``reason`` (a ``PolicyRequest`` without name and namespace)."""
