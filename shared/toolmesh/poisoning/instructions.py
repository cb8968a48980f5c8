"""Hidden instructions aimed at the model: phrase rules over normalised prose.

Each rule is a regular expression with the reason it gives. They look for what a tool's own
documentation has no reason to say: overriding the model's instructions, hiding something from the
user, markup that addresses the model (``<IMPORTANT>``, ``[SYSTEM]``), reading credential files,
sending the conversation or secrets somewhere, text pushed out of sight, and encoded payloads to follow.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

from toolmesh.poisoning.finding import Finding, FindingKind, excerpt

_W = r"(?:\S+\s+)"
_AGENT = r"(?:ai|llm|model|assistant|agent|language model|bot|claude|gpt|copilot)"
_USER = r"(?:user|human|person|anyone|customer|operator|people|them)"
_HIDE = (
    r"(?:tell|telling|inform|informing|mention|mentioning|reveal|revealing|disclose|disclosing|notify|notifying|"
    r"alert|alerting|show|showing|surface|surfacing|say|saying|let|letting|bring(?:ing)? (?:this|it) up|decir)"
)
SENSITIVE_PATH = (
    r"\.(?:ssh|aws|kube|docker|gnupg|cursor|netrc|npmrc|pypirc|"
    r"git-credentials|bash_history|zsh_history|config/gh|bitcoin|azure|gcloud)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|"
    r"authorized_keys|/etc/(?:passwd|shadow|sudoers)|\bmcp\.json\b|wallet\.dat|\.env\b|"
    r"(?:chrome|firefox|browser)\S*\s*(?:\S+\s+){0,3}cookies|\bkeychain\b|"
    r"[/~]\S*credentials\b|\bcredentials\.json\b|secrets\.json|hosts\.yml"
)
_READ = (
    r"(?:read|reading|open|opens|opening|cat|access|accessing|grab|copy|paste|quote|include|load|fetch|upload|"
    r"send|contents? of|put)"
)
_DATA = (
    r"(?:conversation|chat|messages?|history|transcript|cookies|secrets?|tokens?|credentials|passwords?|api keys?|"
    r"private keys?|env(?:ironment)?(?: variables)?|files|system prompt|results?|data|summary|email address)"
)
_TARGET = r"(?:https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+|\+?\d[\d\s-]{7,}\d|\b[a-z]{2}\d{2}\s?[a-z0-9]{4,})"

RULES: tuple[tuple[str, str], ...] = (
    (
        r"\b(?:ignore|ignoring|disregard|forget|override|pay no attention to|ignor)\b\s+(?:\S+\s+){0,4}?"
        r"(?:previous|prior|above|earlier|preceding|all|any|your|former|the user'?s?|everything)\s*(?:\S+\s+){0,3}?"
        r"(?:instructions?|instrucshuns|directions?|guidance|rules|prompts?|"
        r"directives?|guidelines|context|messages|told)",
        "tells the model to ignore its instructions",
    ),
    (r"\b(?:ignore|disregard) the above\b", "tells the model to ignore its instructions"),
    (
        r"\b(?:previous|prior|earlier|above) (?:instructions?|rules|directives?) (?:are|"
        r"is) (?:void|null|cancel+ed|obsolete|no longer)"
        r"|\bno longer (?:bound by|apply|applies)\b|\bforget (?:your|all|everything)\b",
        "tells the model its instructions no longer apply",
    ),
    (
        r"\b(?:new|updated|real) (?:task|directive|rule|instructions?|goal)\s*(?:is|"
        r":)|\byour (?:only |new |real )?goal (?:now )?is\b"
        r"|\byou are now\b|\bfrom now on,? (?:you|always|only|respond|follow|treat)\b",
        "gives the model a new task",
    ),
    (
        rf"\b(?:do not|don't|dont|never|without|no|not)\s+(?:ever\s+)?{_HIDE}\b\s*"
        rf"(?:\S+\s+){{0,6}}?(?:to\s+)?(?:the\s+)?{_USER}\b"
        rf"|\bnot (?:to )?(?:be )?(?:shown|visible|displayed|surfaced) (?:to )?(?:the )?{_USER}|"
        rf"\bhidden from (?:the )?{_USER}"
        r"|\b(?:keep|kept) (?:this|it|quiet|silent)?\s*(?:secret|confidential|quiet|hidden|between us)"
        r"|\bdo not disclose\b|\bmust not (?:inform|tell)\b|\bnever (?:surface|mention|disclose|reveal) this\b"
        r"|\bkeep quiet\b|\bno decir\b|\bnot say to\b",
        "tells the model to hide something from the user",
    ),
    (
        r"\b(?:silently|quietly|secretly|covertly|discreetly)\b,?\s+(?:also\s+)?(?:\S+\s+)?(?:send|"
        r"call|run|execute|add|drop|write|"
        r"upload|include|append|forward|post|copy|change|replace|read|set|invite|bcc)",
        "tells the model to act without the user knowing",
    ),
    (
        r"\b(?:without|no need to|don't|do not)\s+ask(?:ing)?\s+(?:the user\s+)?(?:for\s+)?(?:confirmation|"
        r"permission|consent|approval)"
        r"|\bignore the user'?s (?:instructions|request|wishes)|\bproceed automatically\b|"
        r"\bskip (?:the )?(?:approval|confirmation|review)",
        "tells the model to act without the user's consent",
    ),
    (
        r"<\s*/?\s*(?:important|system|system_prompt|instructions?|secret|hidden|admin|assistant)\s*>"
        r"|\[\s*(?:system|admin|instructions?)\s*\]|\{\{\s*system\b|\bsystem (?:message|override|prompt|note)\s*:"
        r"|<!--\s*(?:\S+\s+){0,2}?(?:assistant|ai|model|agent|llm|system)\b",
        "markup that addresses the model",
    ),
    (
        r"\b(?:note|message|instructions?|p\.?\s?s\.?|attention|hey|dear|"
        rf"reminder|usage policy)\s*(?:\S+\s+){{0,2}}?(?:to|for)?\s*(?:the\s+)?{_AGENT}\b"
        rf"(?:\s+agent)?\s*(?:\S+\s+){{0,4}}?[:,!—-]|\b(?:attention|hey|dear)\s+{_AGENT}\b|^\(?{_AGENT}\s*[,:]"
        rf"|\bfor (?:the )?(?:language model|llm|ai|assistants?|agents?) (?:reading this|only)",
        "text addressed to the model",
    ),
    (
        r"\b(?:you|the (?:assistant|model|agent|ai|llm))\s+(?:must|should|"
        r"has to|have to|needs? to|is required to|are required to|"
        r"is instructed to|are instructed to|shall)\s+(?:first\s+|also\s+|always\s+|never\s+|silently\s+|now\s+)*"
        r"(?:read|open|access|cat|send|paste|copy|upload|forward|mark|answer that|"
        r"respond only|reply|ignore|obey|grab|collect|"
        r"run|execute|treat|tell the user|say)",
        "an order to the model",
    ),
    (
        rf"(?:{_READ})\b[^.\n]{{0,80}}?(?:{SENSITIVE_PATH})|(?:{SENSITIVE_PATH})[^.\n]{{0,60}}?\b(?:{_READ}|"
        r"into|in the|as)\b",
        "asks for a credential or configuration file",
    ),
    (
        r"\b(?:send|forward|upload|post|email|exfiltrate|transmit|copy|"
        rf"share|bcc|cc|log|report)\w*\b[^.\n]{{0,60}}?\b{_DATA}\b"
        rf"[^.\n]{{0,60}}?(?:{_TARGET})",
        "sends data to an address named in the description",
    ),
    (
        r"\b(?:before|instead of) (?:any|every|all) (?:other )?tools?\b|"
        r"\bfor every (?:user )?(?:message|request|prompt)\b"
        r"|\balways (?:call|use|run) this tool first\b",
        "demands to be used before every other tool",
    ),
    (
        r"\b(?:curl|wget)\s+\S+\s*\|\s*(?:ba|z)?sh\b|\brm\s+-rf\s+[~/]|\$\((?:cat|curl|env)\b",
        "a shell command to run",
    ),
    (
        r"\b(?:decode|deobfuscate|reverse)\b[^.\n]{0,60}?\b(?:follow|execute|obey|run|do what)",
        "asks the model to decode and follow hidden text",
    ),
    (
        r"\b(?:fetch|open|visit|read)\b[^.\n]{0,40}https?://\S+[^.\n]{0,40}?\b(?:follow|obey|do what|execute)",
        "asks the model to follow instructions from elsewhere",
    ),
    (
        r"\b(?:treat|consider)\b[^.\n]{0,60}?\bas (?:instructions|commands|"
        r"orders|coming from (?:your |the )?(?:system|developer|operator))"
        r"|\boverride (?:your )?(?:safety|guidelines|policy|policies)|\bgrant every request\b|"
        r"\bthe user (?:has )?already consented\b"
        r"|\b(?:user|operator) has (?:authori[sz]ed|approved) (?:you|it)\b",
        "claims authority over the model",
    ),
)
_COMPILED = tuple((re.compile(pattern, re.IGNORECASE), reason) for pattern, reason in RULES)
_PADDING = re.compile(r"(?:\n[ \t]*){12,}\S|[ \t]{60,}\S")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


def instruction_findings(plain: str, raw: str, field: str) -> Iterator[Finding]:
    """Hidden instructions in ``plain`` (the normalised text of ``raw``), one finding per rule that
    matches; a base64 payload is decoded and read by the same rules."""
    for pattern, reason in _COMPILED:
        match = pattern.search(plain)
        if match:
            yield Finding(FindingKind.HIDDEN_INSTRUCTION, field, excerpt(plain, match.start(), match.end()), reason)
    padding = _PADDING.search(raw)
    if padding:
        yield Finding(
            FindingKind.HIDDEN_INSTRUCTION,
            field,
            excerpt(raw, padding.end() - 1, padding.end() + 60),
            "text pushed out of sight by blank lines",
        )
    for blob in _BASE64.findall(raw):
        decoded = _decoded(blob)
        if decoded and any(pattern.search(decoded.lower()) for pattern, _ in _COMPILED):
            yield Finding(FindingKind.HIDDEN_INSTRUCTION, field, excerpt(decoded), "base64-encoded instructions")


def _decoded(blob: str) -> str | None:
    try:
        text = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if text.isprintable() else None
