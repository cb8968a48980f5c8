"""The REST protocol translator (``toolmesh_session_worker.upstream.translation``): tool lists,
execution requests, error objects, results, and the error table."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from toolmesh.categories import ToolCategory
from toolmesh.errors import ExecutionFailed, ServerUnavailable, ToolNotFound
from toolmesh_session_worker.upstream.translation import (
    MCPConnectionError,
    MCPProtocolError,
    MCPToolNotFoundError,
    ToolExecutionError,
    as_error,
    domain_tool_execution_to_mcp,
    domain_tool_to_mcp,
    failure_to_mcp,
    is_error_object,
    mcp_error_to_exception,
    mcp_tool_to_domain,
    mcp_tools_response_to_domain,
    result_to_mcp,
)

SEARCH = {
    "name": "search_memory",
    "description": "Search semantic memories",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def test_a_tool_gets_its_category_and_an_object_schema() -> None:
    tool = mcp_tool_to_domain(SEARCH)
    assert tool.original_name == "search_memory" and tool.category is ToolCategory.MEMORY
    assert tool.input_schema == SEARCH["inputSchema"]
    bare = mcp_tool_to_domain({"name": "echo", "description": "Echo"})
    assert bare.input_schema == {"type": "object"}
    assert mcp_tool_to_domain({**SEARCH, "inputSchema": {"properties": {}}}).input_schema["type"] == "object"
    assert domain_tool_to_mcp(tool) == SEARCH


def test_a_tools_response_translates_every_tool() -> None:
    tools = mcp_tools_response_to_domain({"tools": [SEARCH, {"name": "echo", "description": "Echo"}]})
    assert [t.original_name for t in tools] == ["search_memory", "echo"]
    assert mcp_tools_response_to_domain({"tools": []}) == []


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ([SEARCH], "must be a JSON object"),
        ({"items": [SEARCH]}, "has no 'tools' field"),
        ({"tools": {"name": "x"}}, "'tools' must be a list, not dict"),
        ({"tools": [SEARCH, "echo"]}, "tools[1] must be an object, not str"),
        ({"tools": [SEARCH, {"description": "no name"}]}, "tools[1] has no 'name'"),
        ({"tools": [{"name": "", "description": "d"}]}, "tools[0]: 'name' must be a non-empty string"),
        ({"tools": [SEARCH, {"name": "mystery"}]}, "tools[1] 'mystery' has no 'description'"),
        ({"tools": [{"name": "x", "description": 3}]}, "'description' must be a non-empty string"),
        ({"tools": [{**SEARCH, "inputSchema": []}]}, "'inputSchema' must be an object"),
        ({"tools": [{**SEARCH, "inputSchema": {"type": "string"}}]}, "must describe an object"),
    ],
)
def test_a_malformed_tools_response_is_rejected_naming_the_problem(response: Any, problem: str) -> None:
    with pytest.raises(MCPProtocolError) as raised:
        mcp_tools_response_to_domain(response)
    assert problem in str(raised.value)


def test_an_execution_request_has_a_fresh_uuid4_request_id() -> None:
    first = domain_tool_execution_to_mcp("search_memory", {"query": "test", "limit": 5})
    second = domain_tool_execution_to_mcp("search_memory", {"query": "test", "limit": 5})
    assert first["tool"] == "search_memory" and first["arguments"] == {"query": "test", "limit": 5}
    assert uuid.UUID(first["requestId"]).version == 4 and first["requestId"] != second["requestId"]


def test_tool_execution_failed_becomes_an_execution_error_naming_the_tool() -> None:
    error = {"error": {"code": "TOOL_EXECUTION_FAILED", "message": "Timeout", "details": {"tool": "slow_tool"}}}
    exc = mcp_error_to_exception(error)
    assert isinstance(exc, ToolExecutionError)
    assert exc.tool_name == "slow_tool" and exc.error_message == "Timeout"
    assert str(exc) == "Tool execution failed (slow_tool): Timeout"
    without_tool = mcp_error_to_exception({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "m"}}, "called")
    assert isinstance(without_tool, ToolExecutionError) and without_tool.tool_name == "called"


def test_other_error_codes_are_protocol_errors() -> None:
    exc = mcp_error_to_exception({"error": {"code": "RATE_LIMITED", "message": "slow down", "details": {"n": 1}}})
    assert isinstance(exc, MCPProtocolError) and str(exc) == "RATE_LIMITED: slow down"
    assert exc.details == {"code": "RATE_LIMITED", "n": 1}


@pytest.mark.parametrize("answer", [{"result": 1}, {"error": "text"}, {"error": {"code": 5, "message": "m"}}, None])
def test_a_malformed_error_object_is_a_protocol_error(answer: Any) -> None:
    with pytest.raises(MCPProtocolError):
        mcp_error_to_exception(answer)


def test_error_objects_are_told_from_results() -> None:
    assert is_error_object({"error": {"code": "X", "message": "m"}})
    assert not is_error_object({"error": {"code": "X"}, "results": []})  # a result that has an "error" field
    assert not is_error_object({"error": None})
    assert not is_error_object([{"error": {}}])


def test_results_become_call_tool_results() -> None:
    assert result_to_mcp({"results": ["a"]}) == {
        "content": [{"type": "text", "text": '{"results": ["a"]}'}],
        "isError": False,
        "structuredContent": {"results": ["a"]},
    }
    assert result_to_mcp(5) == {"content": [{"type": "text", "text": "5"}], "isError": False}
    failed = failure_to_mcp(ToolExecutionError("fail", "the disk is full"))
    assert (
        failed["isError"] is True and failed["content"][0]["text"] == "Tool execution failed (fail): the disk is full"
    )


def test_the_spec_exceptions_map_onto_the_error_table() -> None:
    missing = as_error(MCPToolNotFoundError("nope", ["a", "b"]), "toolbox", "nope")
    assert isinstance(missing, ToolNotFound) and missing.status == 404
    assert missing.context["available"] == ["a", "b"] and "Available tools: a, b" in missing.detail
    failed = as_error(ToolExecutionError("explode", "boom"), "toolbox", "explode")
    assert isinstance(failed, ExecutionFailed) and failed.body()["error_code"] == "EXECUTION_FAILED"
    assert "Tool execution failed (explode): boom" in failed.detail and failed.context["tool"] == "explode"
    broken = as_error(MCPProtocolError("HTTP 500", {"http_status": 500}), "toolbox", "x")
    assert isinstance(broken, ExecutionFailed) and broken.context["http_status"] == 500
    assert "protocol error" in broken.detail
    gone = as_error(MCPConnectionError("refused"), "toolbox")
    assert isinstance(gone, ServerUnavailable) and gone.status == 503
