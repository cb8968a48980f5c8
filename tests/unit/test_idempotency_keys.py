"""Idempotency keys: what a key may be, what makes two requests the same, and what a kept answer holds."""

from __future__ import annotations

import json

import pytest

from toolmesh.contracts.upstream_auth import AuthorizeResponse
from toolmesh.errors import ValidationFailed
from toolmesh_gateway.idempotency import Stored, check_key, fingerprint, kept_form
from toolmesh_gateway.idempotent_http import _canonical


@pytest.mark.parametrize("key", ["a", "order-42", "3f2a8c1e-9d1b-4a7c-8e63-2f0d5b1c9a77", "x" * 255])
def test_printable_keys_are_accepted(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "with space", "x" * 256, "tab\tkey", "é"])
def test_other_keys_are_validation_errors(key: str) -> None:
    with pytest.raises(ValidationFailed):
        check_key(key)


def test_fingerprints_separate_their_parts() -> None:
    assert fingerprint("ab", "c") != fingerprint("a", "bc")
    assert fingerprint("nats", "servers.register", "{}") == fingerprint("nats", "servers.register", "{}")


def test_json_bodies_compare_by_content_not_formatting() -> None:
    assert _canonical(b'{"b": 1, "a": [1, 2]}') == _canonical(b'{"a":[1,2],"b":1}')
    assert _canonical(b"not json") == b"not json"


def test_a_kept_authorization_answer_holds_no_state() -> None:
    """The ``state`` of ``POST /servers/{id}/authorize`` is the capability of its callback, stored only as
    a hash: the idempotency store (kept 24 h) keeps the answer without the URL that carries it."""
    state = "s3cr3t-state-Zm9vYmFy"
    url = f"https://as.example/authorize?client_id=c&state={state}&code_challenge=x"
    answer = {"server_id": "s1", "authorization_url": url, "expires_in": 600}
    kept = kept_form(Stored(200, json.dumps(answer)))
    assert state not in kept.body
    replayed = json.loads(kept.body)
    assert replayed["authorization_url"] is None and replayed["server_id"] == "s1"
    assert "again" in replayed["note"]
    assert AuthorizeResponse.model_validate(replayed).note == replayed["note"]  # what a client reads
