"""The nesting of a request body, measured on its bytes (the gateway refuses JSON nested too deep)."""

from __future__ import annotations

import json

import pytest

from toolmesh_gateway.json_depth import json_depth, looks_like_json


def nested(depth: int) -> bytes:
    value: object = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return json.dumps(value).encode()


@pytest.mark.parametrize("depth", [0, 1, 2, 64, 65, 300])
def test_the_depth_of_arrays_and_objects_in_turn(depth: int) -> None:
    assert json_depth(nested(depth)) == depth


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b'{"a": "[[[[[[[[", "b": "\\"[[[[{{{{", "c": "\\\\"}', 1),  # brackets in strings, escaped quotes
        (b'{"a": "\\\\", "b": [[[[1]]]]}', 5),  # an escaped backslash ends no string
        (b'["[", "{"]', 1),
        (b'"just a string"', 0),
        (b"", 0),
        (b"]]]", 0),
        (b'"unterminated [[[[', 0),
        (b"[" * 100_000 + b"]" * 100_000, 100_000),
    ],
)
def test_brackets_inside_strings_do_not_nest(body: bytes, depth: int) -> None:
    assert json_depth(body) == depth


def test_what_looks_like_json() -> None:
    assert looks_like_json(b' \n{"a": 1}') and looks_like_json(b"[1]")
    assert not looks_like_json(b"name=x") and not looks_like_json(b'"x"') and not looks_like_json(b"")
