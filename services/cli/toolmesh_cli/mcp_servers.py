"""The ``mcpServers`` format of desktop MCP clients, turned into toolmesh registrations.

Shared by ``toolmesh import`` and the ``mcpServers:`` section of ``toolmesh up --config``::

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-files"], "env": {}},
                    "remote": {"url": "https://host/sse", "headers": {}, "type": "sse"}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.naming import normalize_server_name
from toolmesh_cli.errors import describe_validation

_SSE_TYPES = {"sse"}
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamablehttp"}


@dataclass(frozen=True)
class Entry:
    """One server of a file: a valid registration, or the problem that keeps it out."""

    source_name: str
    request: RegisterServerRequest | None = None
    problem: str | None = None

    @property
    def renamed(self) -> bool:
        """True when the product's name differs from the one in the file."""
        return self.request is not None and self.request.name != self.source_name

    @property
    def label(self) -> str:
        """How the entry is named in messages: ``"My Server" (as my-server)`` when renamed."""
        if self.request is not None and self.renamed:
            return f"{self.source_name!r} (as {self.request.name})"
        return self.source_name


def url_transport(url: str, declared: str | None) -> TransportType:
    """SSE when ``type`` says so or the URL path ends in ``/sse``; otherwise Streamable HTTP."""
    if declared:
        kind = declared.strip().lower()
        if kind in _SSE_TYPES:
            return TransportType.SSE
        if kind in _HTTP_TYPES:
            return TransportType.HTTP
        raise ValueError(f"unknown type {declared!r} for a URL server (sse, http or streamable-http)")
    return TransportType.SSE if urlsplit(url).path.rstrip("/").endswith("/sse") else TransportType.HTTP


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"'{what}' must be a mapping of names to values")
    return {str(k): str(v) for k, v in value.items()}


def registration_body(name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The API body for one ``mcpServers`` entry (not validated yet); ``ValueError`` when unusable."""
    if not isinstance(entry, Mapping):
        raise ValueError("must be an object with 'command' or 'url'")
    command, url, declared = entry.get("command"), entry.get("url"), entry.get("type")
    if command and url:
        raise ValueError("has both 'command' and 'url'; give one")
    body: dict[str, Any] = {"name": name}
    if entry.get("description"):
        body["description"] = str(entry["description"])
    if entry.get("disabled") is True:
        body["auto_connect"] = False
    if command:
        if declared and str(declared).lower() != "stdio":
            raise ValueError(f"has a 'command' but type {declared!r}")
        args = entry.get("args") or []
        if not isinstance(args, list):
            raise ValueError("'args' must be a list")
        config: dict[str, Any] = {"command": str(command), "args": [str(a) for a in args]}
        if entry.get("env"):
            config["env"] = _strings(entry["env"], "env")
        if entry.get("cwd"):
            config["cwd"] = str(entry["cwd"])
        body.update(transport_type=TransportType.STDIO.value, connection_config=config)
    elif url:
        transport = url_transport(str(url), str(declared) if declared else None)
        key = "url" if transport is TransportType.SSE else "base_url"
        config = {key: str(url)}
        if entry.get("headers"):
            config["headers"] = _strings(entry["headers"], "headers")
        body.update(transport_type=transport.value, connection_config=config)
    else:
        raise ValueError("needs 'command' (STDIO) or 'url' (SSE / Streamable HTTP)")
    return body


def validate(body: Mapping[str, Any]) -> RegisterServerRequest:
    """The product's own validation of a registration; ``ValueError`` with a one-line reason."""
    try:
        return RegisterServerRequest.model_validate(dict(body))
    except ValidationError as exc:
        raise ValueError(describe_validation(exc.errors(include_url=False))) from exc


def convert(servers: Any, taken: set[str] | None = None) -> list[Entry]:
    """Every entry of an ``mcpServers`` mapping; ``taken`` holds names already used (and is updated)."""
    if not isinstance(servers, Mapping):
        return [Entry("mcpServers", problem="'mcpServers' must be a mapping of server names to entries")]
    taken = set() if taken is None else taken
    entries = []
    for source_name, raw in servers.items():
        name = normalize_server_name(str(source_name))
        try:
            if name in taken:
                raise ValueError(f"name {name!r} is used by another entry")
            request = validate(registration_body(name, raw))
        except ValueError as exc:
            entries.append(Entry(str(source_name), problem=str(exc)))
            continue
        taken.add(name)
        entries.append(Entry(str(source_name), request=request))
    return entries
