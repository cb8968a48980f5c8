"""The ``next_cursor`` of ``search_tools``: where the next page of one search starts, bound to that search.

A cursor is opaque (base64url of the page's offset and a MAC): HMAC-SHA256, under a key every
replica derives from the deployment's credential key, over the offset and the search it belongs to
(the caller's namespace and endpoint bundle, the query, the server filter and the grouping). It
carries no authority: every page is searched again in the view of the caller presenting it, so a
cursor never shows what that caller could not search for itself. One that was altered, or issued
for another search or another namespace, is refused as a ``VALIDATION_ERROR`` on ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from toolmesh.errors import ValidationFailed

SEARCH_CURSOR = "mcp search cursor"
"""The purpose the cursor keys are derived for from the credential key."""
_OFFSET_BYTES = 2
_MAC_BYTES = 16


class SearchCursors:
    """Issues and reads cursors under ``keys`` (the current key first, then keys being rotated out)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("search cursors need a key")
        self._keys = list(keys)

    def issue(self, search: Any, offset: int) -> str:
        """The cursor of the page starting at ``offset`` of ``search`` (any JSON value naming the search)."""
        raw = offset.to_bytes(_OFFSET_BYTES, "big")
        return base64.urlsafe_b64encode(raw + _mac(self._keys[0], search, raw)).decode().rstrip("=")

    def offset(self, search: Any, cursor: str, window: int) -> int:
        """Where the page ``cursor`` names starts; ``ValidationFailed`` unless this gateway issued it
        for ``search`` with an offset inside ``window``."""
        try:
            data = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            data = b""
        raw, mac = data[:_OFFSET_BYTES], data[_OFFSET_BYTES:]
        if len(data) != _OFFSET_BYTES + _MAC_BYTES or not any(
            hmac.compare_digest(mac, _mac(key, search, raw)) for key in self._keys
        ):
            raise _refused("not a cursor this gateway issued for this search (same query, filter and grouping)")
        offset = int.from_bytes(raw, "big")
        if not 0 < offset < window:
            raise _refused(f"the cursor's page is outside the first {window} results")
        return offset


def _mac(key: bytes, search: Any, raw: bytes) -> bytes:
    bound = json.dumps(search, sort_keys=True, separators=(",", ":")).encode() + b"\0" + raw
    return hmac.new(key, bound, hashlib.sha256).digest()[:_MAC_BYTES]


def _refused(message: str) -> ValidationFailed:
    return ValidationFailed(
        "Request validation failed", {"errors": [{"loc": ["cursor"], "msg": message, "type": "value_error"}]}
    )
