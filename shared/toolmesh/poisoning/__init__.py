"""Poisoning scans of discovered tools, prompts, resources and resource templates, of servers'
instructions and of tool results (see docs/poisoning.md).

``scan_tool``, ``scan_prompt``, ``scan_template`` and ``scan_resource`` read a definition in its wire form,
``scan_instructions`` a server's instructions and ``scan_result`` a tool result; each returns
``Finding``s: hidden instructions aimed at the model, invisible or confusable Unicode, shadowing of
other servers' tools, and exfiltration-shaped parameters. Pure functions, no I/O.
"""

from toolmesh.poisoning.finding import Finding, FindingKind
from toolmesh.poisoning.scan import (
    scan_instructions,
    scan_prompt,
    scan_resource,
    scan_result,
    scan_template,
    scan_tool,
)

__all__ = [
    "Finding",
    "FindingKind",
    "scan_instructions",
    "scan_prompt",
    "scan_resource",
    "scan_result",
    "scan_template",
    "scan_tool",
]
