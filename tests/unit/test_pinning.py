"""Tool-definition pinning as pure rules: hashes, holds, approvals, the new-tools policy."""

from __future__ import annotations

import pytest

from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.pinning import Hold, Pin, approvals, approve, changed_fields, definition_hash, review

pytestmark = pytest.mark.unit
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def test_the_hash_names_the_field_that_changed() -> None:
    base = definition_hash("Search", SCHEMA)
    assert changed_fields(base, definition_hash("Search everything", SCHEMA)) == ["description"]
    assert changed_fields(base, definition_hash("Search", {"type": "object"})) == ["input_schema"]
    assert changed_fields(base, definition_hash("x", {})) == ["description", "input_schema"]
    assert definition_hash("Search", dict(reversed(list(SCHEMA.items())))) == base  # key order is irrelevant


def test_review_holds_changes_and_new_tools_under_review_only() -> None:
    v1, v2 = definition_hash("v1", {}), definition_hash("v2", {})
    pins = review([("a", v2), ("b", v1), ("c", v1)], {"a": v1, "b": v1}, first_list=False, policy=NewToolsPolicy.AUTO)
    assert pins["a"] == Pin(v2, v1, Hold("changed", ["description"]))
    assert pins["b"] == Pin(v1, v1) and pins["c"] == Pin(v1, v1)
    held_new = review([("c", v1)], {}, first_list=False, policy=NewToolsPolicy.REVIEW)
    assert held_new["c"] == Pin(v1, None, Hold("new"))
    first = review([("c", v1)], {}, first_list=True, policy=NewToolsPolicy.REVIEW)
    assert first["c"] == Pin(v1, v1)
    still_unapproved = review([("c", v2)], {"c": None}, first_list=False, policy=NewToolsPolicy.AUTO)
    assert still_unapproved["c"].hold == Hold("new")


def test_an_approval_of_an_older_hash_keeps_a_newer_change_held() -> None:
    v1, v2, v3 = (definition_hash(d, {}) for d in ("v1", "v2", "v3"))
    assert approve(Pin(v2, v1, Hold("changed", ["description"])), v2) == Pin(v2, v2)
    assert approve(Pin(v3, v1, Hold("changed", ["description"])), v2).hold == Hold("changed", ["description"])


def test_rows_from_before_pinning_approve_what_is_listed_now() -> None:
    v1 = definition_hash("v1", {})
    assert approvals([("old", None, None), ("new", v1, None)], {"old": v1}) == {"old": v1, "new": None}
