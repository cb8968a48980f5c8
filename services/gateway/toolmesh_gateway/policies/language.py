"""The policy language: CEL over a call's attributes, checked when a policy is written.

Only the attributes below may be named; only CEL's standard functions may be called; an expression
whose value is detectably not a boolean (a literal, arithmetic, a string) is refused. A check that
only the call can decide (a missing field, a wrong type) is a runtime error, which ``decisions``
settles (a missing field: no match; a wrong type: a restricting rule fails closed).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import cel

from toolmesh.errors import ValidationFailed

ATTRIBUTES = ("principal", "endpoint", "surface", "server", "tool", "args", "now")
"""The variables of an expression: ``principal`` {id, name, role, namespace, claims}, ``endpoint``
(the endpoint's name, "" outside one), ``surface`` (rest, mcp, nats, code), ``server`` {id, name,
namespace}, ``tool`` {name, annotations, category, skills}, ``args`` (the call's arguments) and
``now`` (a timestamp, UTC)."""
_TYPE_NAMES = frozenset({"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type"})
_FUNCTIONS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "has", "int", "uint", "double", "string",
        "bool", "bytes", "duration", "timestamp", "type", "dyn", "all", "exists", "exists_one", "map",
        "filter", "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds",
    }
)  # fmt: skip
_BOUND = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
SAMPLE: dict[str, Any] = {
    "principal": {"id": "", "name": "", "role": "user", "namespace": "default", "claims": {}},
    "endpoint": "",
    "surface": "rest",
    "server": {"id": "", "name": "", "namespace": "default"},
    "tool": {"name": "", "annotations": {}, "category": "general", "skills": []},
    "args": {},
    "now": datetime(2026, 1, 1, tzinfo=UTC),
}
"""A call with every attribute present, on which an expression's type is probed when it is written."""


def compile_expression(expression: str) -> cel.Program:
    """The compiled program of a policy's ``expression``; ``ValidationFailed`` (422) when it does not
    parse, names an unknown attribute or function, or detectably is not a boolean."""
    try:
        program = cel.compile(expression)
    except Exception as exc:  # the library raises ValueError for syntax, others for what it cannot build
        raise _invalid(expression, f"does not parse: {exc}") from exc
    bound = set(_BOUND.findall(expression))
    unknown = sorted(set(program.variables()) - set(ATTRIBUTES) - _TYPE_NAMES - bound)
    if unknown:
        raise _invalid(expression, f"unknown attributes {unknown}; known: {list(ATTRIBUTES)}")
    functions = sorted(f for f in program.functions() if f not in _FUNCTIONS and f[0] not in "_@!")
    if functions:
        raise _invalid(expression, f"unknown functions {functions}")
    try:
        value = program.execute(cel.Context(SAMPLE))
    except Exception:  # a field the sample lacks: only a real call decides, as a runtime error
        return program
    if not isinstance(value, bool):
        raise _invalid(expression, f"evaluates to {type(value).__name__}, not to a boolean")
    return program


def _invalid(expression: str, why: str) -> ValidationFailed:
    return ValidationFailed(f"The policy expression {why}", {"field": "expression", "expression": expression})
