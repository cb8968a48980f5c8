"""Exfiltration-shaped parameters: a parameter whose name or description asks the model to fill it
with the conversation, its own instructions, secrets or credential files, and descriptions telling
the model to put such things into a parameter.

A parameter for an API key, a token, a password or chat messages to send to a model is ordinary;
what is flagged is one that reaches for *what the model has seen* (all of the conversation, what
the user said so far, secrets found in the chat, the environment or on disk).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolmesh.poisoning.finding import Finding, FindingKind, excerpt

CHANNELS = frozenset({"sidenote", "side_note", "sidenotes"})
_SENSITIVE = frozenset({"ssh", "rsa", "keychain", "cookies", "credentials", "seed", "wallet", "mcp", "netrc", "dotenv"})
_CONVERSATION = frozenset({"conversation", "transcript", "chat"})
_MESSAGES = frozenset({"messages", "history", "turns", "transcript"})
_WHOLE = frozenset({"all", "full", "whole", "entire", "previous", "past", "last", "complete", "summary", "session"})
_SOURCE = frozenset({"from", "contents", "content", "dump"})
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_CONVERSATION_TEXT = re.compile(
    r"\b(?:all|every|full|whole|entire|complete|last \d+)\s+(?:\S+\s+){0,3}?(?:conversation|"
    r"chat|messages|message|transcript|history)\b"
    r"|\b(?:conversation|chat|messages|transcript|history)\b[^.]{0,40}?(?:so far|"
    r"this (?:conversation|session|chat)|with the user"
    r"|including|verbatim|exchanged|\(last \d+\))"
    r"|\beverything the user (?:has )?(?:told|said|wrote|typed)|\bthe user'?s (?:\S+\s+)?(?:conversation|"
    r"chat|messages|history)"
    r"|\b(?:your|hidden) (?:system prompt|system messages|instructions and|tool list|tools)\b",
    re.IGNORECASE,
)
_SECRET = (
    r"(?:secrets?|passwords?|tokens?|api keys?|credentials|private keys?|seed phrases?|cookies|"
    r"environment variables|env vars)"
)
_SECRET_TEXT = re.compile(
    rf"\b{_SECRET}\b[^.]{{0,60}}?\b(?:you (?:have )?(?:seen|know|found|"
    r"have)|mentioned|found|present|shared|on disk|of the host"
    r"|from the (?:conversation|chat|environment|env|disk|keychain)|"
    r"in the (?:chat|conversation|environment|configuration))"
    rf"|\b(?:any|all|every)\s+(?:\S+\s+){{0,2}}?{_SECRET}\b"
    r"|\b(?:value|contents?) of (?:the )?\$?\w*(?:key|token|secret|password)\w* (?:environment )?variable"
    r"|\bthe user'?s (?:\S+\s+)?(?:cookies|passwords?|tokens?|credentials|secrets?|keys)\b"
    r"|\$\{?(?:env:)?\w*(?:key|token|secret|password)\w*\}?|\bcat ~?/",
    re.IGNORECASE,
)
_INTO_PARAMETER = re.compile(
    r"\b(?:put|place|fill|include|insert|pass|add|paste|copy|send|supply)\b[^.]{0,100}?\b(?:parameter|"
    r"argument|field|param)\b"
    r"|\b(?:put|place|fill|include|insert|pass|passing|add|paste|copy|"
    r"send|supply)\b[^.]{0,100}?\b(?:as|in|into)\s+`\w+`"
    r"|\b(?:fill|populate)\s+[`'\"]?\w+[`'\"]?\s+(?:parameter\s+)?with\b",
    re.IGNORECASE,
)


def name_words(name: str) -> set[str]:
    """The lower-case words of a parameter name (``snake_case``, ``kebab-case`` or ``camelCase``)."""
    return {w.lower() for w in _WORDS.findall(name)}


def suspicious_name(name: str) -> str | None:
    """Why a parameter name reads as a channel for the conversation or secrets, or None."""
    words = name_words(name)
    if name.lower() in CHANNELS:
        return "a parameter named like a covert side channel"
    if words & _SENSITIVE and len(words) > 1:
        return "a parameter named for credentials or key material"
    if (words & _CONVERSATION and words & (_MESSAGES | _WHOLE)) or (words & _MESSAGES and words & _WHOLE):
        return "a parameter named for the conversation history"
    if {"secret", "access", "key"} <= words or (
        "password" in words and words & {"from", "keychain", "saved", "stored"}
    ):
        return "a parameter named for a secret"
    if words & _SOURCE and words & {"env", "environment", "key", "keys", "config", "json", "secrets", "password"}:
        return "a parameter named for the contents of a secret"
    return None


def parameter_text_findings(plain: str, field: str) -> Iterator[Finding]:
    """A parameter's description, default or enum value asking for the conversation or secrets."""
    for pattern, reason in (
        (_CONVERSATION_TEXT, "asks for the conversation or the model's instructions"),
        (_SECRET_TEXT, "asks for secrets the model has seen or can read"),
    ):
        match = pattern.search(plain)
        if match:
            yield Finding(FindingKind.EXFILTRATION, field, excerpt(plain, match.start(), match.end()), reason)


def description_findings(plain: str, field: str) -> Iterator[Finding]:
    """A description telling the model to put the conversation or secrets into a parameter."""
    for sentence in re.split(r"(?<=[.!?;])\s+", plain):
        if _INTO_PARAMETER.search(sentence) and (_CONVERSATION_TEXT.search(sentence) or _SECRET_TEXT.search(sentence)):
            yield Finding(
                FindingKind.EXFILTRATION,
                field,
                excerpt(sentence),
                "tells the model to put the conversation or secrets into a parameter",
            )
            return
