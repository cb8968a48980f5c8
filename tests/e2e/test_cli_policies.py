"""``toolmesh policies`` against a real ``toolmesh up``: add a preset and a written policy, list them,
refuse a bad expression, show a policy's versions, remove it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_up import Up, answering

pytestmark = pytest.mark.e2e


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with answering(tmp_path) as running:
        yield running


def test_policies_add_list_show_and_remove(up: Up) -> None:
    preset = up.cli_json("policies", "add", "--preset", "destructive-needs-approval", "--namespace", "default")
    assert (preset["name"], preset["effect"], preset["namespace"]) == (
        "destructive-needs-approval",
        "require_approval",
        "default",
    )
    written = up.cli_json(
        "policies", "add", "no-etc", "--expression", 'args.path.startsWith("/etc")', "--effect", "deny", "--global"
    )
    assert written["namespace"] is None and written["mode"] == "enforce"
    listed = {p["name"]: p for p in up.cli_json("policies", "list")}
    assert set(listed) == {"destructive-needs-approval", "no-etc"}
    bad = up.cli("policies", "add", "bad", "--expression", "1 +", "--effect", "deny", "--global", expect=None)
    assert bad.returncode == 1 and "VALIDATION_ERROR" in bad.stderr
    assert up.cli("policies", "remove", "no-etc").stdout.strip() == "removed policy no-etc"
    versions = up.cli_json("policies", "show", written["id"])
    assert [(v["version"], v["deleted"]) for v in versions] == [(2, True), (1, False)]
    assert [p["name"] for p in up.cli_json("policies", "list")] == ["destructive-needs-approval"]
