"""The metric names a PromQL expression reads (enough of PromQL for alert rules)."""

from __future__ import annotations

import re

KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
}  # fmt: skip
_LABELS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"[^"]*"')
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """Identifiers of ``expr`` that name series: not functions, keywords, labels or numbers."""
    text = _STRINGS.sub("", _LABELS.sub("", _RANGE.sub("", expr)))
    text = _GROUPING.sub(" ", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        word = match.group()
        following = text[match.end() :].lstrip()
        if word.lower() in KEYWORDS or following.startswith("("):
            continue
        names.add(word)
    return names
