"""What the poisoning scanner reports: a ``Finding`` names its kind, the field, an excerpt and why."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FindingKind(StrEnum):
    """The kinds of poisoning the scanner looks for."""

    HIDDEN_INSTRUCTION = "hidden_instruction"
    UNICODE = "unicode"
    SHADOWING = "shadowing"
    EXFILTRATION = "exfiltration"


EXCERPT_CHARS = 80


@dataclass(frozen=True)
class Finding:
    """One suspicious passage of a definition: ``field`` is a path such as ``description`` or
    ``inputSchema.properties.path.description``; ``excerpt`` is printable (invisible characters shown
    as ``<U+XXXX>``)."""

    kind: FindingKind
    field: str
    excerpt: str
    reason: str

    def summary(self) -> str:
        """One line for an admin: ``kind in field: reason ("excerpt")``."""
        return f'{self.kind} in {self.field}: {self.reason} ("{self.excerpt}")'


def excerpt(text: str, start: int = 0, end: int | None = None) -> str:
    """At most ``EXCERPT_CHARS`` of ``text`` around ``start..end``, invisible characters made visible."""
    end = len(text) if end is None else end
    lo = max(0, start - 20)
    shown = text[lo : max(end + 20, lo + 1)][:EXCERPT_CHARS]
    visible = "".join(c if c.isprintable() and c != "\u3164" else f"<U+{ord(c):04X}>" for c in shown)
    return " ".join(visible.split())[: EXCERPT_CHARS * 2]
