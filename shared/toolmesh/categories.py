"""Tool categories: a coarse kind for every tool, inferred from its name and description.

The rule (no I/O, deterministic): split the name into words (``snake_case``, ``kebab-case``,
``dotted.names`` and ``camelCase``) and the description into words; each word that starts with
one of a category's stems (or is one of its ``EXACT`` words) scores for it, a name word
``NAME_WEIGHT`` points, a description word one point. The best score wins; a tie goes to the
category listed first in ``ToolCategory`` (specific kinds before ``search``, the most generic
verb); no score at all is ``general``.
So ``search_memory`` ("Search semantic memories") is ``memory``, ``search_files`` is ``file``,
``search_tools`` is ``search``.
"""

from __future__ import annotations

import re
from enum import StrEnum


class ToolCategory(StrEnum):
    """What a tool is about, most specific first (the order breaks ties)."""

    MEMORY = "memory"
    FILE = "file"
    CODE = "code"
    COMMUNICATION = "communication"
    DATA = "data"
    WEB = "web"
    SYSTEM = "system"
    SEARCH = "search"
    GENERAL = "general"


STEMS: dict[ToolCategory, tuple[str, ...]] = {
    ToolCategory.MEMORY: ("memor", "remember", "recall", "forget", "knowledge"),
    ToolCategory.FILE: ("file", "director", "folder", "path", "filesystem", "upload", "download", "attachment"),
    ToolCategory.CODE: (
        "code",
        "git",
        "commit",
        "repositor",
        "issue",
        "branch",
        "pull",
        "merge",
        "compil",
        "lint",
        "debug",
        "python",
        "javascript",
        "script",
        "function",
        "snippet",
    ),
    ToolCategory.COMMUNICATION: (
        "email",
        "mail",
        "messag",
        "slack",
        "chat",
        "send",
        "notif",
        "sms",
        "channel",
        "discord",
        "reply",
    ),
    ToolCategory.DATA: (
        "data",
        "sql",
        "table",
        "row",
        "column",
        "record",
        "csv",
        "spreadsheet",
        "json",
        "metric",
        "analytic",
        "statistic",
    ),
    ToolCategory.WEB: ("http", "url", "web", "browse", "fetch", "scrap", "html", "page", "site", "navigat", "crawl"),
    ToolCategory.SYSTEM: ("process", "shell", "command", "system", "environment", "cpu", "disk", "kill", "terminal"),
    ToolCategory.SEARCH: ("search", "find", "lookup", "query", "retriev"),
}
EXACT: dict[ToolCategory, tuple[str, ...]] = {
    ToolCategory.CODE: ("repo", "repos", "pr", "prs", "diff"),
    ToolCategory.DATA: ("db",),
    ToolCategory.SYSTEM: ("ps", "env", "os"),
}
"""Short words that would match too much as stems (``repo`` would catch ``report``)."""
NAME_WEIGHT = 3
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case words of a name or sentence (``camelCase`` and ``snake_case`` split)."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def _matches(word: str) -> list[ToolCategory]:
    return [
        category
        for category, stems in STEMS.items()
        if word in EXACT.get(category, ()) or any(word.startswith(stem) for stem in stems)
    ]


def categorize(name: str, description: str | None = None) -> ToolCategory:
    """The category of a tool from its name and description (see the module's rule)."""
    scores = dict.fromkeys(STEMS, 0)
    for weight, text in ((NAME_WEIGHT, name), (1, description or "")):
        for word in words(text):
            for category in _matches(word):
                scores[category] += weight
    best = max(scores.values())
    if best == 0:
        return ToolCategory.GENERAL
    return next(category for category in ToolCategory if scores.get(category) == best)
