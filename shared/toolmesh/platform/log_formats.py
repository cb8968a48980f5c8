"""Which log format a process writes, and the human one: short coloured lines for a person at a terminal.

JSON (``telemetry.JsonFormatter``) is for machines and is what a process writes when its stderr is
not a terminal. On a terminal the lines are short (time, level, logger, message) and quiet: toolmesh's
own loggers at the configured level, every other library's (uvicorn, the MCP SDK, nats, asyncpg) only
from WARNING up.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Literal, TextIO

from rich.console import Console
from rich.text import Text

OWN_LOGGER = "toolmesh"
THIRD_PARTY_FLOOR = logging.WARNING
"""In human format, the lowest level shown of loggers that are not toolmesh's own."""
CONTEXT_FIELDS = ("server", "tool")
"""``extra=`` fields shown after the message in human format (JSON shows every field)."""
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
CONTINUATION = "\n    "
"""Between the lines of a multi-line message or traceback in human format."""
LEVEL_STYLES = {"DEBUG": "dim", "INFO": "green", "WARNING": "yellow", "ERROR": "bold red", "CRITICAL": "bold red"}


def chosen_format(setting: str, stream: TextIO) -> Literal["json", "human"]:
    """The format to write on ``stream``: ``json`` or ``human`` when the setting says so, else (``auto``)
    human on a terminal and JSON anywhere else."""
    if setting == "json":
        return "json"
    if setting == "human":
        return "human"
    isatty = getattr(stream, "isatty", None)
    return "human" if isatty is not None and isatty() else "json"


def is_own(logger_name: str) -> bool:
    """True for toolmesh's own loggers (``toolmesh`` and below)."""
    return logger_name == OWN_LOGGER or logger_name.startswith(f"{OWN_LOGGER}.")


class Quiet(logging.Filter):
    """Passes toolmesh's own records from ``level`` up, other libraries' from WARNING (or ``level``
    when higher), whatever level their loggers set for themselves."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.own, self.others = level, max(level, THIRD_PARTY_FLOOR)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= (self.own if is_own(record.name) else self.others)


def visible(text: str) -> str:
    """``text`` with control characters (escape sequences, line breaks; not tabs) written as ``\\xNN``,
    and each further line of it indented: what a log line quotes (an upstream's stderr, an error
    message) can neither drive the terminal nor forge a line of its own, as JSON's escaping ensures
    in the other format."""
    rows = (_CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", row) for row in text.splitlines())
    return CONTINUATION.join(rows)


def short_name(name: str) -> str:
    """A logger's name without the ``toolmesh.`` prefix (``toolmesh.gateway.api`` → ``gateway.api``)."""
    return name.removeprefix(f"{OWN_LOGGER}.")


class HumanHandler(logging.Handler):
    """Writes each record that ``Quiet(level)`` passes as one short line through a rich console:
    colours on a terminal, plain text elsewhere, never wrapped by rich; further lines of a message
    and a traceback follow indented."""

    def __init__(self, level: int = logging.INFO, stream: TextIO | None = None) -> None:
        super().__init__()
        self.addFilter(Quiet(level))
        # Without a stream the console writes to whatever sys.stderr is at the time, so a rich live
        # display (the start-up spinner) that redirects stderr keeps these lines above itself.
        options = {"file": stream} if stream is not None else {"stderr": True}
        self.console = Console(highlight=False, markup=False, emoji=False, soft_wrap=True, **options)

    def render(self, record: logging.LogRecord) -> Text:
        """The line of ``record`` (and its traceback, already masked by the redactor when it ran)."""
        line = Text.assemble(
            (datetime.fromtimestamp(record.created).strftime("%H:%M:%S"), "dim"),
            " ",
            (f"{record.levelname:<7}", LEVEL_STYLES.get(record.levelname, "")),
            " ",
            (visible(short_name(record.name)), "cyan"),
            "  ",
            visible(record.getMessage()),
        )
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line.append(f"  {field}={visible(str(value))}", "dim")
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            line.append(f"{CONTINUATION}{visible(record.exc_text)}", "red")
        return line

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(self.render(record))
        except Exception:  # a broken stream: logging's own policy (print once to stderr, go on)
            self.handleError(record)
