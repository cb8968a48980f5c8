"""The fuzz run's check (loaded by schemathesis through ``SCHEMATHESIS_HOOKS``): no 5xx that is
toolmesh's own fault.

A 5xx passes only when it is the contract's answer about an upstream's state: the error body of
the contract with a code of ``UPSTREAM_STATES`` at that code's status (``SERVER_UNAVAILABLE`` 503
for a refresh of a server that is still connecting, say). A 500, or any 5xx without that body, fails.

Loading it also gives the schemathesis process a deeper Python stack: its coverage phase recurses
deep into the schema and, from there, hypothesis parses a whole module (``ast.parse``) to describe a
filter; near the default limit that parse runs out of stack (CPython 3.11.7 reports it as
``SystemError: AST constructor recursion depth mismatch``) and the run ends with a runtime error
that says nothing about toolmesh (seen once in CI).
"""

from __future__ import annotations

import sys
from typing import Any

import schemathesis

from toolmesh.errors import ERROR_TYPES

FUZZ_RECURSION_LIMIT = 10_000
sys.setrecursionlimit(max(sys.getrecursionlimit(), FUZZ_RECURSION_LIMIT))

UPSTREAM_STATES = frozenset(
    {
        "SERVER_UNAVAILABLE",
        "SERVER_CONNECTION_FAILED",
        "SESSION_NOT_FOUND",
        "EXECUTION_FAILED",
        "EXECUTION_TIMEOUT",
        "HEALTH_CHECK_FAILED",
    }
)


def fault_of(status: int, body: Any) -> str | None:
    """Why a response is a toolmesh fault, or None when it is not."""
    if status < 500:
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    if code in UPSTREAM_STATES and isinstance(body.get("detail"), str) and ERROR_TYPES[code].status == status:
        return None
    return f"HTTP {status} " + (f"with error_code {code}" if code else "without the contract's error body")


def response_fault(response: Any) -> str | None:
    """``fault_of`` a response (httpx's or schemathesis's) whose body may not be JSON."""
    try:
        body = response.json()
    except ValueError:
        body = None
    return fault_of(response.status_code, body)


@schemathesis.check
def no_toolmesh_fault(ctx: Any, response: Any, case: Any) -> bool | None:
    """Fail on a 5xx that is not the contract's report of an upstream's state."""
    fault = response_fault(response)
    if fault is not None:
        raise AssertionError(fault)
    return None
