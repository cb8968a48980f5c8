"""How a server is reached: its transport and the ``connection_config`` that transport takes.

The rules a registration's ``connection_config`` must meet: the fields of each transport (BR-001),
TLS unless the host is loopback or ``allow_insecure`` is set, the egress policy, valid HTTP headers
(``contracts.headers``), a valid STDIO ``sandbox`` (``contracts.sandbox``), and text with a UTF-8
form, no NUL and no reference to toolmesh's own variables.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from toolmesh.contracts.headers import headers_problems
from toolmesh.contracts.openapi_config import OPENAPI_OPTIONAL, openapi_problems
from toolmesh.contracts.sandbox import sandbox_problems
from toolmesh.contracts.upstream_auth import auth_problems
from toolmesh.credentials import protected_references
from toolmesh.egress.policy import rest_base_problem, url_problem
from toolmesh.loopback import is_loopback_host
from toolmesh.storable import has_nul


class TransportType(StrEnum):
    """Upstream kinds: MCP over STDIO, SSE or Streamable HTTP (``HTTP``), plain REST tool servers
    (``GET /health``, ``GET /tools``, ``POST /tools/execute``), and HTTP APIs an OpenAPI 3.0/3.1
    document describes (``OPENAPI``: each operation is a tool)."""

    STDIO = "STDIO"
    SSE = "SSE"
    HTTP = "HTTP"
    REST = "REST"
    OPENAPI = "OPENAPI"


# Required and optional fields of connection_config per transport (BR-001).
CONFIG_FIELDS: dict[TransportType, tuple[str, dict[str, type]]] = {
    TransportType.STDIO: ("command", {"args": list, "env": dict, "cwd": str, "sandbox": dict}),
    TransportType.SSE: ("url", {"headers": dict, "auth": dict}),
    TransportType.HTTP: ("base_url", {"headers": dict, "auth": dict}),
    TransportType.REST: ("url", {"headers": dict, "auth": dict}),
    # ``spec_url`` or the document inline as ``spec`` (``contracts.openapi_config``).
    TransportType.OPENAPI: ("spec_url", OPENAPI_OPTIONAL),
}


def insecure_url_problem(field: str, url: str, allow_insecure: bool) -> str | None:
    """Why ``url`` breaks the TLS rule (https unless loopback or ``allow_insecure``), else None."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "https" or allow_insecure or is_loopback_host(parts.hostname):
        return None
    return (
        f"'{field}' must use https:// (TLS is required for remote upstreams); plain http:// is accepted only "
        'for a loopback host (127.0.0.0/8, ::1, localhost) or when the registration sets "allow_insecure": true'
    )


def upstream_url_problem(transport: TransportType, url: str) -> str | None:
    """What the egress policy refuses in ``url`` whoever registers it (``toolmesh.egress.policy``): a
    link-local or metadata host in any spelling, and for REST a URL that could bend to another path."""
    problem = url_problem(url)
    if problem is None and transport is TransportType.REST:
        problem = rest_base_problem(url)
    return problem


def config_problems(
    transport: TransportType, config: dict[str, Any], *, allow_insecure: bool = False
) -> list[tuple[str, str]]:
    """``(field, message)`` for every way ``config`` breaks BR-001 or the TLS rule for ``transport``."""
    required, optional = CONFIG_FIELDS[transport]
    problems: list[tuple[str, str]] = []
    if transport is TransportType.OPENAPI:
        problems.extend(openapi_problems(config))
        for field in ("spec_url", "base_url"):
            if isinstance(config.get(field), str):
                problems.extend(_url_problems(transport, field, config[field], allow_insecure))
    else:
        value = config.get(required)
        if not isinstance(value, str) or not value.strip():
            problems.append((required, f"{transport} transport requires '{required}' in connection_config"))
        elif required != "command":
            problems.extend(_url_problems(transport, required, value, allow_insecure))
    known = (required, *optional)
    for name in config:
        if name not in known:  # a misspelt "headers" or "env" would silently drop credentials
            problems.append((name, f"unknown field '{name}' for {transport} (known: {', '.join(known)})"))
    for name, kind in optional.items():
        if name in config and not isinstance(config[name], kind):
            problems.append((name, f"'{name}' must be a {kind.__name__}"))
    if transport is TransportType.STDIO and isinstance(config.get("args"), list):
        if not all(isinstance(a, str) for a in config["args"]):
            problems.append(("args", "'args' must be a list of strings"))
    if transport is TransportType.STDIO and isinstance(config.get("sandbox"), dict):
        problems.extend(sandbox_problems(config["sandbox"]))
    for mapping in ("env", "headers"):
        if isinstance(config.get(mapping), dict) and not all(isinstance(v, str) for v in config[mapping].values()):
            problems.append((mapping, f"'{mapping}' values must be strings"))
    if "auth" in optional and isinstance(config.get("auth"), dict):
        problems.extend(auth_problems(config["auth"]))
        if transport is not TransportType.OPENAPI and config["auth"].get("scheme") is not None:
            problems.append(("auth", "'auth.scheme' names a security scheme of an OPENAPI server's document"))
    if transport is not TransportType.STDIO and isinstance(config.get("headers"), dict):
        problems.extend(("headers", problem) for problem in headers_problems(config["headers"]))
    for field, field_value in config.items():
        if has_nul(field) or has_nul(field_value):
            problems.append((field, f"'{field}' may not contain the NUL character"))
        elif not _utf8(field) or not _utf8(field_value):
            problems.append((field, f"'{field}' may not contain a lone surrogate (text with no UTF-8 form)"))
        elif names := protected_references(field_value):
            listed = ", ".join(sorted(set(names)))
            problems.append((field, f"'{field}' may not reference toolmesh's own variables ({listed})"))
    return problems


def _url_problems(transport: TransportType, field: str, value: str, allow_insecure: bool) -> list[tuple[str, str]]:
    """What is wrong with the upstream URL ``value`` of ``field``: not http(s), the TLS rule, the egress policy."""
    if not value.lower().startswith(("http://", "https://")):
        return [(field, f"'{field}' must be an http(s) URL")]
    if problem := insecure_url_problem(field, value, allow_insecure):
        return [(field, problem)]
    if problem := upstream_url_problem(transport, value):
        return [(field, f"'{field}': {problem}")]
    return []


def _utf8(value: Any) -> bool:
    """True when every string and key inside ``value`` has a UTF-8 form (no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True
