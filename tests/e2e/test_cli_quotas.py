"""``toolmesh quotas`` against a real ``toolmesh up``: set (create, then change in place), list with
usage, refused for a user key, remove."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_up import Up, answering

pytestmark = pytest.mark.e2e
HEADERS = ["SCOPE", "TARGET", "NAMESPACE", "MINUTE", "DAY", "MONTH", "ID"]


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with answering(tmp_path) as running:
        yield running


def test_quotas_are_set_listed_with_usage_changed_in_place_and_removed(up: Up) -> None:
    created = up.cli_json("quotas", "set", "key", "ci-bot", "--per-day", "5", "--per-month", "100")
    assert (created["scope"], created["target"], created["per_day"], created["per_month"]) == ("key", "ci-bot", 5, 100)
    listed = [line.split() for line in up.cli("quotas", "list").stdout.splitlines()]
    assert listed == [HEADERS, ["key", "ci-bot", "default", "-", "0/5", "0/100", created["id"]]]
    changed = up.cli_json("quotas", "set", "key", "ci-bot", "--per-day", "7")
    assert (changed["id"], changed["per_day"], changed["per_month"]) == (created["id"], 7, None)

    user = up.cli_json("keys", "create", "ci-bot", "--role", "user")
    refused = up.cli("quotas", "set", "key", "ci-bot", "--per-day", "1000", "--token", user["token"], expect=1)
    assert "FORBIDDEN" in refused.stderr
    assert up.cli_json("quotas", "list", "--token", user["token"])[0]["per_day"] == 7  # seen, unchanged

    assert up.cli("quotas", "remove", created["id"]).stdout.strip() == f"removed quota {created['id']}"
    assert up.cli_json("quotas", "list") == []
