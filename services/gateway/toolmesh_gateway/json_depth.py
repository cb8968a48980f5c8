"""How deep a JSON text nests, measured on its bytes before any parser recurses into it.

Python's and pydantic's JSON code recurse once per level and give up somewhere past 200 levels with
errors that are no client's business (``RecursionError``, a serialization error); the gateway
measures the nesting of every request body first and refuses one that is too deep (``BodyLimit``).
The measure is a few vectorized passes over the bytes: linear, however the body is shaped.
"""

from __future__ import annotations

import numpy as np

_QUOTE = ord('"')
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def looks_like_json(body: bytes) -> bool:
    """True when ``body`` starts (after white space) with an array or an object."""
    return body.lstrip()[:1] in (b"[", b"{")


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in ``body`` (0 for a scalar).

    Brackets inside strings do not count. Malformed text gets a number too (brackets counted as they
    come); the parser refuses it later.
    """
    if body.count(b"[") + body.count(b"{") <= 1:  # most bodies of a few bytes, and large flat ones
        return 1 if looks_like_json(body) else 0
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")  # no backslash left escapes a quote
    text = np.frombuffer(unescaped, dtype=np.uint8)
    steps = _STEP[text]
    quoted = text == _QUOTE
    if quoted.any():
        inside = np.bitwise_xor.accumulate(quoted)  # in a string: its opening quote on, its closing one off
        steps[inside] = 0
    return int(max(np.cumsum(steps, dtype=np.int32).max(initial=0), 0))
