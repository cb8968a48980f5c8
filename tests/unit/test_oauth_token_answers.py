"""What toolmesh keeps of a token endpoint's answer (``toolmesh.oauth_tokens.granted``): the ``scope``
an authorization server grants goes into the ``server.authorized`` event, kept forever and streamed to
every caller of the namespace, so only a scope as RFC 6749 spells it (scope tokens of printable ASCII
separated by spaces) of a sane length is believed; anything else keeps the scope toolmesh asked for."""

from __future__ import annotations

import pytest

from toolmesh.oauth_tokens import MAX_SCOPE_CHARS, granted
from toolmesh.platform.store.upstream_tokens import UpstreamGrant

ASKED = UpstreamGrant(
    issuer="https://as.example",
    token_endpoint="https://as.example/token",
    access_token="",
    client_id="c",
    scope="read write",
)


def test_a_granted_scope_replaces_the_one_asked_for() -> None:
    assert granted(ASKED, {"access_token": "at", "scope": "read"}).scope == "read"


@pytest.mark.parametrize(
    "scope",
    [
        "s" * (MAX_SCOPE_CHARS + 1),  # a hostile server filling the event log
        "read\nwrite",
        "read\u202ewrite",
        '<script>alert(1)</script> "quoted"',
        "read  write",
        " read",
        "",
    ],
)
def test_a_scope_that_is_no_scope_is_not_believed(scope: str) -> None:
    assert granted(ASKED, {"access_token": "at", "scope": scope}).scope == "read write"
