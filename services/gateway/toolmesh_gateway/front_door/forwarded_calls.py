"""A tool call the front door forwards to its upstream itself (a relayed 2026-07-28 call, a transparent
``/mcp/{server}`` call): screened by the policies and admission like every call, audited, redacted.

A relayed call may take several rounds (the upstream's ``InputRequiredResult``, the client's retry):
the policies check each, but a call approved in one round is not held for approval again (its sealed
state says it was approved: ``relayed_states``). A 2026-07-28 client's call is screened inside the
``InputBridge`` when it starts (``forward_call``), so a policy's approval question reaches the client's
user as an input request; its retry resumes the parked call, which is not screened again."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from mcp.shared.exceptions import MCPError

from toolmesh.errors import ToolmeshError
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.front_door.client_links import Ctx
from toolmesh_gateway.front_door.upstream_requests import UpstreamRequests, upstream_params
from toolmesh_gateway.policies.checks import PASSED, CallSubject, Verdict, refusal
from toolmesh_gateway.policies.result_fields import redact_result
from toolmesh_gateway.tool_calls import ToolCalls


async def forward_screened(
    calls: ToolCalls,
    call: CallSubject,
    forward: Callable[[Verdict], Awaitable[dict[str, Any]]],
    timeout: float | None = None,
    approved: bool = False,
) -> dict[str, Any]:
    """``forward(verdict)``'s result once ``call`` passed its policies (``ToolCalls.policies``) and
    ``ToolCalls.admit`` and got a slot, without the fields its policies redact; every outcome is
    audited (a result once it was scanned for poisoning). ``approved``: the call was approved in an
    earlier round (no approval is asked again); ``forward`` gets the verdict (whether the call is
    approved now, what a task's result must lose). Refusals raise (``PolicyDenied``, ``RateLimited``,
    ``QuotaExceeded``, ``SHED``), as do the upstream's own errors (``MCPError``)."""
    started = time.perf_counter()
    verdict = PASSED
    try:
        verdict = await calls.policies.check(call, approved=approved)
        await calls.admit(call.caller, call.server)
        async with calls.slot(call.caller, timeout):
            result = await forward(verdict)
    except ToolmeshError as exc:
        calls.record(call.caller, call.server, call.tool, started, "failed", exc.error_code, refusal(exc, verdict))
        raise
    except MCPError as exc:
        calls.record(call.caller, call.server, call.tool, started, "failed", str(exc.error.code), verdict)
        raise
    outcome = "tool_error" if result.get("isError") else "ok"
    calls.record(call.caller, call.server, call.tool, started, outcome, None, verdict, result=result)
    return redact_result(result, verdict.redact)


async def forward_call(
    calls: ToolCalls,
    upstream: UpstreamRequests,
    ctx: Ctx,
    server: CatalogServer,
    call: CallSubject,
    timeout: float | None,
) -> dict[str, Any]:
    """``tools/call`` of ``call.tool`` that the front door forwards itself, screened: in the ``InputBridge``
    when ``UpstreamRequests.screens_in_bridge`` says so (the policies' gate may ask ``call``'s client), else
    directly, not held again when the retry's state says the call was approved."""
    params = upstream_params(ctx, name=call.tool)
    if upstream.screens_in_bridge(ctx, server, "tools/call", params):
        return await upstream.forward_bridged(
            ctx,
            server,
            "tools/call",
            params,
            lambda forward, client: forward_screened(calls, replace(call, client=client), forward, timeout),
        )
    return await forward_screened(
        calls,
        call,
        lambda verdict: upstream.forward(ctx, server, "tools/call", params, verdict),
        timeout,
        upstream.approved_before(ctx, server),
    )
