"""Endpoints (bundles) as the catalog holds them.

A bundle selects ``server.item`` names with glob patterns (``include``, then ``exclude``, which
wins) over tools, prompts and resource URIs; overrides rename, re-describe or disable tools.
No I/O here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolmesh.contracts.endpoints import ToolOverride


@dataclass(frozen=True)
class Bundle:
    """One endpoint's definition."""

    id: str
    name: str
    namespace: str
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    overrides: Mapping[str, ToolOverride] = field(default_factory=dict)
    description: str | None = None

    @classmethod
    def of(
        cls,
        endpoint_id: str,
        name: str,
        namespace: str,
        include: Sequence[str],
        exclude: Sequence[str],
        overrides: Mapping[str, Any],
        description: str | None = None,
    ) -> Bundle:
        """A bundle from stored or event fields."""
        parsed = {k: ToolOverride.model_validate(v) for k, v in overrides.items()}
        return cls(endpoint_id, name, namespace, tuple(include), tuple(exclude), parsed, description)

    def selects(self, server: str, item: str) -> bool:
        """True when ``server.item`` is included and not excluded."""
        full = f"{server}.{item}"
        matches = fnmatch.fnmatchcase
        return any(matches(full, p) for p in self.include) and not any(matches(full, p) for p in self.exclude)

    def shows_tool(self, server: str, tool: str) -> bool:
        """Selected and not disabled by an override."""
        override = self.overrides.get(f"{server}.{tool}")
        return self.selects(server, tool) and (override is None or override.enabled)

    def renames(self) -> dict[tuple[str, str], ToolOverride]:
        """Overrides that rename or re-describe a tool, by ``(server, tool)``."""
        found = {}
        for key, override in self.overrides.items():
            server, _, tool = key.partition(".")
            if override.enabled and (override.name is not None or override.description is not None):
                found[(server, tool)] = override
        return found
