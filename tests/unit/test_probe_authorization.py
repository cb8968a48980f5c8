"""``toolmesh probe``'s part of the OAuth flow: reading the authorization server's redirect, and the
conformance suite's environment turned into probe options."""

from __future__ import annotations

import argparse
import json

import pytest
from mcp.client.auth import OAuthFlowError

from toolmesh_cli.probe.authorization import ClientIdentity, HeadlessAuthorization, MemoryTokenStorage, oauth_provider
from toolmesh_cli.probe.authorization import redirect_result as read_redirect
from toolmesh_cli.probe.scenario import scenario_from


def test_redirect_gives_code_state_and_issuer() -> None:
    result = read_redirect("http://127.0.0.1/callback?code=abc&state=s1&iss=https%3A%2F%2Fas.example")
    assert (result.code, result.state, result.iss) == ("abc", "s1", "https://as.example")


def test_redirect_with_an_error_raises_naming_it() -> None:
    with pytest.raises(OAuthFlowError, match="access_denied user said no"):
        read_redirect("http://127.0.0.1/callback?error=access_denied&error_description=user+said+no&state=s1")


def test_redirect_without_a_code_raises() -> None:
    with pytest.raises(OAuthFlowError, match="no code"):
        read_redirect("http://127.0.0.1/callback?state=s1")


async def test_headless_callback_without_a_fetch_raises() -> None:
    with pytest.raises(OAuthFlowError, match="no authorization was fetched"):
        await HeadlessAuthorization().callback()


async def test_a_pre_registered_client_is_stored_before_any_registration() -> None:
    storage = MemoryTokenStorage()
    identity = ClientIdentity(client_id="pre", client_secret="s3cret")
    oauth_provider("https://mcp.example/mcp", HeadlessAuthorization(), identity, storage)
    stored = await storage.get_client_info()
    assert stored is not None
    assert (stored.client_id, stored.client_secret, stored.token_endpoint_auth_method) == (
        "pre",
        "s3cret",
        "client_secret_basic",
    )


def test_no_scenario_without_the_suites_variable() -> None:
    assert scenario_from({}) is None


def test_scenario_context_fills_only_the_options_the_command_line_left_empty() -> None:
    context = {"name": "auth/pre-registration", "client_id": "c1", "client_secret": "s1"}
    scenario = scenario_from(
        {"MCP_CONFORMANCE_SCENARIO": "auth/pre-registration", "MCP_CONFORMANCE_CONTEXT": json.dumps(context)}
    )
    assert scenario is not None
    args = argparse.Namespace(client_id=None, client_secret="given", client_credentials=False)
    scenario.fill(args)
    assert (args.client_id, args.client_secret, args.client_credentials) == ("c1", "given", False)


def test_a_client_credentials_scenario_asks_for_that_grant() -> None:
    scenario = scenario_from({"MCP_CONFORMANCE_SCENARIO": "auth/client-credentials-jwt"})
    assert scenario is not None
    args = argparse.Namespace(client_credentials=False)
    scenario.fill(args)
    assert args.client_credentials is True


def test_an_auth_scenario_calls_its_test_tool_only_when_offered() -> None:
    scenario = scenario_from({"MCP_CONFORMANCE_SCENARIO": "auth/metadata-default"})
    assert scenario is not None
    assert scenario.default_call(["other", "test-tool"]) == "test-tool"
    assert scenario.default_call(["other"]) is None
    other = scenario_from({"MCP_CONFORMANCE_SCENARIO": "tools_call"})
    assert other is not None
    assert other.default_call(["test-tool"]) is None
