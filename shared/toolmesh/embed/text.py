"""What of a tool gets embedded and indexed.

``tool_text`` is the whole tool as one text (server, readable name, description, parameter names);
BM25F scores those fields separately (``search.lexical``). The dense model embeds ``dense_text``
(readable name and description only): server names and parameter lists are noise to a sentence
embedding, and the classifier embeds the same text, so a process embeds each tool once. On
LiveMCPBench (bench/search_quality.py, the ``flat`` mix), embedding ``tool_text`` gives an MRR@10 of
.538, ``dense_text`` .576; adding only the server name or only the parameter names did no better
(docs/search-quality.md).
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


def tool_text(
    server_name: str, original_name: str, description: str | None, input_schema: Mapping[str, Any] | None
) -> str:
    """The text a tool is BM25-indexed (and classified) by: its namespaced name, description, parameters."""
    params = " ".join(readable(p) for p in parameter_names(input_schema))
    parts = [f"{server_name} {readable(original_name)}", (description or "").strip().rstrip(".")]
    if params:
        parts.append(f"parameters: {params}")
    return ". ".join(p for p in parts if p)


def dense_text(original_name: str, description: str | None) -> str:
    """The text a tool is embedded by for dense search: ``"create issue: Open an issue."``."""
    name = readable(original_name)
    description = (description or "").strip()
    return f"{name}: {description}" if description else name
