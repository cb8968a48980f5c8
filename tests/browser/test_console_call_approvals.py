"""A tool call waiting for approval is approved (and another rejected with a comment) on the console's
"Call approvals" page, in a real headless Chromium against the in-process system: the waiting calls
return, or fail with the approver's comment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import async_playwright, expect

from tests.approval_calls import gate_on, pending_call, started, waiting
from tests.browser.console import FLAGS, SCREENSHOTS
from tests.harness import ADMIN_TOKEN, System, running_system
from toolmesh.errors import ApprovalRejected

pytestmark = pytest.mark.browser
WAIT_MS = 60_000


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as running:
        yield running


async def test_an_approver_approves_and_rejects_calls_in_the_console(
    system: System, chromium: Path, tmp_path: Path
) -> None:
    gate = await gate_on(system)
    approved = await started(gate, pending_call("agent-yes"))
    rejected = await started(gate, pending_call("agent-no"))
    await waiting(system.api, "agent-yes")
    await waiting(system.api, "agent-no")
    async with async_playwright() as driver:
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
        card = page.locator("section", has=page.get_by_role("heading", name="files.delete_file by agent-yes"))
        await expect(card).to_contain_text("/srv/data/report.csv")
        await expect(card).to_contain_text("delete_file is destructive")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SCREENSHOTS / "call-approvals.png"), full_page=True)
        await page.get_by_role("button", name="Approve files.delete_file by agent-yes").click()
        await asyncio.wait_for(approved, 30)
        other = page.locator("section", has=page.get_by_role("heading", name="files.delete_file by agent-no"))
        await expect(card).to_have_count(0)
        await other.get_by_label("Comment (optional)").fill("not on a Friday")
        await page.get_by_role("button", name="Reject files.delete_file by agent-no").click()
        with pytest.raises(ApprovalRejected, match="not on a Friday"):
            await asyncio.wait_for(rejected, 30)
        await expect(page.get_by_text("No tool call is waiting for a decision.")).to_be_visible()
        await expect(page.locator("tbody tr")).to_have_count(2)
        assert errors == [], errors
        await context.close()
