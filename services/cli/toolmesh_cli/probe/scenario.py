"""What a probe does under the MCP conformance suite's client scenarios.

The suite runs ``toolmesh probe --headless <url>`` with ``MCP_CONFORMANCE_SCENARIO`` naming the
scenario and, for some, ``MCP_CONFORMANCE_CONTEXT`` holding JSON the client needs (a pre-registered
client's id and secret). Every auth scenario's server offers ``test-tool``: the reference client
lists the tools and calls it, and so does a probe unless its command line names another call. The
client credentials scenarios (an extension) give the client's id and secret or private key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCENARIO_VARIABLE = "MCP_CONFORMANCE_SCENARIO"
CONTEXT_VARIABLE = "MCP_CONFORMANCE_CONTEXT"
SCENARIO_TOOL = "test-tool"


@dataclass(frozen=True)
class Scenario:
    """The scenario a probe runs under: its name and its context."""

    name: str
    context: Mapping[str, Any] = field(default_factory=dict)

    def client_credentials(self) -> tuple[str, str | None] | None:
        """A pre-registered client's id and secret, when the context gives one."""
        client_id = self.context.get("client_id")
        if not isinstance(client_id, str):
            return None
        secret = self.context.get("client_secret")
        return client_id, secret if isinstance(secret, str) else None

    def uses_client_credentials(self) -> bool:
        """Whether the scenario is one of the client credentials grant (an extension)."""
        return self.name.startswith("auth/client-credentials-")

    def private_key(self) -> tuple[str, str] | None:
        """The PEM private key and signing algorithm a ``private_key_jwt`` client signs with, when given."""
        pem = self.context.get("private_key_pem")
        if not isinstance(pem, str):
            return None
        algorithm = self.context.get("signing_algorithm")
        return pem, algorithm if isinstance(algorithm, str) else "ES256"

    def default_call(self, tool_names: list[str]) -> str | None:
        """The tool an auth scenario's reference client calls, when the server offers it."""
        if self.name.startswith("auth/") and SCENARIO_TOOL in tool_names:
            return SCENARIO_TOOL
        return None


def scenario_from(environ: Mapping[str, str]) -> Scenario | None:
    """The conformance scenario named in ``environ``, if any."""
    name = environ.get(SCENARIO_VARIABLE)
    if not name:
        return None
    raw = environ.get(CONTEXT_VARIABLE)
    context = json.loads(raw) if raw else {}
    return Scenario(name, context if isinstance(context, dict) else {})
