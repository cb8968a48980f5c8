"""What a tool is embedded and BM25-indexed by, and how BM25 splits text into terms (pure logic)."""

from __future__ import annotations

import pytest

from toolmesh.embed.text import dense_text, parameter_descriptions, tool_text
from toolmesh.search.lexical import tokens, tool_fields

pytestmark = pytest.mark.unit


def test_dense_text_is_the_readable_name_and_description_only() -> None:
    assert dense_text("createIssue", " Open an issue. ") == "create issue: Open an issue."
    assert dense_text("get-weread-rank", None) == "get weread rank"
    schema = {"properties": {"repo_name": {}}}
    assert "repo" not in dense_text("createIssue", "Open an issue.")
    assert "repo name" in tool_text("github", "createIssue", "Open an issue.", schema)


def test_parameters_descriptions_follow_the_description_in_the_dense_text_and_in_bm25s_field() -> None:
    schema = {
        "properties": {
            "check_in": {"type": "string", "description": " Check-in date. "},
            "guests": {"description": "Number of adults"},
            "note": {"type": "string"},
            "flag": {"description": 3},
            "raw": "not a schema",
        }
    }
    assert parameter_descriptions(schema) == ["Check-in date", "Number of adults"]
    assert parameter_descriptions({"properties": ["a"]}) == [] and parameter_descriptions(None) == []
    text = "book room: Book a room. Parameters: Check-in date; Number of adults"
    assert dense_text("book_room", "Book a room.", schema) == text
    assert dense_text("book_room", "Book a room", schema) == text
    assert dense_text("book_room", None, schema) == "book room. Parameters: Check-in date; Number of adults"
    payload = {"original_name": "book_room", "description": "Book a room.", "input_schema": schema}
    assert tool_fields(payload)["description"] == "Book a room. Check-in date Number of adults"
    assert tool_fields(payload)["parameters"] == "check in guests note flag raw"


def test_bm25_terms_are_lowercased_words_without_stop_words() -> None:
    assert tokens("Search the Web for a PDF_report, 2 pages") == ["search", "web", "pdf_report", "pages"]
    assert tokens("the a") == []
