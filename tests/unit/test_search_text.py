"""What a tool is embedded and BM25-indexed by, and how BM25 splits text into terms (pure logic)."""

from __future__ import annotations

import pytest

from toolmesh.embed.text import dense_text, tool_text
from toolmesh.search.lexical import tokens

pytestmark = pytest.mark.unit


def test_dense_text_is_the_readable_name_and_description_only() -> None:
    assert dense_text("createIssue", " Open an issue. ") == "create issue: Open an issue."
    assert dense_text("get-weread-rank", None) == "get weread rank"
    schema = {"properties": {"repo_name": {}}}
    assert "repo" not in dense_text("createIssue", "Open an issue.")
    assert "repo name" in tool_text("github", "createIssue", "Open an issue.", schema)


def test_bm25_terms_are_lowercased_words_without_stop_words() -> None:
    assert tokens("Search the Web for a PDF_report, 2 pages") == ["search", "web", "pdf_report", "pages"]
    assert tokens("the a") == []
