"""Poisoning scans of discovered tools, prompts and resource templates (see docs/poisoning.md).

``scan_tool``, ``scan_prompt`` and ``scan_template`` read a definition in its wire form and return
``Finding``s: hidden instructions aimed at the model, invisible or confusable Unicode, shadowing of
other servers' tools, and exfiltration-shaped parameters. Pure functions, no I/O.
"""

from toolmesh.poisoning.finding import Finding, FindingKind
from toolmesh.poisoning.scan import scan_prompt, scan_template, scan_tool

__all__ = ["Finding", "FindingKind", "scan_prompt", "scan_template", "scan_tool"]
