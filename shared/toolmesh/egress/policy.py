"""Where upstream URLs may point: the one SSRF policy of toolmesh (plain rules, no I/O).

Every address an upstream URL reaches falls in one of three reaches:

* ``PUBLIC`` — a global address: any registrar's server may reach it;
* ``PRIVATE`` — loopback, RFC 1918, unique-local, carrier-grade NAT, unspecified and the other
  non-global ranges: only a server an owner or admin registered (or a network the operator opened,
  ``TOOLMESH_UPSTREAM_PRIVATE_NETWORKS``) may reach it;
* ``FORBIDDEN`` — link-local (169.254.0.0/16, fe80::/10), cloud metadata (fd00:ec2::254,
  100.100.100.200, 192.0.0.192, 168.63.129.16, ``metadata.google.internal`` and the like),
  multicast, broadcast and reserved: no server reaches it, whoever registered it.

Every spelling of an address counts as that address: decimal (``2852039166``), octal
(``0251.0376.0251.0376``), hex (``0xa9fea9fe``), short forms (``127.1``), trailing dots, brackets,
zone ids and IPv4 embedded in IPv6 (mapped ``::ffff:a.b.c.d``, compatible, NAT64, 6to4, Teredo:
the stricter of both reaches). Names are judged by what they resolve to (``egress_http``), both at
registration and at every connect.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import IntEnum
from urllib.parse import unquote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_REDIRECTS = 3
"""Same-host redirects an upstream request follows at most."""


class Reach(IntEnum):
    """How far from the public internet an address is (greater: stricter)."""

    PUBLIC = 0
    PRIVATE = 1
    FORBIDDEN = 2


class EgressRefused(Exception):
    """An upstream URL or the address it resolved to breaks the egress policy."""

    def __init__(self, message: str, reach: Reach) -> None:
        super().__init__(message)
        self.reach = reach


FORBIDDEN_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: every cloud's metadata service (169.254.169.254, ECS, EKS)
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "192.0.0.192/32",  # Oracle Cloud metadata
        "168.63.129.16/32",  # Azure wire server
        "224.0.0.0/4",  # multicast
        "ff00::/8",
        "240.0.0.0/4",  # reserved, and the broadcast address
    )
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)
"""Names of metadata services, refused without asking a resolver (which may not know them here)."""
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT "IPv4-translated"


def _ipv4_number(part: str) -> int | None:
    """One dotted part as inet_aton reads it: ``0x`` hex, leading ``0`` octal, else decimal."""
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:] or "0", 16
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    try:
        return int(digits, base) if digits.isalnum() and digits.isascii() else None
    except ValueError:
        return None


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` in any inet_aton spelling (``127.1``, ``2852039166``, ``0xa9.0376.43518``), else None."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or any(not p for p in parts):
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    *head, last = [int(n) for n in numbers if n is not None]
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _looks_numeric(host: str) -> bool:
    """WHATWG's rule: a host whose last label is a number is an IPv4 address (or invalid)."""
    last = host.rsplit(".", 1)[-1]
    hexadecimal = last[:2] in ("0x", "0X") and all(c in "0123456789abcdefABCDEF" for c in last[2:])
    return bool(last) and (last.isdigit() or hexadecimal)


def normal_host(host: str) -> str:
    """``host`` without brackets, zone id and trailing dots, lower-cased and percent-decoded."""
    name = unquote(host.strip()).removeprefix("[").removesuffix("]").lower()
    return name.split("%", 1)[0].rstrip(".")


def parse_address(host: str) -> IPAddress | None:
    """The address ``host`` spells in any notation; None for a name.

    Raises:
        EgressRefused: ``host`` looks like an IPv4 address but is none (``1.2.3.999``).
    """
    name = normal_host(host)
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name)
        except ValueError as exc:
            raise EgressRefused(f"'{host}' is not a valid IPv6 address", Reach.FORBIDDEN) from exc
    if not _looks_numeric(name):
        return None
    address = _legacy_ipv4(name)
    if address is None:
        raise EgressRefused(f"'{host}' is not a valid IPv4 address", Reach.FORBIDDEN)
    return address


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, translated, NAT64, 6to4, Teredo)."""
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if int(address) >> 32 == 0 and int(address) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        found.append(low32)
    if address in _NAT64 or address in _TRANSLATED:
        found.append(low32)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def address_reach(address: IPAddress) -> Reach:
    """The reach of one address; for IPv6 carrying IPv4, the stricter of both."""
    if any(address in network for network in FORBIDDEN_NETWORKS if network.version == address.version):
        return Reach.FORBIDDEN
    if isinstance(address, ipaddress.IPv6Address):
        if address in _LOCAL_NAT64:
            return Reach.PRIVATE
        embedded = _embedded_ipv4(address)
        if embedded:
            return max(address_reach(v4) for v4 in embedded)
    return Reach.PUBLIC if address.is_global else Reach.PRIVATE


def name_reach(host: str) -> Reach | None:
    """The reach of a URL host known without a resolver: an address in any spelling, ``localhost``
    (and ``*.localhost``) or a metadata service's name; None for a name only a resolver can judge.

    Raises:
        EgressRefused: ``host`` looks like an address but is none.
    """
    address = parse_address(host)
    if address is not None:
        return address_reach(address)
    name = normal_host(host)
    if name in METADATA_NAMES:
        return Reach.FORBIDDEN
    if name == "localhost" or name.endswith(".localhost"):
        return Reach.PRIVATE
    return None


@dataclass(frozen=True)
class EgressPolicy:
    """What one server's URLs may reach: public addresses always; private ones when an owner or admin
    registered it (``private``) or when they lie in a network the operator opened (``networks``);
    forbidden ones never."""

    private: bool = False
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, private: bool, networks: tuple[str, ...] = ()) -> EgressPolicy:
        """The policy of a server (``private``: registered by an owner or admin) in a deployment that
        opens ``networks`` (CIDRs) to every registrar."""
        return cls(private, tuple(ipaddress.ip_network(n, strict=False) for n in networks))

    def allows(self, reach: Reach, address: IPAddress | None = None) -> bool:
        """Whether a target of ``reach`` (at ``address``, when known) may be reached."""
        if reach is Reach.FORBIDDEN:
            return False
        if reach is Reach.PUBLIC or self.private:
            return True
        return address is not None and any(address in n for n in self.networks if n.version == address.version)

    def check(self, host: str, address: IPAddress) -> None:
        """Refuse a connection to ``address`` (what ``host`` resolved to).

        Raises:
            EgressRefused: the policy does not allow the address.
        """
        reach = address_reach(address)
        if not self.allows(reach, address):
            raise EgressRefused(refusal_reason(host, address, reach), reach)


def refusal_reason(host: str, address: IPAddress | None, reach: Reach) -> str:
    """Why a target of ``reach`` is refused, in words."""
    where = f"'{host}'" if address is None or str(address) == normal_host(host) else f"'{host}' ({address})"
    if reach is Reach.FORBIDDEN:
        return f"{where} is a link-local, cloud-metadata or reserved address: no upstream may reach it"
    return f"{where} is a loopback or private address: only an owner or admin may register a server that reaches it"


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as an upstream URL whatever the role: not http(s), no host, a host
    two URL parsers read differently, or a host refused for everyone; None when it is fine so far
    (a name is judged by what it resolves to), or no valid URL at all (a bad IPv6 literal or port)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as exc:
        return f"is not a valid URL: {exc}"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL with a host"
    if "\\" in parts.netloc or "%" in (parts.hostname or "").split("%25", 1)[0]:
        return "the host may not contain backslashes or percent-encoding"
    try:
        reach = name_reach(parts.hostname)
    except EgressRefused as exc:
        return str(exc)
    if reach is Reach.FORBIDDEN:
        return refusal_reason(parts.hostname, None, reach)
    return None


def rest_base_problem(url: str) -> str | None:
    """What lets a REST tool server's base URL reach other paths than ``{base}/health``, ``/tools``
    and ``/tools/execute``: a query or fragment (``?x=`` swallows the path), dot segments, or encoded
    slashes, backslashes and dots in the path."""
    parts = urlsplit(url)
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "a REST tool server's URL may not have a query or fragment"
    path = parts.path
    lowered = path.lower()
    if any(code in lowered for code in ("%2f", "%5c", "%2e", "%3f", "%23")) or "\\" in path:
        return "a REST tool server's URL may not encode slashes, backslashes, dots, '?' or '#' in its path"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "a REST tool server's URL may not have '.' or '..' segments"
    return None


def rest_endpoint(base: str, path: str) -> str:
    """``base`` joined with one of the REST protocol's fixed paths, refused when the result would leave
    ``base``'s path.

    Raises:
        EgressRefused: the base URL or the path could bend the request to another path or host.
    """
    problem = rest_base_problem(base) or rest_base_problem(f"http://h{path}")
    if problem or not path.startswith("/"):
        raise EgressRefused(problem or f"'{path}' is not an absolute path", Reach.FORBIDDEN)
    return base.rstrip("/") + path


def _port(scheme: str, port: int | None) -> int:
    return port if port is not None else (443 if scheme == "https" else 80)


def redirect_problem(source: str, target: str) -> str | None:
    """Why a redirect from ``source`` to ``target`` is not followed: another host, another port (except
    http to https on 443), or https down to http; None when it stays on the same host."""
    before, after = urlsplit(source), urlsplit(target)
    old, new = before.scheme.lower(), after.scheme.lower()
    if normal_host(before.hostname or "") != normal_host(after.hostname or ""):
        return f"redirect to another host ({after.hostname}) not followed"
    if old == "https" and new != "https":
        return "redirect from https to http not followed"
    upgrade = old == "http" and new == "https" and _port(new, after.port) == 443
    if _port(old, before.port) != _port(new, after.port) and not upgrade:
        return f"redirect to another port ({_port(new, after.port)}) not followed"
    return None
