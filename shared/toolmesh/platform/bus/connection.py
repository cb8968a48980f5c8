"""Opening a NATS connection with the settings every role shares: credentials, TLS, reconnects."""

from __future__ import annotations

import logging
import ssl
from typing import Any

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


async def connect_nats(url: str, name: str, *, timeout: float = 10.0, **options: Any) -> NATS:
    """Connect to NATS (reconnecting forever once connected); ``BackendUnavailable`` if unreachable.

    ``options`` are extra ``nats.connect`` arguments (usually ``nats_options(settings)``); they
    override the defaults here. A server that is not there yet is waited for; one that refuses the
    credentials fails the connect at once.
    """
    connected = False

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc, extra={"role": name})
        refused = isinstance(exc, AuthorizationError) or "authorization violation" in str(exc).lower()
        if refused and not connected:
            # nats.connect awaits this callback inside its retry loop: raising here ends it.
            raise BackendUnavailable(f"NATS at {mask_url(url)} refused the credentials: {exc}") from exc

    arguments: dict[str, Any] = {
        "name": name,
        "connect_timeout": timeout,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "error_cb": on_error,
    }
    try:
        nc = await nats.connect(url, **{**arguments, **options})
    except BackendUnavailable:
        raise
    except Exception as exc:  # nats raises several unrelated types for "cannot connect"
        raise BackendUnavailable(f"NATS unreachable at {mask_url(url)}: {exc}") from exc
    connected = True
    return nc
