"""TOOLMESH_NATS_URL with several servers of one cluster (seed URLs): each one a server of the pool, shown
masked, and the credentials of a URL kept for the servers the client learns of later."""

from __future__ import annotations

from toolmesh.platform.bus.connection import seed_urls, shown_urls, url_credentials


def test_a_comma_separated_url_is_one_seed_per_server() -> None:
    url = "nats://a:4222, nats://b:4222,,nats://c:4222 "
    assert seed_urls(url) == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert seed_urls("nats://a:4222") == ["nats://a:4222"]


def test_every_seed_is_shown_without_its_credentials() -> None:
    shown = shown_urls("nats://u:secret@a:4222,nats://u:secret@b:4222")
    assert "secret" not in shown and shown.count("a:4222") == 1 and shown.count("b:4222") == 1


def test_the_credentials_of_a_seed_url_are_given_to_every_server() -> None:
    assert url_credentials(["nats://a:4222", "nats://u:p%40ss@b:4222"]) == {"user": "u", "password": "p@ss"}
    assert url_credentials(["nats://tok@a:4222"]) == {"token": "tok"}
    assert url_credentials(["nats://a:4222"]) == {}
