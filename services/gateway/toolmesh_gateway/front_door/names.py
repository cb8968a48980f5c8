"""Public tool names of the "all tools" mode, valid for common LLM APIs: ``^[a-zA-Z0-9_-]{1,64}$``.

``server`` + separator + ``tool``, with every other character replaced by ``_``. A name that had
to be changed that way, or is longer than 64 characters, may collide with another one; such a
name (and any name over the limit) gets a short hash of its exact ``server.tool`` as a suffix,
truncating the readable part. A name that needed no change keeps it, so the common case stays
readable and stable. The result depends only on the set of pairs, never on their order.

No server can take another's name: a readable name in which the separator could be read at two
places (``a__b`` + ``c`` and ``a`` + ``b__c`` both read ``a__b__c``) is never used as is; it is
hashed whatever else is registered, so a later server or tool cannot capture it, and the name does
not move when one arrives.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MAX_LENGTH = 64
VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LENGTH = 8


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _INVALID_CHARS.sub("_", text)


def hashed_name(readable: str, server: str, tool: str) -> str:
    """``readable`` truncated to leave room for ``_`` and a hash of the exact pair."""
    digest = hashlib.sha256(f"{server}.{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    return f"{readable[: MAX_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def separator_places(name: str, separator: str) -> int:
    """How many places of ``name`` the separator starts at (overlaps counted): more than one, and
    another ``(server, tool)`` pair could have the same name."""
    return sum(1 for i in range(len(name)) if name.startswith(separator, i))


def candidate_name(server: str, tool: str, separator: str = "__") -> tuple[str, bool]:
    """The readable name of a pair and whether it is exact (nothing replaced, within the limit, the
    separator in one place only)."""
    readable = f"{sanitize(server)}{separator}{sanitize(tool)}"
    exact = (
        readable == f"{server}{separator}{tool}"
        and len(readable) <= MAX_LENGTH
        and separator_places(readable, separator) == 1
    )
    return readable, exact


@dataclass
class NameMap:
    """Public names of ``(server, tool)`` pairs, both ways."""

    separator: str = "__"
    by_public: dict[str, tuple[str, str]] = field(default_factory=dict)
    by_pair: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        pairs: Iterable[tuple[str, str]],
        separator: str = "__",
        chosen: Mapping[tuple[str, str], str] | None = None,
    ) -> NameMap:
        """Names for every pair: ``chosen`` names first (an endpoint's renames), then exact names, so
        they are never displaced by a lossy one."""
        names = cls(separator)
        for pair, name in sorted((chosen or {}).items()):
            if name not in names.by_public:
                names._add(name, pair)
        unique = sorted(set(pairs) - names.by_pair.keys())
        readable = {pair: candidate_name(*pair, separator) for pair in unique}
        shared = Counter(name for name, _ in readable.values())
        for pair in unique:  # exact names first (never ambiguous: "a__b"+"c" and "a"+"b__c" are hashed)
            name, exact = readable[pair]
            if exact and name not in names.by_public:
                names._add(name, pair)
        for pair in unique:
            if pair in names.by_pair:
                continue
            name, _ = readable[pair]
            ambiguous = separator_places(name, separator) > 1
            if name in names.by_public or len(name) > MAX_LENGTH or shared[name] > 1 or ambiguous:
                name = hashed_name(name, *pair)
            salt = 0
            while name in names.by_public:  # a hash collision: astronomically rare, still deterministic
                salt += 1
                name = hashed_name(readable[pair][0], pair[0], f"{pair[1]}#{salt}")
            names._add(name, pair)
        return names

    def _add(self, name: str, pair: tuple[str, str]) -> None:
        self.by_public[name] = pair
        self.by_pair[pair] = name

    def public(self, server: str, tool: str) -> str | None:
        """The public name of a pair."""
        return self.by_pair.get((server, tool))

    def resolve(self, name: str) -> tuple[str, str] | None:
        """The ``(server, tool)`` pair of a public name."""
        return self.by_public.get(name)
