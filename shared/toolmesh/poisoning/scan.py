"""Scanning one tool, prompt or resource template: every piece of its text through every detector."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from toolmesh.poisoning.exfiltration import description_findings, parameter_text_findings, suspicious_name
from toolmesh.poisoning.fields import (
    SCANNED_CHARS,
    Piece,
    parameter_names,
    prompt_pieces,
    resource_pieces,
    result_pieces,
    template_pieces,
    tool_pieces,
)
from toolmesh.poisoning.finding import Finding, FindingKind, excerpt
from toolmesh.poisoning.instructions import instruction_findings
from toolmesh.poisoning.shadowing import shadowing_findings
from toolmesh.poisoning.unicode_text import normalised, unicode_findings

_PARAMETER_LEVEL = ("inputSchema.", "arguments[", "uriTemplate")
Detector = Callable[[Piece, Collection[str], Collection[str]], Iterator[Finding]]
"""Findings in one piece of text, given its item's siblings and parameter names."""


def _piece_findings(piece: Piece, siblings: Collection[str], parameters: Collection[str]) -> Iterator[Finding]:
    yield from unicode_findings(piece.text, piece.field)
    if piece.is_name:
        why = suspicious_name(piece.text) if piece.field != "name" else None
        if why:
            yield Finding(FindingKind.EXFILTRATION, piece.field, excerpt(piece.text), why)
        return
    plain = normalised(piece.text)
    yield from instruction_findings(plain, piece.text, piece.field)
    yield from shadowing_findings(plain, piece.field, siblings, parameters)
    if piece.field.startswith(_PARAMETER_LEVEL):
        yield from parameter_text_findings(plain, piece.field)
    else:
        yield from description_findings(plain, piece.field)


def _prose_findings(piece: Piece, siblings: Collection[str], parameters: Collection[str]) -> Iterator[Finding]:
    """Text written to the model with no list of tools beside it (instructions, results): everything
    but shadowing, which needs to know the server's tools."""
    yield from unicode_findings(piece.text, piece.field)
    plain = normalised(piece.text)
    yield from instruction_findings(plain, piece.text, piece.field)
    yield from description_findings(plain, piece.field)


def _scan(
    pieces: Iterable[Piece], siblings: Collection[str], parameters: Collection[str], detect: Detector = _piece_findings
) -> list[Finding]:
    seen: dict[tuple[str, str, str], Finding] = {}
    for piece in pieces:
        for finding in detect(piece, siblings, parameters):
            seen.setdefault((finding.kind, finding.field, finding.reason), finding)
    return list(seen.values())


def scan_tool(tool: Mapping[str, Any], siblings: Collection[str] = ()) -> list[Finding]:
    """Findings in a tool in its wire form (``name``, ``title``, ``description``, ``inputSchema``, ...);
    ``siblings``: the names of the other tools of its server."""
    return _scan(tool_pieces(tool), {*siblings, str(tool.get("name", ""))}, parameter_names(tool))


def scan_prompt(prompt: Mapping[str, Any], siblings: Collection[str] = ()) -> list[Finding]:
    """Findings in a prompt in its wire form; ``siblings``: the names of its server's tools and prompts."""
    return _scan(prompt_pieces(prompt), {*siblings, str(prompt.get("name", ""))}, parameter_names(prompt))


def scan_template(template: Mapping[str, Any], siblings: Collection[str] = ()) -> list[Finding]:
    """Findings in a resource template in its wire form; ``siblings``: its server's tool names."""
    return _scan(template_pieces(template), {*siblings, str(template.get("name", ""))}, ())


def scan_resource(resource: Mapping[str, Any], siblings: Collection[str] = ()) -> list[Finding]:
    """Findings in a fixed resource of ``resources/list`` in its wire form; ``siblings``: its server's
    tool names."""
    return _scan(resource_pieces(resource), {*siblings, str(resource.get("name", ""))}, ())


def scan_instructions(text: str | None) -> list[Finding]:
    """Findings in a server's ``instructions`` (initialize, ``server/discover``): their first
    ``SCANNED_CHARS`` characters; longer ones are a finding themselves (the rest could hide anything)."""
    if not text:
        return []
    found = _scan([Piece("instructions", text[:SCANNED_CHARS])], (), (), _prose_findings)
    if len(text) > SCANNED_CHARS:
        why = f"too long to scan ({len(text)} characters; the first {SCANNED_CHARS} are read)"
        found.append(Finding(FindingKind.HIDDEN_INSTRUCTION, "instructions", excerpt(text, SCANNED_CHARS), why))
    return found


def scan_result(result: Mapping[str, Any]) -> list[Finding]:
    """Findings in a tool result in its wire form (its text, up to ``SCANNED_CHARS``)."""
    return _scan(result_pieces(result), (), (), _prose_findings)
