"""Invisible and confusable Unicode, and the normalised text the phrase rules read.

Flagged: Unicode tag characters (U+E0000-U+E007F, invisible ASCII: "tag smuggling"), variation
selectors used as a byte channel (U+E0100-U+E01EF), bidirectional embeddings, overrides and isolates,
zero-width and other invisible characters next to Latin text or in runs, and words that mix Latin
with Cyrillic, Greek or Armenian letters (homoglyphs). A zero-width joiner inside an emoji sequence,
a variation selector after an emoji, and text wholly in another script are legitimate.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from toolmesh.poisoning.finding import Finding, FindingKind, excerpt

TAGS = range(0xE0000, 0xE0080)
VARIATION_SUPPLEMENT = range(0xE0100, 0xE01F0)
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u3164\u115f\u1160\uffa0\u00ad\u034f"
)
RUN = 3
"""Invisible characters in one text from which they are flagged wherever they are."""
_CONFUSABLE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN")
_WORD = re.compile(r"\w+")
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁɡʏνοατмнкАВЕКМНОРСТХІЈЅ",
    "aeopcyxijsdgyvoatmhkABEKMHOPCTXIJS",
)


def _is_latin(char: str) -> bool:
    return char.isascii() and char.isalpha()


def _is_emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or 0x1F000 <= ord(char) <= 0x1FAFF


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    return next((s for s in _CONFUSABLE_SCRIPTS if name.startswith(s)), "LATIN" if _is_latin(char) else "")


def _invisible_in_latin(text: str, i: int) -> bool:
    before, after = text[i - 1 : i], text[i + 1 : i + 2]
    if text[i] == "\u200d" and (_is_emoji(before) or _is_emoji(after)):
        return False
    return any(_is_latin(c) or c == " " for c in before + after)


def unicode_findings(text: str, field: str) -> Iterator[Finding]:
    """Invisible or confusable characters in one text (at most one finding of each sort)."""
    if text.isascii():
        return
    tags = [c for c in text if ord(c) in TAGS]
    if tags:
        decoded = "".join(chr(ord(c) - 0xE0000) for c in tags if 0x20 <= ord(c) - 0xE0000 < 0x7F)
        yield Finding(FindingKind.UNICODE, field, excerpt(decoded or text), "invisible Unicode tag characters")
    selectors = sum(1 for c in text if ord(c) in VARIATION_SUPPLEMENT)
    if selectors >= RUN:
        yield Finding(FindingKind.UNICODE, field, excerpt(text), f"{selectors} variation selectors (hidden data)")
    bidi = next((i for i, c in enumerate(text) if c in BIDI), None)
    if bidi is not None:
        yield Finding(FindingKind.UNICODE, field, excerpt(text, bidi, bidi + 30), "bidirectional control characters")
    hidden = [i for i, c in enumerate(text) if c in INVISIBLE and not (i == 0 and c == "\ufeff")]
    flagged = hidden if len(hidden) >= RUN else [i for i in hidden if _invisible_in_latin(text, i)]
    if flagged:
        yield Finding(
            FindingKind.UNICODE, field, excerpt(text, flagged[0], flagged[0] + 30), "invisible characters in the text"
        )
    for word in _WORD.finditer(text):
        if word.group().isascii() or not any(_is_latin(c) for c in word.group()):
            continue
        scripts = {_script(c) for c in word.group()} - {""}
        if "LATIN" in scripts and len(scripts) > 1:
            yield Finding(
                FindingKind.UNICODE,
                field,
                excerpt(text, word.start(), word.end()),
                "a word mixing Latin with look-alike letters",
            )
            break


_LEET = str.maketrans("013457@$", "oieastas")
_SPACED = re.compile(r"\b(?:\w[ .\-_*]){3,}\w\b")


_TOKEN = re.compile(r"[^\W_]+")


def _unleet(match: re.Match[str]) -> str:
    """A word of letters with a few digits (``t3ll``, ``D0``) read as letters; numbers and names such
    as ``ed25519`` or ``sha256`` left alone."""
    word = match.group()
    digits = sum(c.isdigit() for c in word)
    return (
        word.translate(_LEET) if 0 < digits <= 2 and digits < len(word) - digits + 1 and not word[0].isdigit() else word
    )


def _unspaced(match: re.Match[str]) -> str:
    return re.sub(r"[ .\-_*]", "", match.group())


def normalised(text: str) -> str:
    """``text`` as the phrase rules read it: NFKC, invisible and format characters dropped (tag
    characters decoded), look-alike letters mapped to Latin, l33t digits inside words read as letters,
    s p a c e d or d.o.t.t.e.d letters joined, whitespace collapsed, lower case."""
    chars = []
    for c in unicodedata.normalize("NFKC", text):
        if ord(c) in TAGS:
            chars.append(chr(ord(c) - 0xE0000) if 0x20 <= ord(c) - 0xE0000 < 0x7F else "")
        elif c in INVISIBLE or c in BIDI or ord(c) in VARIATION_SUPPLEMENT:
            continue
        else:
            chars.append(c)
    plain = "".join(chars).translate(_LOOKALIKES)
    plain = _TOKEN.sub(_unleet, plain)
    plain = _SPACED.sub(_unspaced, plain)
    return " ".join(plain.split()).lower()
