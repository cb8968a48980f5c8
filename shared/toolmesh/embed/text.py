"""What of a tool gets embedded and indexed: its name, description and parameter names."""

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


def tool_text(
    server_name: str, original_name: str, description: str | None, input_schema: Mapping[str, Any] | None
) -> str:
    """The one text a tool is embedded and BM25-indexed by: its namespaced name, description, parameters."""
    params = " ".join(readable(p) for p in parameter_names(input_schema))
    parts = [f"{server_name} {readable(original_name)}", (description or "").strip().rstrip(".")]
    if params:
        parts.append(f"parameters: {params}")
    return ". ".join(p for p in parts if p)
