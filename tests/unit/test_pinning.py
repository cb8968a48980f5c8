"""Tool-definition pinning as pure rules: hashes, holds, approvals, the new-tools policy."""

from __future__ import annotations

import pytest

from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.errors import Forbidden
from toolmesh.pinning import (
    Hold,
    Pin,
    approvals,
    approve,
    changed_fields,
    definition_hash,
    inherit,
    new_tools_policy,
    retired,
    review,
    screen,
    wire_definition_hash,
)

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


def test_a_live_tool_is_hashed_as_discovery_stores_it() -> None:
    wire = {"name": "q", "description": "Sea\x00rch", "inputSchema": SCHEMA, "annotations": {"title": "Q"}}
    assert wire_definition_hash(wire) == definition_hash("Search", SCHEMA)


def test_screen_shows_only_approved_pinned_definitions_of_a_live_list() -> None:
    v1, v2 = definition_hash("v1", {}), definition_hash("v2", {})
    pins = {"same": Pin(v1, v1), "silent": Pin(v1, v1), "held": Pin(v2, v1, Hold("changed", ["description"]))}
    screened = screen([("same", v1), ("silent", v2), ("held", v2), ("never_listed", v1)], pins)
    assert screened.shown == {("same", v1)}
    # a change the upstream did not announce, and a tool discovery never saw, are unrecorded;
    # a change discovery already holds is not
    assert screened.unrecorded == {("silent", v2), ("never_listed", v1)}
    assert screen([("held", v1)], pins).shown == frozenset()  # held stays held, even back at the approved one


def test_pins_left_by_a_removed_server_review_the_first_list_of_its_successor() -> None:
    v1, v2 = definition_hash("v1", {}), definition_hash("v2", {})
    left = retired([("echo", Pin(v2, v1, Hold("changed", ["description"]))), ("fresh", Pin(v1, None, Hold("new")))])
    assert left == {"echo": v1, "fresh": None}
    approved, first_list = inherit({}, first_list=True, left=left)
    pins = review(
        [("echo", v2), ("fresh", v1), ("other", v1)], approved, first_list=first_list, policy=NewToolsPolicy.REVIEW
    )
    assert pins["echo"].hold == Hold("changed", ["description"])
    assert pins["fresh"].hold == Hold("new") and pins["other"].hold == Hold("new")
    assert inherit({"echo": v1}, first_list=False, left=left) == ({"echo": v1}, False)  # only the first list
    assert inherit({}, first_list=True, left=None) == ({}, True)  # a name nobody removed: first list approved


@pytest.mark.parametrize("role", [Role.OWNER, Role.ADMIN])
def test_owners_and_admins_choose_the_new_tools_policy(role: Role) -> None:
    assert new_tools_policy(None, role) is NewToolsPolicy.AUTO
    assert new_tools_policy(NewToolsPolicy.REVIEW, role) is NewToolsPolicy.REVIEW


@pytest.mark.parametrize("role", [Role.AGENT, Role.USER])
def test_only_admins_choose_new_tools_auto(role: Role) -> None:
    assert new_tools_policy(None, role) is NewToolsPolicy.REVIEW
    assert new_tools_policy(NewToolsPolicy.REVIEW, role) is NewToolsPolicy.REVIEW
    with pytest.raises(Forbidden) as refused:
        new_tools_policy(NewToolsPolicy.AUTO, role)
    assert refused.value.status == 403 and refused.value.context["field"] == "new_tools"
