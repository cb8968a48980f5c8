"""Public tool names of the MCP front door's "all tools" mode (``front_door.names``)."""

from __future__ import annotations

import random

import pytest

from toolmesh_gateway.front_door.names import MAX_LENGTH, VALID_NAME, NameMap, candidate_name, sanitize

pytestmark = pytest.mark.unit


def test_plain_names_keep_server_separator_tool() -> None:
    names = NameMap.build([("github", "create_issue"), ("fs", "read-file")])
    assert names.public("github", "create_issue") == "github__create_issue"
    assert names.public("fs", "read-file") == "fs__read-file"
    assert names.resolve("github__create_issue") == ("github", "create_issue")


def test_dotted_and_other_invalid_characters_are_replaced_and_map_back() -> None:
    names = NameMap.build([("api", "api.v2.create"), ("web", "fetch url/😀")])
    dotted = names.public("api", "api.v2.create")
    assert dotted == "api__api_v2_create"
    assert names.resolve(dotted) == ("api", "api.v2.create")
    other = names.public("web", "fetch url/😀")
    assert other is not None and VALID_NAME.match(other)
    assert names.resolve(other) == ("web", "fetch url/😀")


def test_collisions_keep_the_exact_name_and_hash_the_lossy_one() -> None:
    pairs = [("api", "v2.create"), ("api", "v2_create"), ("api", "v2 create")]
    names = NameMap.build(pairs)
    assert names.public("api", "v2_create") == "api__v2_create"  # exact: nothing replaced
    lossy = {names.public("api", "v2.create"), names.public("api", "v2 create")}
    assert len(lossy) == 2 and "api__v2_create" not in lossy
    for name in lossy:
        assert name is not None and name.startswith("api__v2_create_") and VALID_NAME.match(name)
    assert {names.resolve(n) for n in names.by_public} == set(pairs)


def test_two_lossy_names_that_collide_both_get_hashes() -> None:
    names = NameMap.build([("s", "a.b"), ("s", "a b")])
    assert len({names.public("s", "a.b"), names.public("s", "a b")}) == 2
    assert "s__a_b" not in names.by_public


def test_separator_inside_server_names_cannot_steal_a_name() -> None:
    names = NameMap.build([("a__b", "c"), ("a", "b__c")])
    assert len(names.by_public) == 2
    assert {names.resolve(n) for n in names.by_public} == {("a__b", "c"), ("a", "b__c")}


@pytest.mark.parametrize(
    ("victim", "intruder"),
    [
        (("team__db", "echo"), ("team", "db__echo")),  # a tool whose own name holds the separator
        (("team", "db__echo"), ("team__db", "echo")),  # a server whose name holds it
        (("a_", "b"), ("a", "_b")),  # the separator straddling server and tool: a___b both ways
    ],
)
def test_a_later_server_cannot_take_or_move_a_public_name(victim: tuple[str, str], intruder: tuple[str, str]) -> None:
    before = NameMap.build([victim, ("other", "tool")]).public(*victim)
    after = NameMap.build([victim, intruder, ("other", "tool")])
    assert after.public(*victim) == before and after.resolve(before or "") == victim
    assert after.public(*intruder) != before
    readable = f"{victim[0]}__{victim[1]}"
    assert after.resolve(readable) is None  # the name both could read as belongs to neither


def test_long_names_are_shortened_deterministically_with_a_hash() -> None:
    tool = "x" * 100
    names = NameMap.build([("server", tool), ("server", tool + "y")])
    first, second = names.public("server", tool), names.public("server", tool + "y")
    assert first is not None and second is not None and first != second
    assert len(first) == MAX_LENGTH and len(second) == MAX_LENGTH
    assert VALID_NAME.match(first) and first.startswith("server__xxx")
    assert NameMap.build([("server", tool)]).public("server", tool) == first


def test_names_do_not_depend_on_order_and_round_trip() -> None:
    pairs = [(f"s{i % 3}", name) for i, name in enumerate(["a.b", "a_b", "a b", "q" * 80, "ok", "é", "e"])]
    reference = NameMap.build(pairs).by_public
    for seed in range(5):
        shuffled = pairs[:]
        random.Random(seed).shuffle(shuffled)
        names = NameMap.build(shuffled)
        assert names.by_public == reference
        assert all(VALID_NAME.match(n) for n in names.by_public)
        assert all(names.resolve(names.public(*pair) or "") == pair for pair in pairs)


def test_separator_is_configurable() -> None:
    names = NameMap.build([("fs", "read")], separator="-")
    assert names.public("fs", "read") == "fs-read" and names.resolve("fs-read") == ("fs", "read")
    assert candidate_name("fs", "a.b", "_") == ("fs_a_b", False)
    assert sanitize("a.b/c d") == "a_b_c_d"
