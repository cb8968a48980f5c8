"""``search_tools`` cursors: bound to their search and the deployment's keys, refused when altered."""

from __future__ import annotations

import base64

import pytest

from toolmesh.errors import ValidationFailed
from toolmesh_gateway.front_door.search_cursor import SearchCursors

pytestmark = pytest.mark.unit
SEARCH = ["team-a", None, "echo the text", None, "tool", 3]


def _refusal(cursors: SearchCursors, search: object, cursor: str) -> str:
    with pytest.raises(ValidationFailed) as refused:
        cursors.offset(search, cursor, 100)
    [error] = refused.value.context["errors"]
    assert error["loc"] == ["cursor"]
    return str(error["msg"])


def test_a_cursor_names_its_page_of_its_search() -> None:
    cursors = SearchCursors([b"k" * 32])
    assert cursors.offset(SEARCH, cursors.issue(SEARCH, 30), 100) == 30


def test_a_cursor_of_another_search_or_namespace_is_refused() -> None:
    cursors = SearchCursors([b"k" * 32])
    cursor = cursors.issue(SEARCH, 30)
    for other in (["team-b", *SEARCH[1:]], [*SEARCH[:2], "echo", *SEARCH[3:]], [*SEARCH[:4], "server", 3]):
        assert "not a cursor" in _refusal(cursors, other, cursor)


def test_an_altered_or_foreign_cursor_is_refused() -> None:
    cursors = SearchCursors([b"k" * 32])
    raw = bytearray(base64.urlsafe_b64decode(cursors.issue(SEARCH, 30) + "=="))
    raw[1] = 90  # another offset under the same MAC
    altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    foreign = SearchCursors([b"x" * 32]).issue(SEARCH, 30)
    for cursor in (altered, foreign, "", "30", "!!!!", "A" * 24, altered + "AAAA"):
        assert "not a cursor" in _refusal(cursors, SEARCH, cursor), cursor


def test_a_cursor_outlives_a_key_rotation_and_stays_inside_the_window() -> None:
    old = SearchCursors([b"old" * 11])
    rotated = SearchCursors([b"new" * 11, b"old" * 11])
    assert rotated.offset(SEARCH, old.issue(SEARCH, 10), 100) == 10
    assert "outside the first 100" in _refusal(rotated, SEARCH, rotated.issue(SEARCH, 100))
    assert "outside the first 100" in _refusal(rotated, SEARCH, rotated.issue(SEARCH, 0))
