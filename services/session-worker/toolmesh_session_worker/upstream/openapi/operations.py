"""The operations of an OpenAPI document as tools (no I/O): name, description, input and output
schemas, and what a call must send where.

A tool is named by its ``operationId`` (characters outside ``[A-Za-z0-9_.-]`` become ``_``), else by
its method and path (``get_pets_petId``); a name taken twice gets ``_2``, ``_3``... Its arguments are
its path, query and header parameters by name (a name used in two places takes its place as a prefix:
``query_id``) and, for a JSON request body, ``body``. Operations whose path could leave the API's
base path (dot segments, ``?``, ``#``, backslashes, encoded slashes) are left out, and so is every
operation past the ``MAX_OPERATIONS``-th (a server keeps at most ``TOOLMESH_MAX_TOOLS_PER_SERVER``
tools anyway; a small document of hundreds of thousands of empty operations costs no more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolmesh.contracts.headers import header_problem
from toolmesh_session_worker.upstream.openapi.schemas import Dereferencer

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header")
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
"""Header parameters OpenAPI says to ignore (the media types and the security schemes set them)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 128
MAX_OPERATIONS = 10_000
"""The most operations of one document read as tools."""


@dataclass(frozen=True)
class Parameter:
    """One parameter: the argument that carries it, and its name and place in the request."""

    argument: str
    name: str
    location: str
    required: bool


@dataclass(frozen=True)
class Operation:
    """One operation of the document, as a tool and as the request a call makes."""

    tool: str
    method: str
    path: str
    tags: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    body: str | None
    """The argument carrying the JSON request body, if the operation takes one."""
    security: tuple[dict[str, Any], ...]
    """The alternatives of the operation's security requirement (each: scheme name → scopes)."""
    definition: dict[str, Any]
    """The MCP tool definition."""


@dataclass(frozen=True)
class Selection:
    """``include`` and ``exclude`` of a config: tags, and paths (a trailing ``*`` makes a prefix)."""

    include: dict[str, list[str]]
    exclude: dict[str, list[str]]

    def keeps(self, path: str, tags: tuple[str, ...]) -> bool:
        """Whether an operation on ``path`` with ``tags`` becomes a tool."""
        if self.include and not _matches(self.include, path, tags):
            return False
        return not (self.exclude and _matches(self.exclude, path, tags))


def _matches(selector: dict[str, list[str]], path: str, tags: tuple[str, ...]) -> bool:
    if any(tag in tags for tag in selector.get("tags", [])):
        return True
    return any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in selector.get("paths", []))


def unsafe_path(path: str) -> bool:
    """Whether a document's path could bend a request out of the API's base path."""
    lowered = path.lower()
    if not path.startswith("/") or any(c in path for c in "?#\\") or any(c in lowered for c in ("%2f", "%5c", "%2e")):
        return True
    return any(segment in (".", "..") for segment in path.split("/"))


def read_operations(document: dict[str, Any], selection: Selection) -> list[Operation]:
    """Every operation of ``document`` that ``selection`` keeps, as tools."""
    deref = Dereferencer(document)
    paths = document.get("paths")
    taken: set[str] = set()
    found: list[Operation] = []
    for path, item in (paths if isinstance(paths, dict) else {}).items():
        item = deref.resolve(item)
        if not isinstance(path, str) or unsafe_path(path) or not isinstance(item, dict):
            continue
        for method in METHODS:
            spec = item.get(method)
            if not isinstance(spec, dict):
                continue
            tags = (
                tuple(t for t in spec.get("tags", []) if isinstance(t, str))
                if isinstance(spec.get("tags"), list)
                else ()
            )
            if not selection.keeps(path, tags):
                continue
            name = _unique(_tool_name(spec.get("operationId"), method, path), taken)
            found.append(_operation(deref, document, name, method, path, tags, item, spec))
            if len(found) == MAX_OPERATIONS:
                return found
    return found


def _tool_name(operation_id: Any, method: str, path: str) -> str:
    if isinstance(operation_id, str) and operation_id.strip():
        name = _UNSAFE.sub("_", operation_id).strip("_.-")[:_MAX_NAME]
    else:
        name = re.sub("_+", "_", _UNSAFE.sub("_", f"{method}_{path}")).strip("_.-")[:_MAX_NAME]
    return name or method


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name[: _MAX_NAME - len(str(n)) - 1]}_{n}"
    taken.add(candidate)
    return candidate


def _operation(
    deref: Dereferencer,
    document: dict[str, Any],
    name: str,
    method: str,
    path: str,
    tags: tuple[str, ...],
    item: dict[str, Any],
    spec: dict[str, Any],
) -> Operation:
    properties: dict[str, Any] = {}
    required: list[str] = []
    parameters: list[Parameter] = []
    for raw in _parameters(deref, item, spec):
        location, pname = raw["in"], raw["name"]
        argument = pname if pname not in properties else f"{location}_{pname}"
        is_required = location == "path" or raw.get("required") is True
        schema = deref.schema(raw.get("schema", {}))
        schema = dict(schema) if isinstance(schema, dict) else {}
        if isinstance(raw.get("description"), str) and "description" not in schema:
            schema["description"] = raw["description"]
        properties[argument] = schema
        parameters.append(Parameter(argument, pname, location, is_required))
        if is_required:
            required.append(argument)
    body = _json_body(deref, spec)
    body_argument = None
    if body is not None:
        body_argument = "body" if "body" not in properties else "request_body"
        properties[body_argument] = body[0]
        if body[1]:
            required.append(body_argument)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    definition: dict[str, Any] = {"name": name, "inputSchema": input_schema}
    if description := _description(spec, method, path):
        definition["description"] = description
    if (output := _output_schema(deref, spec)) is not None:
        definition["outputSchema"] = output
    security = spec.get("security", document.get("security", []))
    alternatives = tuple(s for s in security if isinstance(s, dict)) if isinstance(security, list) else ()
    return Operation(name, method.upper(), path, tags, tuple(parameters), body_argument, alternatives, definition)


def _parameters(deref: Dereferencer, item: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The path item's parameters overridden by the operation's (same name and place), those toolmesh sends."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for source in (item.get("parameters"), spec.get("parameters")):
        for raw in source if isinstance(source, list) else []:
            param = deref.resolve(raw)
            if isinstance(param, dict) and isinstance(param.get("name"), str) and param.get("in") in LOCATIONS:
                if param["in"] == "header" and not _sendable_header(param["name"]):
                    continue
                merged[(param["in"], param["name"])] = param
    return list(merged.values())


def _sendable_header(name: str) -> bool:
    """Whether a header parameter is one toolmesh sends: not one OpenAPI ignores, and a valid field
    name that is no hop-by-hop or framing header the HTTP client sets (``Host``, ``Content-Length``...)."""
    return name.lower() not in IGNORED_HEADERS and header_problem(1, name) is None


def _json_body(deref: Dereferencer, spec: dict[str, Any]) -> tuple[Any, bool] | None:
    """The schema of the operation's JSON request body and whether it is required, or None."""
    body = deref.resolve(spec.get("requestBody"))
    if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
        return None
    for media, content in body["content"].items():
        if isinstance(media, str) and _is_json(media) and isinstance(content, dict):
            return deref.schema(content.get("schema", {})), body.get("required") is True
    return None


def _output_schema(deref: Dereferencer, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of the first 2xx answer when it describes an object (MCP's structured output)."""
    responses = spec.get("responses")
    for status, response in sorted(
        (responses if isinstance(responses, dict) else {}).items(), key=lambda kv: str(kv[0])
    ):
        if not str(status).startswith("2"):
            continue
        response = deref.resolve(response)
        content = response.get("content") if isinstance(response, dict) else None
        for media, entry in (content if isinstance(content, dict) else {}).items():
            if isinstance(media, str) and _is_json(media) and isinstance(entry, dict):
                schema = deref.schema(entry.get("schema", {}))
                return schema if isinstance(schema, dict) and schema.get("type") == "object" else None
        return None
    return None


def _is_json(media: str) -> bool:
    kind = media.split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def _description(spec: dict[str, Any], method: str, path: str) -> str:
    parts = [spec[k].strip() for k in ("summary", "description") if isinstance(spec.get(k), str) and spec[k].strip()]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    return "\n\n".join(parts) or f"{method.upper()} {path}"
