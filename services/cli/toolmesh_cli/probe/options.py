"""The options of ``toolmesh probe`` and the OAuth client they ask for."""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx2

from toolmesh_cli.errors import UsageError
from toolmesh_cli.probe.assertions import EnterpriseLogin, WorkloadIdentityAuth, enterprise_auth
from toolmesh_cli.probe.authorization import Authorization, ClientIdentity, MemoryTokenStorage, oauth_provider
from toolmesh_cli.probe.connection import TRANSPORTS
from toolmesh_cli.probe.grants import ClientCredentials, client_credentials_auth

SECRET_VARIABLE = "TOOLMESH_PROBE_CLIENT_SECRET"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's arguments: what to reach and do, who the client is, and the grants without a user."""
    parser.add_argument("url", help="the server's MCP endpoint (Streamable HTTP or SSE)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="auto", help="auto: Streamable HTTP, else SSE")
    parser.add_argument("--call", metavar="TOOL", help="call this tool after listing")
    parser.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments (a JSON object)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step of the MCP and OAuth client")
    client = parser.add_argument_group("the client")
    client.add_argument(
        "--headless", action="store_true", help="fetch the authorization URL without a browser (no login page)"
    )
    client.add_argument("--client-metadata-url", help="this client's Client ID Metadata Document (an HTTPS URL)")
    client.add_argument("--client-id", help="a client registered with the authorization server")
    client.add_argument("--client-secret", help=f"its secret ({SECRET_VARIABLE})")
    machine = parser.add_argument_group("without a user")
    machine.add_argument(
        "--client-credentials", action="store_true", help="the client credentials grant (a secret or --private-key)"
    )
    machine.add_argument("--private-key", metavar="PEM_FILE", help="sign private_key_jwt assertions with this key")
    machine.add_argument("--signing-alg", help="the private key's JWS algorithm (default ES256)")
    machine.add_argument("--issuer", help="the authorization server the client credentials belong to")
    machine.add_argument("--assertion", metavar="JWT", help="a workload identity token (the jwt-bearer grant)")
    machine.add_argument("--id-token", help="the user's ID token at an enterprise identity provider (SEP-990)")
    machine.add_argument("--idp-token-endpoint", help="that identity provider's token endpoint")
    machine.add_argument("--idp-client-id", help="this client's id at that identity provider")
    parser.set_defaults(private_key_pem=None)


def read_key_file(args: argparse.Namespace) -> None:
    """Read ``--private-key`` (before the event loop starts)."""
    if args.private_key:
        with open(args.private_key, encoding="utf-8") as key:
            args.private_key_pem = key.read()


def _client_id(args: argparse.Namespace, what: str) -> str:
    if args.client_id is None:
        raise UsageError(f"{what} needs --client-id")
    client_id: str = args.client_id
    return client_id


async def build_auth(args: argparse.Namespace, authorization: Authorization) -> httpx2.Auth:
    """The OAuth client the options ask for: a grant without a user when one is named, else the
    authorization code grant (for a registered, pre-registered or metadata-document client)."""
    secret = args.client_secret or os.environ.get(SECRET_VARIABLE)
    if args.assertion:
        return WorkloadIdentityAuth(args.url, _client_id(args, "--assertion"), args.assertion)
    if args.id_token:
        if not (args.idp_token_endpoint and args.idp_client_id and secret):
            raise UsageError("--id-token needs --idp-token-endpoint, --idp-client-id, --client-id and --client-secret")
        login = EnterpriseLogin(
            args.id_token, args.idp_token_endpoint, args.idp_client_id, _client_id(args, "--id-token"), secret
        )
        return await enterprise_auth(args.url, login, MemoryTokenStorage())
    if args.client_credentials:
        credentials = ClientCredentials(
            _client_id(args, "--client-credentials"),
            client_secret=secret,
            private_key_pem=args.private_key_pem,
            signing_algorithm=args.signing_alg or "ES256",
            issuer=args.issuer,
        )
        return client_credentials_auth(args.url, credentials, MemoryTokenStorage())
    identity = ClientIdentity(metadata_url=args.client_metadata_url, client_id=args.client_id, client_secret=secret)
    return oauth_provider(args.url, authorization, identity, MemoryTokenStorage())


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``toolmesh probe`` on the command's subparsers, with its arguments."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "probe", help="connect to an MCP server as toolmesh would (authorizing if asked), list what it offers"
    )
    add_arguments(parser)
    return parser
