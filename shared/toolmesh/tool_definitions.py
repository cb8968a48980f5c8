"""Which upstream tool definitions toolmesh accepts: a name by the MCP tool-name rule (2025-11-25:
1-128 characters of ``A-Za-z0-9_-.``) and a description, input schema and the rest a client is shown
(title, annotations, output schema, icons) within bounds.

Discovery leaves out every other definition before publishing, and the ``tools.discovered`` contract
drops any that still reach it (events written before the rule), so the projection and the gateway's
catalog read the same list and no name can break either (CR/LF, look-alike letters, ``..``/``/``,
bidi controls, a name past a column's length).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

TOOL_NAME_MAX = 128
TOOL_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{TOOL_NAME_MAX}}}")
DESCRIPTION_CEILING = 65_536
"""The most characters of a description any setting may allow (the contract's bound)."""
SCHEMA_CEILING = 1_048_576
"""The most bytes of an input schema (as compact JSON) any setting may allow (the contract's bound)."""


PRESENTATION = ("title", "annotations", "output_schema", "icons")
"""What a client is shown of a tool besides its name, description and input schema (bounded together)."""


def refusal(
    name: object,
    description: object,
    input_schema: Mapping[str, Any] | None,
    *,
    presentation: Mapping[str, Any] | None = None,
    max_description: int = DESCRIPTION_CEILING,
    max_schema: int = SCHEMA_CEILING,
) -> str | None:
    """Why a tool definition is left out, or None when it is accepted; ``presentation`` (the
    ``PRESENTATION`` fields) is bounded like an input schema."""
    if not isinstance(name, str) or TOOL_NAME.fullmatch(name) is None:
        return f"its name is not 1-{TOOL_NAME_MAX} characters of A-Za-z0-9_-."
    if isinstance(description, str) and len(description) > max_description:
        return f"its description has {len(description)} characters (at most {max_description})"
    size = schema_size(input_schema)
    if size > max_schema:
        return f"its input schema has {size} bytes (at most {max_schema})"
    size = schema_size({k: v for k, v in (presentation or {}).items() if v is not None})
    if size > max_schema:
        return f"its title, annotations, output schema and icons have {size} bytes (at most {max_schema})"
    return None


def schema_size(input_schema: Mapping[str, Any] | None) -> int:
    """The size in bytes of ``input_schema`` as compact JSON (0 for none)."""
    if not input_schema:
        return 0
    return len(json.dumps(input_schema, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def shown_name(name: object) -> str:
    """A refused name safe to put in a log line: escaped and cut to the rule's length."""
    text = repr(name)
    return text if len(text) <= TOOL_NAME_MAX else f"{text[:TOOL_NAME_MAX]}... ({len(text)} characters)"
