"""The ``connection_config`` of an ``OPENAPI`` server: an HTTP API an OpenAPI 3.0/3.1 document describes.

``{"spec_url": URL}`` or the document inline as ``{"spec": {...}}`` (exactly one), and optionally
``base_url`` (overrides the document's ``servers``), ``headers`` (sent with every request),
``credentials`` (``{security scheme name: value}``: an API key, a bearer token, or ``user:password``
for HTTP basic), ``include`` and ``exclude`` (``{"tags": [...], "paths": [...]}``; a path entry
ending in ``*`` is a prefix), ``auth`` (OAuth, ``contracts.upstream_auth``). The whole config is
sealed at rest like every connection config.
"""

from __future__ import annotations

import json
from typing import Any

from toolmesh.egress.policy import url_problem

OPENAPI_OPTIONAL: dict[str, type] = {
    "spec": dict,
    "base_url": str,
    "headers": dict,
    "credentials": dict,
    "include": dict,
    "exclude": dict,
    "auth": dict,
}
"""The optional fields of an ``OPENAPI`` server's config (its required one is ``spec_url`` or ``spec``)."""

INLINE_SPEC_MAX_BYTES = 256 * 1024
"""The largest document given inline (compact JSON): it travels in events and is stored with the server."""
DOCUMENT_MAX_BYTES = 4 * 1024 * 1024
"""The largest document read from ``spec_url``."""
SELECTORS = ("tags", "paths")
"""What ``include`` and ``exclude`` select operations by."""
VERSIONS = ("3.0.", "3.1.")


def openapi_problems(config: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for what is wrong in an ``OPENAPI`` config besides its URLs' rules."""
    problems: list[tuple[str, str]] = []
    has_url, has_spec = "spec_url" in config, "spec" in config
    if has_url == has_spec:
        problems.append(
            ("spec_url", "OPENAPI transport requires exactly one of 'spec_url' or 'spec' in connection_config")
        )
    elif has_url and (not isinstance(config["spec_url"], str) or not config["spec_url"].strip()):
        problems.append(("spec_url", "'spec_url' must be an http(s) URL"))
    if isinstance(config.get("spec"), dict):
        problems.extend(("spec", problem) for problem in inline_spec_problems(config["spec"], "base_url" in config))
    credentials = config.get("credentials")
    if isinstance(credentials, dict) and not all(isinstance(v, str) and v for v in credentials.values()):
        problems.append(("credentials", "'credentials' values must be non-empty strings (keyed by security scheme)"))
    for field in ("include", "exclude"):
        if isinstance(config.get(field), dict) and (problem := selector_problem(field, config[field])):
            problems.append((field, problem))
    return problems


def selector_problem(field: str, selector: dict[str, Any]) -> str | None:
    """What is wrong with an ``include`` or ``exclude`` selector, else None."""
    for key, value in selector.items():
        if key not in SELECTORS:
            return f"unknown key '{key}' in '{field}' (known: {', '.join(SELECTORS)})"
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            return f"'{field}.{key}' must be a list of non-empty strings"
    return None


def inline_spec_problems(spec: dict[str, Any], has_base_url: bool) -> list[str]:
    """What is wrong with a document given inline: too large, not OpenAPI 3.0/3.1, no ``paths``, or
    (without ``base_url``) a first server that is not an absolute URL the egress policy could allow."""
    try:
        size = len(json.dumps(spec, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError, UnicodeEncodeError):
        return ["'spec' must be a JSON document"]
    if size > INLINE_SPEC_MAX_BYTES:
        return [f"'spec' is {size} bytes; a document inline may have {INLINE_SPEC_MAX_BYTES} (give 'spec_url' instead)"]
    if problem := document_problem(spec):
        return [f"'spec': {problem}"]
    if not has_base_url:
        url = first_server_url(spec)
        if url is None or not url.lower().startswith(("http://", "https://")):
            return ["'spec' names no absolute http(s) server URL: give 'base_url'"]
        if problem := url_problem(url):
            return [f"'spec' servers[0].url: {problem}"]
    return []


def document_problem(document: Any) -> str | None:
    """Why ``document`` is not an OpenAPI 3.0/3.1 document toolmesh can read, else None."""
    if not isinstance(document, dict):
        return "an OpenAPI document must be a JSON or YAML object"
    version = document.get("openapi")
    if not isinstance(version, str) or not version.startswith(VERSIONS):
        return "only OpenAPI 3.0 and 3.1 documents are supported ('openapi': '3.0.x' or '3.1.x')"
    if not isinstance(document.get("paths", {}), dict):
        return "'paths' must be an object"
    return None


def first_server_url(document: dict[str, Any]) -> str | None:
    """The URL of the document's first server (its variables at their defaults), or None."""
    servers = document.get("servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        return None
    url = servers[0].get("url")
    if not isinstance(url, str):
        return None
    variables = servers[0].get("variables")
    for name, variable in (variables if isinstance(variables, dict) else {}).items():
        if isinstance(variable, dict) and isinstance(variable.get("default"), str):
            url = url.replace("{" + str(name) + "}", variable["default"])
    return url
