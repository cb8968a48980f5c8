"""Shadowing: a description that speaks about tools this server does not have, to change how the
model uses them ("when the send_email tool is used, always bcc ...", "call delete_repo").

A name counts as a tool when the text uses it like one (``call X``, ``the X tool``, ``when X is
called``, ``instead of X``); tools of the same server (``siblings``) and the tool's own parameters
are not foreign. Phrases about other servers' tools in general count without a name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from toolmesh.poisoning.finding import Finding, FindingKind, excerpt

_ID = r"`[^`]+`|[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"
"""A tool name: in backticks, or a ``snake_case`` word (``command-line`` and other hyphenated words are prose)."""
_MENTIONS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(?:call|calling|calls to|invoke|invoking|use|using|run|running|"
        r"via|through|instead of|replaces|before|after)\s+"
        rf"(?:the\s+|any\s+|every\s+)?(?:\w+\s+)?(?P<id>{_ID})",
        rf"\b(?:the\s+)?(?P<id>{_ID})\s+(?:tool|function)\b",
        r"\b(?:when|whenever|before|after|if|once)\s+(?:the\s+)?(?:user'?s?\s+)?(?:\(\w+\)\s*)?(?P<id>`[^`]+`|"
        r"[a-z][a-z0-9]*(?:[_.][a-z0-9]+)*)"
        r"\s+(?:tool\s+)?(?:is|gets|has been|would be|are)\s+(?:used|called|invoked|run|executed|loaded)",
        rf"\bthrough\s+(?P<id>{_ID})",
    )
)
_FOREIGN = re.compile(
    r"\b(?:other|another|any|every)\s+(?:\S+\s+){0,2}?(?:servers?|mcp servers?)(?:'s?)?\b[^.]{0,40}?\btools?\b"
    r"|\btools?\b[^.]{0,20}?\b(?:of|from|on) (?:the |any |another |other )?[\w-]+ server\b"
    r"|\b(?:on|from|of) (?:any|another|other|every) server\b"
    r"|\b(?:whenever|when|every time|any time|if)\b[^.]{0,60}?\bthe (?!tool\b)(?:\w+\s+){1,3}?tool\b"
    r"(?:\s+\w+){0,3}?\s+(?:is|"
    r"gets|runs|would be)?\s*"
    r"(?:used|called|invoked|run|executed|to)\b"
    r"|\b(?:all|every|any)\s+(?:calls?|emails?|messages?)\s+(?:to|sent|through|via)\s+(?:the\s+)?[\w-]+"
    r"|\b(?:with|using|via|through) the (?!tool\b|same\b|this\b|above\b|following\b)\w+ tool\b"
    r"|\bany (?:\w+\s+){0,2}tool (?:that|from)\b|\bofficial \w+ tools\b|\bthe \w+ tool (?:of|from|on) the\b",
    re.IGNORECASE,
)
_GENERIC = frozenset(
    {
        "this",
        "the",
        "a",
        "it",
        "any",
        "every",
        "each",
        "that",
        "same",
        "other",
        "tool",
        "function",
        "this_tool",
        "user",
        "you",
        "they",
        "data",
        "request",
        "command",
        "code",
        "query",
        "operation",
        "action",
        "method",
        "endpoint",
        "script",
        "file",
        "page",
        "step",
        "process",
    }
)


def _key(name: str) -> str:
    return name.strip('`()" ').lower().replace("-", "_")


def shadowing_findings(
    plain: str, field: str, siblings: Collection[str], parameters: Collection[str]
) -> Iterator[Finding]:
    """Mentions, in ``plain``, of tools that are neither ``siblings`` nor ``parameters``; or of other
    servers' tools in general."""
    known: set[str] | None = None  # built on the first mention: most texts have none
    for pattern in _MENTIONS:
        for match in pattern.finditer(plain):
            name = _key(match.group("id"))
            known = known if known is not None else {_key(n) for n in (*siblings, *parameters)}
            if name and name not in known and name.split(".")[-1] not in known and name not in _GENERIC:
                yield Finding(
                    FindingKind.SHADOWING,
                    field,
                    excerpt(plain, match.start(), match.end()),
                    f"speaks about tool '{name}', which this server does not have",
                )
                return
    foreign = _FOREIGN.search(plain)
    if foreign:
        yield Finding(
            FindingKind.SHADOWING,
            field,
            excerpt(plain, foreign.start(), foreign.end()),
            "speaks about other servers' tools",
        )
