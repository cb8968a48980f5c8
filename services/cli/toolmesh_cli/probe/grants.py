"""Grants without a user: the client credentials grant, with a client secret or a signed
``private_key_jwt`` assertion (RFC 7523 §2.2), on the ``mcp`` SDK's providers.

A service account's identity at an upstream (the shared mode of issue 25) is this grant; the
probe tries it with ``--client-credentials``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.exceptions import MCPDeprecationWarning


@dataclass(frozen=True)
class ClientCredentials:
    """A confidential client's own credentials: a secret, or a private key (PEM) signing its assertions."""

    client_id: str
    client_secret: str | None = None
    private_key_pem: str | None = None
    signing_algorithm: str = "ES256"
    secret_in: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    issuer: str | None = None
    """The authorization server the client belongs to; without it, the one the server's metadata names."""


def client_credentials_auth(server_url: str, credentials: ClientCredentials, storage: TokenStorage) -> httpx2.Auth:
    """The SDK's client credentials provider for ``server_url`` (``private_key_jwt`` when a key is given)."""
    provider: OAuthClientProvider
    with warnings.catch_warnings():
        # Without an issuer the SDK (2.3) warns that it will be required in 3.0; a probe without
        # --issuer asks for exactly the behaviour it deprecates: the server's metadata decides.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if credentials.private_key_pem is not None:
            signer = SignedJWTParameters(
                issuer=credentials.client_id,
                subject=credentials.client_id,
                signing_key=credentials.private_key_pem,
                signing_algorithm=credentials.signing_algorithm,
            )
            provider = PrivateKeyJWTOAuthProvider(
                server_url,
                storage,
                credentials.client_id,
                signer.create_assertion_provider(),
                issuer=credentials.issuer,
            )
        elif credentials.client_secret is not None:
            provider = ClientCredentialsOAuthProvider(
                server_url,
                storage,
                credentials.client_id,
                credentials.client_secret,
                token_endpoint_auth_method=credentials.secret_in,
                issuer=credentials.issuer,
            )
        else:
            raise ValueError("the client credentials grant needs a client secret or a private key")
    return provider
