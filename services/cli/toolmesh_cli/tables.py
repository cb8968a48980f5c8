"""Terminal output of the CLI (rich): tables, key/value blocks, coloured statuses.

Colours only on a terminal (and never with ``NO_COLOR``); piped output is the same columns in
plain text, never wrapped, so ``awk``/``cut`` keep working. ``--json`` output does not pass
through here: it is printed as the API's JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

DESCRIPTION_WIDTH = 60
PIPE_WIDTH = 4096
"""Line width when stdout is not a terminal: wide enough that no table row wraps."""

STATUS_STYLES = {
    "CONNECTED": "green",
    "DEGRADED": "yellow",
    "CONNECTING": "cyan",
    "DISCONNECTING": "cyan",
    "DISCONNECTED": "dim",
    "ERROR": "bold red",
    "ok": "green",
    "failed": "bold red",
    "invalid": "bold red",
}


def console(file: TextIO | None = None) -> Console:
    """A console on ``file`` (stdout by default): the terminal's width, or unbounded when piped."""
    stream = file or sys.stdout
    width = None if stream.isatty() else PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, markup=False, emoji=False)


def show(renderable: RenderableType, file: TextIO | None = None) -> None:
    """Print a table, text or line to stdout (or ``file``)."""
    console(file).print(renderable)


def status_text(status: str | None) -> Text:
    """A server status (or outcome) in its colour."""
    value = status or "-"
    return Text(value, style=STATUS_STYLES.get(value, ""))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], coloured: Sequence[str] = ("STATUS",)) -> Table:
    """Columns under bold headers, two spaces apart; ``-`` for empty cells; the ``coloured`` columns
    (statuses, outcomes) in their colours."""
    grid = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for header in headers:
        grid.add_column(header, no_wrap=True, overflow="ignore")
    styled = {i for i, h in enumerate(headers) if h in coloured}
    for row in rows:
        grid.add_row(*(status_text(_cell(v)) if i in styled else _cell(v) for i, v in enumerate(row)))
    return grid


def fields(pairs: Sequence[tuple[str, Any]], status_key: str | None = "status") -> Table:
    """``key:  value`` lines with the values aligned (the ``status`` value coloured)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(f"{key}:", status_text(str(value)) if key == status_key else _cell(value))
    return grid


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
