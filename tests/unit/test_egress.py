"""The egress policy's rules (``toolmesh.egress.policy``): every spelling of an address is that address."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.egress.policy import (
    EgressPolicy,
    EgressRefused,
    Reach,
    address_reach,
    name_reach,
    parse_address,
    redirect_problem,
    rest_base_problem,
    rest_endpoint,
    url_problem,
)

METADATA_SPELLINGS = [
    "169.254.169.254",
    "169.254.169.254.",  # trailing dot
    "2852039166",  # decimal
    "0251.0376.0251.0376",  # octal
    "0xa9fea9fe",  # hex
    "0xA9.0xFE.0xA9.0xFE",
    "0251.254.43518",  # octal and a 16-bit last part
    "169.16689662",  # a 24-bit last part
    "[::ffff:169.254.169.254]",  # IPv4-mapped IPv6
    "::ffff:a9fe:a9fe",
    "[::a9fe:a9fe]",  # IPv4-compatible
    "64:ff9b::169.254.169.254",  # NAT64
    "2002:a9fe:a9fe::1",  # 6to4
    "fe80::1",
    "[fe80::1%25eth0]",  # zone id
    "fd00:ec2::254",  # AWS over IPv6
    "100.100.100.200",  # Alibaba
    "192.0.0.192",  # Oracle
    "168.63.129.16",  # Azure wire server
    "metadata.google.internal",
    "METADATA.GOOGLE.INTERNAL.",
    "metadata.goog",
    "instance-data.ec2.internal",
]
LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",  # short form
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "017700000001",
    "127.0.0.1.",
    "[::1]",
    "::ffff:127.0.0.1",
    "[::ffff:7f00:1]",
    "localhost",
    "LOCALHOST.",
    "api.localhost",
    "0.0.0.0",
    "0",
    "[::]",
]
PRIVATE_ADDRESSES = ["10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "fd12:3456::1", "[::ffff:10.1.2.3]"]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_link_local_and_metadata_are_forbidden_in_every_spelling(host: str) -> None:
    assert name_reach(host) is Reach.FORBIDDEN
    for policy in (EgressPolicy(), EgressPolicy(private=True), EgressPolicy.of(True, ("0.0.0.0/0", "::/0"))):
        assert not policy.allows(Reach.FORBIDDEN)


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS + PRIVATE_ADDRESSES)
def test_loopback_and_private_need_an_admin_in_every_spelling(host: str) -> None:
    assert name_reach(host) is Reach.PRIVATE
    assert not EgressPolicy().allows(Reach.PRIVATE)
    assert EgressPolicy(private=True).allows(Reach.PRIVATE)


@pytest.mark.parametrize("host", ["8.8.8.8", "2606:4700:4700::1111", "64:ff9b::8.8.8.8", "[::ffff:8.8.8.8]"])
def test_public_addresses_are_public_in_every_spelling(host: str) -> None:
    assert name_reach(host) is Reach.PUBLIC


def test_spellings_read_as_inet_aton_reads_them() -> None:
    assert parse_address("2852039166") == ipaddress.ip_address("169.254.169.254")
    assert parse_address("0251.0376.0251.0376") == ipaddress.ip_address("169.254.169.254")
    assert parse_address("127.1") == ipaddress.ip_address("127.0.0.1")
    assert parse_address("10.1.258") == ipaddress.ip_address("10.1.1.2")
    assert parse_address("example.com") is None
    assert parse_address("1e100.net") is None


@pytest.mark.parametrize("host", ["1.2.3.999", "1.2.3.4.5", "08.1.1.1", "256.1", "0x100.1", "fe80::zz"])
def test_a_host_that_looks_like_an_address_but_is_none_is_refused(host: str) -> None:
    with pytest.raises(EgressRefused):
        parse_address(host)


def test_a_name_is_judged_by_what_it_resolves_to() -> None:
    assert name_reach("mcp.example.com") is None


def test_operator_networks_open_private_addresses_to_every_registrar_but_never_metadata() -> None:
    policy = EgressPolicy.of(False, ("10.20.0.0/16", "169.254.0.0/16"))
    inside, outside = ipaddress.ip_address("10.20.1.1"), ipaddress.ip_address("10.21.1.1")
    assert policy.allows(address_reach(inside), inside)
    assert not policy.allows(address_reach(outside), outside)
    metadata = ipaddress.ip_address("169.254.169.254")
    with pytest.raises(EgressRefused) as refused:
        policy.check("metadata", metadata)
    assert refused.value.reach is Reach.FORBIDDEN


def test_check_names_the_host_and_the_address_it_resolved_to() -> None:
    with pytest.raises(EgressRefused, match=r"'rebind.example' \(127.0.0.1\) is a loopback or private address"):
        EgressPolicy().check("rebind.example", ipaddress.ip_address("127.0.0.1"))


@pytest.mark.parametrize(
    "url",
    [
        "http://2852039166/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "http://a\\@169.254.169.254/",  # parsers disagree on the host
        "http://%31%36%39.254.169.254/",  # percent-encoded host
        "ftp://example.com/",
        "http:///nohost",
    ],
)
def test_urls_refused_for_everyone(url: str) -> None:
    assert url_problem(url) is not None


@pytest.mark.parametrize("url", ["https://mcp.example.com/sse", "http://127.0.0.1:8080/mcp", "https://[::1]/x"])
def test_urls_left_to_the_role_and_the_resolver(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://tools.example.com/api?x=",  # the fixed path would land in the query
        "https://tools.example.com/api#",
        "https://tools.example.com/api/../admin",
        "https://tools.example.com/api/%2e%2e/admin",
        "https://tools.example.com/api%2fadmin",
        "https://tools.example.com/api%5c..",
    ],
)
def test_rest_base_urls_that_bend_the_path_are_refused(url: str) -> None:
    assert rest_base_problem(url) is not None
    with pytest.raises(EgressRefused):
        rest_endpoint(url, "/tools")


def test_rest_endpoints_stay_under_the_base_path() -> None:
    assert (
        rest_endpoint("https://tools.example.com/api/", "/tools/execute")
        == "https://tools.example.com/api/tools/execute"
    )
    for path in ("/../metrics", "tools", "/%2e%2e/metrics", "/tools?x=1"):
        with pytest.raises(EgressRefused):
            rest_endpoint("https://tools.example.com/api", path)


@pytest.mark.parametrize(
    ("source", "target", "followed"),
    [
        ("http://a.example/x", "http://a.example/y", True),
        ("http://a.example/x", "https://a.example/y", True),  # upgrade to https on 443
        ("https://a.example/x", "http://a.example/y", False),  # downgrade
        ("http://a.example/x", "http://b.example/y", False),
        ("http://127.0.0.1:8000/x", "http://127.0.0.1:9000/metrics", False),
        ("http://127.0.0.1:8000/x", "http://localhost:8000/x", False),
        ("http://A.example./x", "http://a.example/y", True),
    ],
)
def test_redirects_are_followed_on_the_same_host_only(source: str, target: str, followed: bool) -> None:
    assert (redirect_problem(source, target) is None) is followed


def test_registration_refuses_metadata_and_bent_rest_urls_for_every_role() -> None:
    cases = [
        ("SSE", {"url": "http://0xa9fea9fe/sse"}, None, ("connection_config", "url")),
        ("HTTP", {"base_url": "http://[::ffff:169.254.169.254]/mcp"}, None, ("connection_config", "base_url")),
        ("REST", {"url": "https://tools.example.com/api?x="}, None, ("connection_config", "url")),
        ("SSE", {"url": "https://mcp.example.com/sse"}, "http://0251.0376.0251.0376/", ("health_check_url",)),
    ]
    for transport, config, health, loc in cases:
        with pytest.raises(ValidationError) as refused:
            RegisterServerRequest.model_validate(
                {
                    "name": "x",
                    "transport_type": transport,
                    "connection_config": config,
                    "health_check_url": health,
                    "allow_insecure": True,
                }
            )
        assert [e["loc"] for e in refused.value.errors()] == [loc]
