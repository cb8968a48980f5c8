"""Tool categories inferred from names and descriptions (``toolmesh.categories``)."""

from __future__ import annotations

import pytest

from toolmesh.categories import ToolCategory, categorize, words


@pytest.mark.parametrize(
    ("name", "description", "category"),
    [
        ("search_memory", "Search semantic memories", ToolCategory.MEMORY),  # the spec's example
        ("store_memory", "Remember a fact for later", ToolCategory.MEMORY),
        ("read_file", "Read a file from disk", ToolCategory.FILE),
        ("list_directory", None, ToolCategory.FILE),
        ("create_pull_request", "Open a pull request on GitHub", ToolCategory.CODE),
        ("send_email", "Send an email message", ToolCategory.COMMUNICATION),
        ("postSlackMessage", None, ToolCategory.COMMUNICATION),
        ("run_sql", "Run a SQL statement against the database", ToolCategory.DATA),
        ("fetch", "Fetch a URL and return the page", ToolCategory.WEB),
        ("run_command", "Run a shell command", ToolCategory.SYSTEM),
        ("search_tools", "Find tools by what they do", ToolCategory.SEARCH),
        ("echo", "Return the text unchanged", ToolCategory.GENERAL),
        ("add", "Add two numbers", ToolCategory.GENERAL),
    ],
)
def test_category_of_common_tools(name: str, description: str | None, category: ToolCategory) -> None:
    assert categorize(name, description) is category


def test_a_tie_goes_to_the_more_specific_category() -> None:
    # "search" and "file" score the same on the name; file is listed before search.
    assert categorize("search_files") is ToolCategory.FILE
    assert categorize("web_search", "Search the web") is ToolCategory.WEB


def test_the_name_outweighs_the_description() -> None:
    assert categorize("send_email", "Look up the address, then send") is ToolCategory.COMMUNICATION
    assert categorize("lookup", "Look up a contact to send an email to") is ToolCategory.SEARCH


def test_short_words_match_only_whole() -> None:
    assert categorize("get_report", "Get a sales report") is ToolCategory.GENERAL  # "repo" is no prefix
    assert categorize("clone_repo") is ToolCategory.CODE


def test_words_split_every_naming_style() -> None:
    assert words("getUserData") == ["get", "user", "data"]
    assert words("github.create-issue_now") == ["github", "create", "issue", "now"]
    assert words("") == []
