"""A call a real ``require_approval`` policy holds, decided on the console's "Call approvals" page in a
real headless Chromium: approved, it returns the upstream's result; rejected, 403 ``APPROVAL_REJECTED``
with the approver's comment; undecided, 408 ``APPROVAL_TIMEOUT`` at its deadline. The upstream (the
repository host, which writes down every call it runs) sees the approved call only."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, async_playwright, expect

from tests.browser.console import FLAGS
from tests.harness import ADMIN_TOKEN, System, running_system
from tests.peers.repo_host import read_calls

pytestmark = pytest.mark.browser
WAIT_MS = 60_000
PEER = Path(__file__).resolve().parents[1] / "peers" / "repo_host.py"
CALL = "/api/v1/tools/call"
APPROVAL_TIMEOUT = 30.0
"""The approval deadline here: short, so the undecided call ends within the test."""
DESTRUCTIVE_NEEDS_APPROVAL = {
    "name": "destructive-needs-approval",
    "expression": "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint == true",
    "effect": "require_approval",
    "reason": "Destructive tools need a human's approval",
}


@pytest.fixture
async def ledger(tmp_path: Path) -> Path:
    """The file the repository host writes each call it runs to."""
    (tmp_path / "ledger").mkdir()  # searchable by the sandboxed child's own uid
    path = tmp_path / "ledger" / "calls.log"
    path.touch()
    path.chmod(0o666)
    return path


@pytest.fixture
async def system(nats_url: str, database_url: str, ledger: Path) -> AsyncIterator[System]:
    config = {
        "command": sys.executable,
        "args": [str(PEER)],
        "env": {"REPO_HOST_LEDGER": str(ledger)},
        "sandbox": {"paths_read_write": [str(ledger.parent)]},
    }
    async with running_system(nats_url, database_url, approval_timeout_seconds=APPROVAL_TIMEOUT) as running:
        created = await running.register("github", "STDIO", config)
        await running.wait_connected(created["id"])
        assert (await running.api.post("/api/v1/policies", json=DESTRUCTIVE_NEEDS_APPROVAL)).status_code == 201
        yield running


def held(api: httpx.AsyncClient, repo: str) -> asyncio.Task[httpx.Response]:
    """A REST call of ``github.delete_repo`` (which the policy holds), waiting in a task of its own."""
    return asyncio.create_task(api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": repo}}))


async def shown(page: Page, repo: str) -> None:
    """Wait for the console to show the held call of ``repo`` (it lists new approvals live)."""
    card = page.locator("section", has=page.get_by_role("heading", name="github.delete_repo by dev"))
    await expect(card).to_contain_text(f'"name": "{repo}"')
    await expect(card).to_contain_text("Destructive tools need a human's approval")


async def test_a_held_call_completes_after_a_console_approval_and_is_refused_otherwise(
    system: System, chromium: Path, tmp_path: Path, ledger: Path
) -> None:
    token = (await system.create_key("dev", "user"))["token"]
    headers = {"Authorization": f"Bearer {token}"}
    caller = httpx.AsyncClient(base_url=str(system.api.base_url), headers=headers, timeout=APPROVAL_TIMEOUT + 30)
    async with caller as api, async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(chromium), headless=True, args=FLAGS
        )
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(f"http://{system.settings.host}:{system.settings.port}/ui/")
        await page.get_by_label("API key").fill(ADMIN_TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await page.get_by_role("link", name="Call approvals").click()
        nothing_waits = page.get_by_text("No tool call is waiting for a decision.")
        await expect(nothing_waits).to_be_visible()

        approved = held(api, "a")
        await shown(page, "a")
        assert read_calls(ledger) == []  # held before the upstream
        await page.get_by_role("button", name="Approve github.delete_repo by dev").click()
        answer = await asyncio.wait_for(approved, 30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"][0]["text"] == "deleted a", answer.text
        await expect(nothing_waits).to_be_visible()

        rejected = held(api, "b")
        await shown(page, "b")
        await page.get_by_label("Comment (optional)").fill("not this one")
        await page.get_by_role("button", name="Reject github.delete_repo by dev").click()
        answer = await asyncio.wait_for(rejected, 30)
        assert answer.status_code == 403 and answer.json()["error_code"] == "APPROVAL_REJECTED", answer.text
        assert "not this one" in answer.json()["detail"], answer.text
        await expect(nothing_waits).to_be_visible()

        expired = held(api, "c")
        await shown(page, "c")  # shown, and nobody decides
        answer = await asyncio.wait_for(expired, APPROVAL_TIMEOUT + 30)
        assert answer.status_code == 408 and answer.json()["error_code"] == "APPROVAL_TIMEOUT", answer.text
        await expect(nothing_waits).to_be_visible()
        assert errors == [], errors
        await context.close()
    assert read_calls(ledger) == [("delete_repo", {"name": "a"})]
