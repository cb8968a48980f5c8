"""Leases are renewed well before they expire: a renewal no sooner than the TTL loses the lease now
and then, and the session-worker then closes a server's session (and kills its STDIO child) while the
server still reads CONNECTED; ``TOOLMESH_LEASE_TTL_SECONDS=3`` alone did that with the 3 s renewal."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolmesh.platform.config import Settings


def test_a_short_ttl_alone_gets_a_renewal_below_half_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLMESH_LEASE_TTL_SECONDS", "3")
    settings = Settings()
    assert settings.lease_renew_seconds < settings.lease_ttl_seconds / 2


def test_the_default_ttl_keeps_the_default_renewal() -> None:
    settings = Settings()
    assert settings.lease_ttl_seconds == 10.0 and settings.lease_renew_seconds == 3.0


@pytest.mark.parametrize("renew", [1.5, 3.0, 9.0])
def test_a_renewal_not_below_half_the_ttl_is_refused(monkeypatch: pytest.MonkeyPatch, renew: float) -> None:
    monkeypatch.setenv("TOOLMESH_LEASE_TTL_SECONDS", "3")
    monkeypatch.setenv("TOOLMESH_LEASE_RENEW_SECONDS", str(renew))
    with pytest.raises(ValidationError, match=r"lease_renew_seconds .* must be below half of lease_ttl_seconds"):
        Settings()


def test_a_renewal_below_half_the_ttl_is_kept() -> None:
    assert Settings(lease_ttl_seconds=1.5, lease_renew_seconds=0.3).lease_renew_seconds == 0.3
