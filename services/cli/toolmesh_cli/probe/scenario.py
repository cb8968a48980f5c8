"""What a probe does under the MCP conformance suite's client scenarios.

The suite runs ``toolmesh probe --headless <url>`` with ``MCP_CONFORMANCE_SCENARIO`` naming the
scenario and, for some, ``MCP_CONFORMANCE_CONTEXT`` holding JSON the client needs: a pre-registered
client's id and secret, a private key, a workload's identity token, an enterprise identity
provider's ID token. They fill the probe's options the command line left empty. Every auth
scenario's server offers ``test-tool``: the reference client lists the tools and calls it, and so
does a probe unless its command line names another call.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCENARIO_VARIABLE = "MCP_CONFORMANCE_SCENARIO"
CONTEXT_VARIABLE = "MCP_CONFORMANCE_CONTEXT"
SCENARIO_TOOL = "test-tool"
OPTIONS_FROM_CONTEXT = {
    "client_id": "client_id",
    "client_secret": "client_secret",
    "private_key_pem": "private_key_pem",
    "signing_alg": "signing_algorithm",
    "assertion": "valid_jwt",
    "id_token": "idp_id_token",
    "idp_token_endpoint": "idp_token_endpoint",
    "idp_client_id": "idp_client_id",
}
"""Probe option ← context key."""


@dataclass(frozen=True)
class Scenario:
    """The scenario a probe runs under: its name and its context."""

    name: str
    context: Mapping[str, Any] = field(default_factory=dict)

    def fill(self, args: argparse.Namespace) -> None:
        """Set the options the command line left empty from the scenario's context."""
        for option, key in OPTIONS_FROM_CONTEXT.items():
            value = self.context.get(key)
            if getattr(args, option, None) is None and isinstance(value, str):
                setattr(args, option, value)
        if self.name.startswith("auth/client-credentials-"):
            args.client_credentials = True

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
