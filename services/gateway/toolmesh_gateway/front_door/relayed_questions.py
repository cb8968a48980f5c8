"""What a 2026-07-28 upstream asks a client of that era, screened before the client sees it.

An upstream's ``InputRequiredResult`` (and a passed-through task's ``inputRequests``) reaches the
client as the upstream wrote it, but toolmesh is the intermediary: it passes on only input requests
of the era's three kinds (sampling, elicitation, roots), at most ``MAX_QUESTIONS`` of them, each
asking for what the client declared in the request's capabilities (a task's, in the call's).
Anything else is a broken or hostile upstream, and the request fails saying so (``-32603``) instead
of putting the question.
"""

from __future__ import annotations

from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError

from toolmesh_gateway.front_door.client_links import Ctx
from toolmesh_gateway.front_door.eras import envelope_of

MAX_QUESTIONS = 16
"""The most input requests one answer may carry (as for a handshake-era client)."""
NEEDS = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
"""Each kind of input request, and the client capability it needs."""


def screen_questions(ctx: Ctx, server: str, questions: object, *, declared_here: bool = True) -> None:
    """``-32603`` when ``questions`` (an answer's ``inputRequests``) is not what the client may be asked;
    ``declared_here``: the request itself declared what its client can answer (a ``tasks/get`` need
    not: the call that started the task did)."""
    if questions is None:
        return
    if not isinstance(questions, dict) or len(questions) > MAX_QUESTIONS:
        raise _refused(server, f"input requests that are not a map of at most {MAX_QUESTIONS}")
    declared = envelope_of(ctx).get(mcp_types.CLIENT_CAPABILITIES_META_KEY)
    declared = declared if isinstance(declared, dict) else {}
    for question in questions.values():
        method = question.get("method") if isinstance(question, dict) else None
        params = question.get("params") if isinstance(question, dict) else None
        if method not in NEEDS or (params is not None and not isinstance(params, dict)):
            raise _refused(server, "an input request that is not sampling, elicitation or roots")
        if declared_here and NEEDS[method] not in declared:
            raise _refused(server, f"{method}, which the request did not declare it can answer")


def _refused(server: str, what: str) -> MCPError:
    return MCPError(code=mcp_types.INTERNAL_ERROR, message=f"the upstream {server} asked for {what}")


def screened_answer(ctx: Ctx, server: str, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` when its input requests (if any) pass ``screen_questions``."""
    if answer.get("resultType") == "input_required" or "inputRequests" in answer:
        screen_questions(ctx, server, answer.get("inputRequests"))
    return answer
