"""What a hostile MCP client, a forged token or a hostile identity provider gets from the consent page's
sign-in at the identity provider (``test_oauth_server_identity_provider.py`` drives the flow as it is
meant to go; its fixture and helpers are reused here)."""

from __future__ import annotations

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.integration.test_oauth_server_identity_provider import (
    COOKIE,
    Setup,
    error_of,
    provider_sign_in,
    setup,
    waiting_request,
)

pytestmark = pytest.mark.integration
__all__ = ["setup"]  # the fixture, imported for the tests of this module


async def test_an_id_token_of_another_algorithm_under_the_providers_key_id_signs_no_one_in(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        await setup.idp.next(wrong_alg=True)  # ES256, naming the provider's RSA key
        error = error_of(await provider_sign_in(browser, request_id))
        assert error is not None and "algorithm" in error.lower(), error
        assert COOKIE not in browser.cookies


async def test_a_bearer_token_of_another_algorithm_under_the_providers_key_id_is_refused(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as http:
        _, request_id = await waiting_request(http)
        (key,) = (await http.get(f"{setup.idp.url}/jwks")).json()["keys"]
        claims = {"iss": setup.idp.url, "sub": "mallory", "toolmesh_role": "admin", "toolmesh_namespace": "default"}
        forged = jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), "ES256", headers={"kid": key["kid"]})
        refused = await http.post(
            f"/api/v1/oauth/requests/{request_id}/decision",
            json={"allow": True},
            headers={"Authorization": f"Bearer {forged}"},
        )
    assert refused.status_code == 401, refused.text
    assert refused.json()["error_code"] == "UNAUTHORIZED"
