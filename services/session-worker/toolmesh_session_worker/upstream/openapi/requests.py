"""The HTTP request a tool call makes (no I/O): method, URL under the API's base, query, headers,
JSON body, and the credentials the operation's security requirement asks for.

A path parameter's value is percent-encoded whole (``/`` as ``%2F``, and a value of ``.`` or ``..``
as ``%2E``), so no value can reach another path than the operation's.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from toolmesh.contracts.headers import header_problem, header_value_problem
from toolmesh_session_worker.upstream.openapi.operations import Operation

HEADERS_PREFIX = "'headers': "


class ArgumentProblem(ValueError):
    """The arguments of a call cannot make the operation's request (a required one is missing)."""


@dataclass
class HttpCall:
    """One request, ready to send."""

    method: str
    url: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False
    bearer: bool = False
    """Whether the request carries the OAuth grant's access token (``build_call``'s ``oauth`` scheme)."""


@dataclass(frozen=True)
class SecurityScheme:
    """A security scheme of the document toolmesh can apply: an API key (in a header, the query or a
    cookie), or HTTP bearer or basic."""

    kind: str
    """``apiKey``, ``bearer`` or ``basic``."""
    name: str = ""
    location: str = ""


def security_schemes(document: Mapping[str, Any]) -> dict[str, SecurityScheme]:
    """The schemes of ``components.securitySchemes`` toolmesh can apply (OAuth and OpenID Connect are
    not, nor an API key in a header or cookie whose name is no sendable header name: not an RFC 9110
    token, or a hop-by-hop or framing header)."""
    components = document.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    found: dict[str, SecurityScheme] = {}
    for name, scheme in (schemes if isinstance(schemes, dict) else {}).items():
        if not isinstance(scheme, dict):
            continue
        kind = scheme.get("type")
        if (
            kind == "apiKey"
            and isinstance(scheme.get("name"), str)
            and scheme.get("in") in ("header", "query", "cookie")
            and (scheme["in"] == "query" or header_problem(1, scheme["name"]) is None)
        ):
            found[str(name)] = SecurityScheme("apiKey", scheme["name"], scheme["in"])
        elif kind == "http" and str(scheme.get("scheme", "")).lower() in ("bearer", "basic"):
            found[str(name)] = SecurityScheme(str(scheme["scheme"]).lower())
    return found


def encode_segment(value: Any) -> str:
    """A path parameter's value as one path segment that no value can leave."""
    text = _text(value)
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return quote(text, safe="")


def build_call(
    operation: Operation,
    arguments: Mapping[str, Any],
    base_url: str,
    schemes: Mapping[str, SecurityScheme],
    credentials: Mapping[str, str],
    oauth: str | None = None,
) -> HttpCall:
    """The request ``operation`` makes with ``arguments`` (``oauth``: the security scheme the server's
    OAuth grant is for, see ``_authenticate``).

    Raises:
        ArgumentProblem: a required argument is missing.
    """
    path = operation.path
    call = HttpCall(operation.method, "")
    for parameter in operation.parameters:
        if parameter.argument not in arguments or arguments[parameter.argument] is None:
            if parameter.required:
                raise ArgumentProblem(f"missing required argument '{parameter.argument}'")
            continue
        value = arguments[parameter.argument]
        if parameter.location == "path":
            path = path.replace("{" + parameter.name + "}", encode_segment(value))
        elif parameter.location == "query":
            values = value if isinstance(value, list) else [value]
            call.params.extend((parameter.name, _text(v)) for v in values)
        else:
            text = _text(value)
            if problem := header_value_problem(parameter.name, text):
                raise ArgumentProblem(f"argument '{parameter.argument}': {problem.removeprefix(HEADERS_PREFIX)}")
            call.headers[parameter.name] = text
    if operation.body is not None and operation.body in arguments:
        call.body, call.has_body = arguments[operation.body], True
    elif operation.body is not None and operation.body in operation.definition["inputSchema"].get("required", []):
        raise ArgumentProblem(f"missing required argument '{operation.body}'")
    call.url = base_url.rstrip("/") + path
    _authenticate(call, operation, schemes, credentials, oauth)
    return call


def _authenticate(
    call: HttpCall,
    operation: Operation,
    schemes: Mapping[str, SecurityScheme],
    credentials: Mapping[str, str],
    oauth: str | None,
) -> None:
    """Apply the first alternative of the operation's security requirement whose every scheme has
    credentials; else the first one naming ``oauth`` whose other schemes have credentials, with the
    grant's token (``bearer``)."""
    for alternative in operation.security:
        if all(name in schemes and name in credentials for name in alternative):
            for name in alternative:
                _apply(call, schemes[name], credentials[name])
            return
    for alternative in operation.security if oauth is not None else ():
        others = [name for name in alternative if name != oauth]
        if oauth in alternative and all(name in schemes and name in credentials for name in others):
            for name in others:
                _apply(call, schemes[name], credentials[name])
            call.bearer = True
            return


def _apply(call: HttpCall, scheme: SecurityScheme, secret: str) -> None:
    if scheme.kind == "bearer":
        call.headers["Authorization"] = f"Bearer {secret}"
    elif scheme.kind == "basic":
        call.headers["Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
    elif scheme.location == "header":
        call.headers[scheme.name] = secret
    elif scheme.location == "query":
        call.params.append((scheme.name, secret))
    else:
        cookie = f"{scheme.name}={secret}"
        call.headers["Cookie"] = f"{call.headers['Cookie']}; {cookie}" if "Cookie" in call.headers else cookie


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
