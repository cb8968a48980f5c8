"""Which hosts are this machine's own: the loopback exemption of the TLS rule and of Host checks."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_host(host: str | None) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1 (brackets and a trailing dot allowed)."""
    if not host:
        return False
    name = host.strip().removeprefix("[").removesuffix("]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_of(authority: str) -> str:
    """The host part of a ``Host`` header value (``name:port``, ``[::1]:port``)."""
    return urlsplit(f"//{authority}").hostname or ""
