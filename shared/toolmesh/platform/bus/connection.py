"""Opening a NATS connection with the settings every role shares: credentials, TLS, reconnects."""

from __future__ import annotations

import logging
import ssl
from typing import Any
from urllib.parse import unquote, urlsplit

import nats
from nats.aio.client import Client as NATS
from nats.errors import AuthorizationError

from toolmesh.errors import BackendUnavailable
from toolmesh.platform.config import Settings
from toolmesh.secret_text import mask_url

log = logging.getLogger("toolmesh.bus")


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """A client TLS context when a CA or a client certificate is configured."""
    if settings.nats_tls_ca_file is None and settings.nats_tls_cert_file is None:
        return None
    context = ssl.create_default_context(cafile=str(settings.nats_tls_ca_file) if settings.nats_tls_ca_file else None)
    if settings.nats_tls_cert_file is not None:
        key = str(settings.nats_tls_key_file) if settings.nats_tls_key_file else None
        context.load_cert_chain(str(settings.nats_tls_cert_file), key)
    return context


def nats_options(settings: Settings) -> dict[str, Any]:
    """nats-py ``connect`` arguments for the credentials, TLS and inbox prefix of ``settings``."""
    options: dict[str, Any] = {}
    if settings.nats_user is not None:
        options["user"] = settings.nats_user
        options["password"] = settings.nats_password or ""
    if settings.nats_token is not None:
        options["token"] = settings.nats_token
    if settings.nats_creds_file is not None:
        options["user_credentials"] = str(settings.nats_creds_file)
    if settings.nats_nkey_seed_file is not None:
        options["nkeys_seed"] = str(settings.nats_nkey_seed_file)
    if settings.nats_inbox_prefix is not None:
        options["inbox_prefix"] = settings.nats_inbox_prefix
    context = tls_context(settings)
    if context is not None:
        options["tls"] = context
    return options


def seed_urls(url: str) -> list[str]:
    """The servers of ``TOOLMESH_NATS_URL``: one URL, or several of one cluster separated by commas
    (``nats://n1:4222,nats://n2:4222,nats://n3:4222``), blanks ignored."""
    return [part.strip() for part in url.split(",") if part.strip()]


def shown_urls(url: str) -> str:
    """``url`` (one or several seed URLs) with each URL's credentials masked, for logs and messages."""
    return ",".join(mask_url(part) for part in seed_urls(url))


def url_credentials(servers: list[str]) -> dict[str, str]:
    """The user and password (or token) the first seed URL carries, as ``nats.connect`` options: nats-py
    sends a URL's credentials to that server only, not to the cluster's servers it learns of later (or
    to the other seeds), so a client failing over would connect without them."""
    for server in servers:
        parts = urlsplit(server if "://" in server else f"nats://{server}")
        if parts.username is None:
            continue
        if parts.password is None:
            return {"token": unquote(parts.username)}
        return {"user": unquote(parts.username), "password": unquote(parts.password)}
    return {}


async def connect_nats(url: str, name: str, *, timeout: float = 10.0, **options: Any) -> NATS:
    """Connect to NATS (reconnecting forever once connected); ``BackendUnavailable`` if unreachable.

    ``url`` is one server or several seed URLs of one cluster, comma-separated (``seed_urls``): the
    client connects to one that answers, learns the cluster's other servers from it, and fails over
    to any of them. ``options`` are extra ``nats.connect`` arguments (usually
    ``nats_options(settings)``); they override the defaults here and credentials in the URLs. A
    server that is not there yet is waited for; one that refuses the credentials fails the connect
    at once.
    """
    servers = seed_urls(url)
    shown = shown_urls(url)
    connected = False

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc, extra={"role": name})
        refused = isinstance(exc, AuthorizationError) or "authorization violation" in str(exc).lower()
        if refused and not connected:
            # nats.connect awaits this callback inside its retry loop: raising here ends it.
            raise BackendUnavailable(f"NATS at {shown} refused the credentials: {exc}") from exc

    arguments: dict[str, Any] = {
        "name": name,
        "connect_timeout": timeout,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "error_cb": on_error,
    }
    if not {"user", "token", "user_credentials", "nkeys_seed"} & options.keys():
        arguments.update(url_credentials(servers))
    try:
        nc = await nats.connect(servers, **{**arguments, **options})
    except BackendUnavailable:
        raise
    except Exception as exc:  # nats raises several unrelated types for "cannot connect"
        raise BackendUnavailable(f"NATS unreachable at {shown}: {exc}") from exc
    connected = True
    return nc
