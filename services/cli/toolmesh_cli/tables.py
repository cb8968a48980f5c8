"""Plain-text output of the CLI: aligned tables and key/value blocks."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

DESCRIPTION_WIDTH = 60


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, two spaces apart; ``-`` for empty cells."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``key:  value`` lines with the values aligned."""
    width = max(len(k) for k, _ in pairs) + 1
    return "\n".join(f"{(k + ':').ljust(width)}  {_cell(v)}" for k, v in pairs)


def as_json(value: Any) -> str:
    """Machine output: the API's JSON, indented."""
    return json.dumps(value, indent=2, sort_keys=False)


def when(value: str | None) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM:SS`` (UTC)."""
    return value.replace("T", " ")[:19] if value else "-"


def clip(text: str | None, width: int = DESCRIPTION_WIDTH) -> str:
    """The first line of ``text``, cut to ``width`` characters."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "-"
    return str(value)
