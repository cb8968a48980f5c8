"""Idempotency keys: what a key may be, and what makes two requests the same."""

from __future__ import annotations

import pytest

from toolmesh.errors import ValidationFailed
from toolmesh_gateway.idempotency import check_key, fingerprint
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
