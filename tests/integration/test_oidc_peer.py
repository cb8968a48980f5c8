"""The OpenID Connect identity provider peer (``tests/peers/oidc_provider.py``) is a real one for
authlib: the authorization code flow with PKCE and a nonce, the ID token checked against the JWKS as
authlib's own OpenID clients check it (joserfc, then ``CodeIDToken``), and each hostile knob spoiling
the next ID token so that the check fails with its own error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from tests.oidc_peer import OidcPeer, running_oidc_provider

pytestmark = pytest.mark.integration
REDIRECT_URI = "http://127.0.0.1:9/oauth/oidc/callback"
"""Never opened: the flow reads the code off the provider's 302."""


@pytest.fixture(scope="module")
async def idp() -> AsyncIterator[OidcPeer]:
    async with running_oidc_provider(client_id="toolmesh", client_secret="s3cret", redirect_uri=REDIRECT_URI) as peer:
        yield peer


async def sign_in(idp: OidcPeer, auth_method: str = "client_secret_basic") -> tuple[dict[str, Any], CodeIDToken]:
    """The code flow as a relying party runs it; the token answer and the ID token's checked claims."""
    async with httpx.AsyncClient() as browser:
        metadata = (await browser.get(idp.discovery_url)).json()
        jwks = (await browser.get(metadata["jwks_uri"])).json()
        async with AsyncOAuth2Client(
            idp.client_id,
            idp.client_secret,
            scope="openid profile email",
            redirect_uri=idp.redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method=auth_method,
        ) as client:
            verifier, nonce = generate_token(48), generate_token(20)
            url, state = client.create_authorization_url(
                metadata["authorization_endpoint"], code_verifier=verifier, nonce=nonce
            )
            answer = await browser.get(url)
            assert answer.status_code == 302, answer.text
            location = answer.headers["location"]
            assert location.startswith(f"{REDIRECT_URI}?")
            token = await client.fetch_token(
                metadata["token_endpoint"], authorization_response=location, state=state, code_verifier=verifier
            )
    decoded = jwt.decode(token["id_token"], KeySet.import_key_set(jwks), algorithms=["RS256"])
    options: dict[str, Any] = {
        "iss": {"essential": True, "value": metadata["issuer"]},
        "aud": {"essential": True, "value": idp.client_id},
    }
    params = {"nonce": nonce, "client_id": idp.client_id, "access_token": token["access_token"]}
    claims = CodeIDToken(decoded.claims, decoded.header, options, params)
    claims.validate(leeway=5)
    return token, claims


async def test_code_flow_with_pkce_and_nonce_signs_in_the_current_user(idp: OidcPeer) -> None:
    before = await idp.stats()
    token, claims = await sign_in(idp)
    assert token["token_type"] == "Bearer" and token["scope"] == "openid profile email"
    assert claims["sub"] == "alice" and claims["email"] == "alice@example.test"
    assert (claims["toolmesh_role"], claims["toolmesh_namespace"]) == ("admin", "default")
    await idp.login("bob")
    try:
        _, claims = await sign_in(idp, "client_secret_post")
    finally:
        await idp.login("alice")
    assert (claims["sub"], claims["toolmesh_role"], claims["toolmesh_namespace"]) == ("bob", "user", "team-b")
    after = await idp.stats()
    assert (after["authorize"] - before["authorize"], after["token"] - before["token"]) == (2, 2)


async def test_a_code_is_taken_once_and_only_with_its_verifier(idp: OidcPeer) -> None:
    async with httpx.AsyncClient() as browser:
        metadata = (await browser.get(idp.discovery_url)).json()
        async with AsyncOAuth2Client(
            idp.client_id,
            idp.client_secret,
            scope="openid",
            redirect_uri=idp.redirect_uri,
            code_challenge_method="S256",
        ) as client:

            async def exchange(verifier: str, location: str) -> dict[str, Any]:
                found: dict[str, Any] = await client.fetch_token(
                    metadata["token_endpoint"], authorization_response=location, code_verifier=verifier
                )
                return found

            verifier = generate_token(48)
            url, _ = client.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier)
            location = (await browser.get(url)).headers["location"]
            assert "id_token" in await exchange(verifier, location)
            with pytest.raises(OAuthError, match="invalid_grant"):
                await exchange(verifier, location)
            url, _ = client.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier)
            with pytest.raises(OAuthError, match="invalid_grant"):
                await exchange(generate_token(48), (await browser.get(url)).headers["location"])
        stray = await browser.get(httpx.URL(url).copy_set_param("redirect_uri", "http://127.0.0.1:9/elsewhere"))
    assert stray.status_code == 400 and stray.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    ("knobs", "error", "claim"),
    [
        ({"nonce": "replayed"}, InvalidClaimError, "nonce"),
        ({"issuer": "http://127.0.0.1:1"}, InvalidClaimError, "iss"),
        ({"audience": "someone-else"}, InvalidClaimError, "aud"),
        ({"expired": True}, ExpiredTokenError, None),
        ({"unsigned_kid": True}, InvalidKeyIdError, None),
    ],
)
async def test_a_knob_spoils_the_next_id_token_only(
    idp: OidcPeer, knobs: dict[str, Any], error: type[JoseError], claim: str | None
) -> None:
    await idp.next(**knobs)
    with pytest.raises(error, match=claim):
        await sign_in(idp)
    _, claims = await sign_in(idp)
    assert claims["sub"] == "alice"
