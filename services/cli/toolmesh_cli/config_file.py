"""``toolmesh up --config toolmesh.yaml``: the servers to register at start.

::

    servers:                      # exactly the body of POST /api/v1/aggregator/servers
      - name: demo
        transport_type: STDIO
        connection_config: {command: python, args: [demo_server.py, --transport, stdio]}
    mcpServers:                   # and/or the format of desktop MCP clients (see mcp_servers.py)
      remote: {url: "https://host/sse"}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh_cli.errors import ConfigError
from toolmesh_cli.mcp_servers import convert, validate

SECTIONS = ("servers", "mcpServers")


@dataclass(frozen=True)
class ServerConfig:
    """The valid servers of a config file, and notes worth telling the user (renamed entries)."""

    servers: list[RegisterServerRequest]
    notes: list[str] = field(default_factory=list)


def _listed(items: Any, taken: set[str]) -> tuple[list[RegisterServerRequest], list[str]]:
    if not isinstance(items, list):
        return [], ["servers: must be a list of server registrations"]
    servers, problems = [], []
    for index, item in enumerate(items):
        label = f"servers[{index}]"
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            label += f" ({item['name']})"
        try:
            if not isinstance(item, Mapping):
                raise ValueError("must be a mapping with name, transport_type and connection_config")
            request = validate(item)
            if request.name in taken:
                raise ValueError(f"name {request.name!r} is used by another entry")
        except ValueError as exc:
            problems.append(f"{label}: {exc}")
            continue
        taken.add(request.name)
        servers.append(request)
    return servers, problems


def parse_config(document: Any, source: str = "config") -> ServerConfig:
    """Check a loaded YAML document; ``ConfigError`` listing every invalid entry."""
    if document is None:
        return ServerConfig([])
    if not isinstance(document, Mapping):
        raise ConfigError(f"{source}: the config must be a mapping with 'servers' and/or 'mcpServers'")
    unknown = sorted(str(k) for k in document if k not in SECTIONS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; expected 'servers' and/or 'mcpServers'")
    taken: set[str] = set()
    servers, problems = _listed(document.get("servers") or [], taken)
    notes = []
    for entry in convert(document.get("mcpServers") or {}, taken):
        if entry.request is None:
            problems.append(f"mcpServers.{entry.source_name}: {entry.problem}")
            continue
        servers.append(entry.request)
        if entry.renamed:
            notes.append(f"mcpServers.{entry.source_name}: registered as {entry.request.name!r}")
    if problems:
        raise ConfigError(
            f"{source}: {len(problems)} invalid server entr{'y' if len(problems) == 1 else 'ies'}:", problems
        )
    return ServerConfig(servers, notes)


def load_config(path: Path) -> ServerConfig:
    """Read and check a config file."""
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    return parse_config(document, str(path))
