"""A 2026-07-28 upstream's ``InputRequiredResult`` answered for a client that cannot answer it itself.

A handshake-era client (or toolmesh's own request) reaches an upstream that speaks only the
2026-07-28 era with no ``_meta`` envelope of its own. When the upstream needs input (sampling,
elicitation, roots), each of its ``inputRequests`` is put to the client as the handshake era puts
them, through ``ClientSide`` (the request whose call it is, ``call_id``), and the request is sent
again with the answers and the upstream's ``requestState``, until the upstream answers for good:
the client sees one call, as with a handshake-era upstream.

Toolmesh's own requests (``call_id`` None: discovery's lists) have no client to ask: their input
requests are refused, never put to whichever client happens to have a call in flight on the upstream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types

from toolmesh_session_worker.upstream.client_side import ClientSide
from toolmesh_session_worker.upstream.errors import UpstreamError, UpstreamTimeout

MAX_ROUNDS = 10
"""How many times an upstream may ask for input within one request before toolmesh gives up."""
MAX_QUESTIONS = 16
"""How many input requests one round may carry."""
_ASKABLE = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
Send = Callable[[dict[str, Any], float], Awaitable[dict[str, Any]]]
"""Sends the request with these params within this many seconds and returns the raw result."""


async def completed(
    server_name: str,
    what: str,
    params: dict[str, Any],
    send: Send,
    *,
    client_side: ClientSide | None,
    call_id: str | None,
    timeout: float,
) -> dict[str, Any]:
    """The upstream's final result for a request with ``params`` (``timeout`` for every round and every
    question together).

    Raises:
        UpstreamTimeout: no final answer within ``timeout``.
        UpstreamError: the upstream asked too often or something the client cannot be asked, or the
            client refused a question (its JSON-RPC error code).
    """
    deadline = anyio.current_time() + timeout
    asking = params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    for round_ in range(MAX_ROUNDS + 1):
        result = await send(params, _left(server_name, what, deadline, timeout))
        if result.get("resultType") != "input_required":
            return result
        if round_ == MAX_ROUNDS:  # no client is asked a question whose answer would never be sent
            break
        questions = result.get("inputRequests") or {}
        state = result.get("requestState")
        if not isinstance(questions, dict) or (state is not None and not isinstance(state, str)):
            raise _refused(server_name, what, "an input-required answer that is not one")
        asked = _checked(server_name, what, questions)
        with anyio.move_on_after(_left(server_name, what, deadline, timeout)):
            answers = {key: await _ask(server_name, what, q, client_side, call_id) for key, q in asked}
            params = {**asking, "inputResponses": answers}  # this round's state only, if it has one
            if state is not None:
                params["requestState"] = state
            continue
        _left(server_name, what, deadline, timeout)  # raises: the client took the time
    raise _refused(server_name, what, f"the upstream asked for input more than {MAX_ROUNDS} times")


def _checked(server_name: str, what: str, questions: dict[Any, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The round's input requests, at most ``MAX_QUESTIONS`` of them."""
    if len(questions) > MAX_QUESTIONS:
        raise _refused(server_name, what, f"more than {MAX_QUESTIONS} input requests in one round")
    return [(str(key), q if isinstance(q, dict) else {}) for key, q in questions.items()]


async def _ask(
    server_name: str, what: str, question: dict[str, Any], client_side: ClientSide | None, call_id: str | None
) -> dict[str, Any]:
    """The client's answer to one input request."""
    method = question.get("method")
    params = question.get("params")
    if method not in _ASKABLE or (params is not None and not isinstance(params, dict)):
        raise _refused(server_name, what, "an input request toolmesh cannot put to a client")
    if client_side is None or call_id is None:  # no client's request: nobody may be asked
        raise _refused(server_name, what, f"{method} is not supported")
    answer = await client_side.request(str(method), params, call_id)
    error = answer.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        code = code if isinstance(code, int) else mcp_types.INTERNAL_ERROR
        words = f"the client refused {method} while {what}"
        raise UpstreamError(f"{server_name}: {words}: {error.get('message')}", code=code, summary=words)
    return answer


def _left(server_name: str, what: str, deadline: float, timeout: float) -> float:
    left = deadline - anyio.current_time()
    if left <= 0:
        words = f"timed out after {timeout}s while {what}"
        raise UpstreamTimeout(f"{server_name}: {words}", summary=words)
    return left


def _refused(server_name: str, what: str, words: str) -> UpstreamError:
    return UpstreamError(f"{server_name}: {words} while {what}", summary=f"{words} while {what}")
