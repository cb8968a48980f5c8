"""What of a tool gets embedded and indexed.

``tool_text`` is the whole tool as one text (server, readable name, description, parameter names);
BM25F scores those fields separately (``search.lexical``). The dense model embeds ``dense_text``:
the readable name, the description and the parameters' own descriptions ("Check-in date"). Server
names and bare parameter names are noise to a sentence embedding. The classifier embeds the same
text, so a process embeds each tool once. On LiveMCPBench (bench/search_quality.py, default
strategy) the name and description alone give an MRR@10 of .576, with the parameters' descriptions
(here and in BM25F's description field) .609; the whole ``tool_text`` .538 (docs/search-quality.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SPLIT = re.compile(r"[_\-.]+|(?<=[a-z0-9])(?=[A-Z])")


def readable(identifier: str) -> str:
    """``create_issue`` / ``createIssue`` / ``create-issue`` -> ``create issue``."""
    return " ".join(part for part in _SPLIT.split(identifier) if part).lower()


def parameter_names(input_schema: Mapping[str, Any] | None) -> list[str]:
    """Top-level property names of a JSON schema, in order."""
    properties = (input_schema or {}).get("properties")
    return [str(name) for name in properties] if isinstance(properties, Mapping) else []


def parameter_descriptions(input_schema: Mapping[str, Any] | None) -> list[str]:
    """The descriptions of a JSON schema's top-level properties that have one, without a final full stop."""
    properties = (input_schema or {}).get("properties")
    if not isinstance(properties, Mapping):
        return []
    found = (spec.get("description") for spec in properties.values() if isinstance(spec, Mapping))
    return [text for d in found if isinstance(d, str) and (text := d.strip().rstrip(".").strip())]


def tool_text(
    server_name: str, original_name: str, description: str | None, input_schema: Mapping[str, Any] | None
) -> str:
    """The text a tool is BM25-indexed (and classified) by: its namespaced name, description, parameters."""
    params = " ".join(readable(p) for p in parameter_names(input_schema))
    parts = [f"{server_name} {readable(original_name)}", (description or "").strip().rstrip(".")]
    if params:
        parts.append(f"parameters: {params}")
    return ". ".join(p for p in parts if p)


def dense_text(original_name: str, description: str | None, input_schema: Mapping[str, Any] | None = None) -> str:
    """The text a tool is embedded by: ``"book room: Book a room. Parameters: Check-in date; Guests"``."""
    name = readable(original_name)
    description = (description or "").strip()
    text = f"{name}: {description}" if description else name
    parameters = parameter_descriptions(input_schema)
    if not parameters:
        return text
    joint = " " if text.endswith((".", "!", "?")) else ". "
    return f"{text}{joint}Parameters: {'; '.join(parameters)}"
