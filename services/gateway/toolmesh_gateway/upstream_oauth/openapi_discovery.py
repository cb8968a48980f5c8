"""Where an ``OPENAPI`` server's authorization server is: its document's security scheme (chosen by
``toolmesh.contracts.openapi_oauth``), not a 401 challenge.

* an ``oauth2`` scheme's ``authorizationCode`` flow gives the authorization and token endpoints; the
  issuer is the authorization endpoint's origin, and what the authorization server publishes there
  (RFC 8414) adds registration (DCR), PKCE and RFC 9207 support when it names the same issuer and
  the same token endpoint;
* an ``openIdConnect`` scheme's URL is its OpenID discovery document, whose ``issuer`` must be the URL
  the document is published under.

The resource (RFC 8707) is the API's base URL. The document, the OpenID discovery document and the
metadata are fetched with the server's egress-guarded client; an endpoint the egress policy refuses
(a link-local or metadata host for everyone, a loopback or private one unless the server may reach
those) ends discovery.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2
import yaml
from mcp.client.auth.utils import handle_auth_metadata_response, issuers_match
from mcp.shared.auth import OAuthMetadata
from pydantic import ValidationError

from toolmesh.contracts.openapi_config import document_problem, first_server_url
from toolmesh.contracts.openapi_oauth import NoOAuthScheme, oauth_scheme, required_scopes
from toolmesh.contracts.upstream_auth import UpstreamAuth
from toolmesh.egress.policy import EgressPolicy, EgressRefused, name_reach, refusal_reason, url_problem
from toolmesh.errors import ServerConnectionFailed
from toolmesh.oauth_tokens import usable_scope
from toolmesh_gateway.upstream_oauth.discovery import AuthorizationServer, failed, get_json, server_metadata

OIDC_SUFFIX = "/.well-known/openid-configuration"


def _endpoint(policy: EgressPolicy, what: str, url: Any, relative_to: str | None) -> str:
    """``url`` (relative to ``relative_to``) when the egress policy could allow it, else ``failed``."""
    if not isinstance(url, str) or not url:
        raise failed(f"the document's {what} is missing")
    absolute = urljoin(relative_to, url) if relative_to is not None else url
    problem = url_problem(absolute)
    host = urlsplit(absolute).hostname or ""
    try:
        reach = name_reach(host) if problem is None else None
    except EgressRefused as exc:
        problem = str(exc)
        reach = None
    if problem is None and reach is not None and not policy.allows(reach):
        problem = refusal_reason(host, None, reach)
    if problem is not None:
        raise failed(f"the document's {what} {absolute!r} is refused by the egress policy: {problem}")
    return absolute


async def _document(client: httpx2.AsyncClient, config: dict[str, Any]) -> dict[str, Any]:
    """The server's document: inline, or read from ``spec_url`` (JSON or YAML)."""
    if isinstance(config.get("spec"), dict):
        return dict(config["spec"])
    url = str(config["spec_url"])
    response = await get_json(client, url)
    if response is None or response.status_code != 200:
        raise failed("the OpenAPI document could not be read")
    try:
        document = json.loads(response.content)
    except ValueError:
        try:
            document = yaml.load(response.content, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            raise failed("the OpenAPI document is neither JSON nor YAML") from None
    if problem := document_problem(document):
        raise failed(f"unusable OpenAPI document: {problem}")
    return dict(document)


def _resource(document: dict[str, Any], config: dict[str, Any]) -> str:
    """The API's base URL, as the session-worker computes it (``base_url``, else the document's first
    server relative to ``spec_url``)."""
    url = config.get("base_url") or first_server_url(document) or "/"
    if isinstance(config.get("spec_url"), str):
        url = urljoin(config["spec_url"], str(url))
    if not str(url).lower().startswith(("http://", "https://")):
        raise failed("the document names no absolute server URL and none was configured (give 'base_url')")
    return str(url).rstrip("/")


async def _oauth2(
    client: httpx2.AsyncClient, policy: EgressPolicy, flow: dict[str, Any], base: str | None
) -> OAuthMetadata:
    authorize = _endpoint(policy, "authorizationUrl", flow.get("authorizationUrl"), base)
    token = _endpoint(policy, "tokenUrl", flow.get("tokenUrl"), base)
    parts = urlsplit(authorize)
    issuer = f"{parts.scheme}://{parts.netloc}"
    scopes = flow.get("scopes")
    found: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": authorize,
        "token_endpoint": token,
        "response_types_supported": ["code"],
        "scopes_supported": [str(s) for s in scopes] if isinstance(scopes, dict) else None,
    }
    try:
        published = await server_metadata(client, issuer, issuer)
    except ServerConnectionFailed:
        published = None
    if published is not None and str(published.token_endpoint) == token:
        for field in (
            "registration_endpoint",
            "code_challenge_methods_supported",
            "token_endpoint_auth_methods_supported",
            "authorization_response_iss_parameter_supported",
            "client_id_metadata_document_supported",
        ):
            found[field] = getattr(published, field)
    if found.get("registration_endpoint") is not None:
        _endpoint(policy, "authorization server's registration_endpoint", str(found["registration_endpoint"]), None)
    return OAuthMetadata.model_validate(found)


async def _openid(client: httpx2.AsyncClient, policy: EgressPolicy, url: Any, base: str | None) -> OAuthMetadata:
    where = _endpoint(policy, "openIdConnectUrl", url, base)
    response = await get_json(client, where)
    if response is None:
        raise failed("the OpenID discovery document could not be read")
    _, metadata = await handle_auth_metadata_response(response)
    if metadata is None:
        raise failed("the openIdConnectUrl publishes no OpenID discovery document")
    published_under = where.split("/.well-known/", 1)[0] if "/.well-known/" in where else where
    if not issuers_match(str(metadata.issuer), published_under):
        raise failed("the OpenID discovery document names another issuer than the URL it is published under")
    _endpoint(policy, "authorization server's authorization_endpoint", str(metadata.authorization_endpoint), None)
    _endpoint(policy, "authorization server's token_endpoint", str(metadata.token_endpoint), None)
    return metadata


async def discover_openapi(
    client: httpx2.AsyncClient, policy: EgressPolicy, config: dict[str, Any], auth: UpstreamAuth
) -> AuthorizationServer:
    """The authorization server of the OPENAPI server of ``config`` and the scope to ask for:
    ``auth.scopes`` when configured, else those the document's security requirements ask of the
    scheme, else none.

    Raises:
        ServerConnectionFailed: the document is unreadable, has no usable scheme, or an endpoint is refused.
    """
    document = await _document(client, config)
    resource = _resource(document, config)
    try:
        name, scheme = oauth_scheme(document, auth.scheme)
    except NoOAuthScheme as exc:
        raise failed(str(exc)) from None
    base = config.get("spec_url") if isinstance(config.get("spec_url"), str) else resource + "/"
    try:
        if scheme.get("type") == "openIdConnect":
            metadata = await _openid(client, policy, scheme.get("openIdConnectUrl"), base)
        else:
            metadata = await _oauth2(client, policy, scheme["flows"]["authorizationCode"], base)
    except ValidationError:
        raise failed(f"the security scheme {name!r} gives no usable authorization server metadata") from None
    if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
        raise failed("the authorization server does not support PKCE S256")
    scope = " ".join(auth.scopes) if auth.scopes else usable_scope(" ".join(required_scopes(document, name)))
    return AuthorizationServer(resource, str(metadata.issuer), metadata, scope or None)
