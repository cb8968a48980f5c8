"""A tool call the front door forwards to its upstream itself (a relayed 2026-07-28 call, a transparent
``/mcp/{server}`` call): screened by the policies and admission like every call, audited, redacted."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.shared.exceptions import MCPError

from toolmesh.errors import ToolmeshError
from toolmesh_gateway.policies.checks import PASSED, CallSubject, refusal
from toolmesh_gateway.policies.result_fields import redact_result
from toolmesh_gateway.tool_calls import ToolCalls


async def forward_screened(
    calls: ToolCalls,
    call: CallSubject,
    forward: Callable[[], Awaitable[dict[str, Any]]],
    timeout: float | None = None,
) -> dict[str, Any]:
    """``forward()``'s result once ``call`` passed its policies (``ToolCalls.policies``) and
    ``ToolCalls.admit`` and got a slot, without the fields its policies redact; every outcome is
    audited. Refusals raise (``PolicyDenied``, ``RateLimited``, ``QuotaExceeded``, ``SHED``), as do
    the upstream's own errors (``MCPError``)."""
    started = time.perf_counter()
    verdict = PASSED
    try:
        verdict = await calls.policies.check(call)
        await calls.admit(call.caller, call.server)
        async with calls.slot(call.caller, timeout):
            result = await forward()
    except ToolmeshError as exc:
        calls.record(call.caller, call.server, call.tool, started, "failed", exc.error_code, refusal(exc, verdict))
        raise
    except MCPError as exc:
        calls.record(call.caller, call.server, call.tool, started, "failed", str(exc.error.code), verdict)
        raise
    outcome = "tool_error" if result.get("isError") else "ok"
    calls.record(call.caller, call.server, call.tool, started, outcome, None, verdict)
    return redact_result(result, verdict.redact)
