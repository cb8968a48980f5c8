"""The ``mcp`` SDK's OAuth client provider at work, for the browser tests: the token storage it keeps
tokens in, the loopback redirect URI whose answers it awaits (``callback_handler``), and the person
in headless Chromium it sends to the authorization URL (``redirect_handler``), who signs the
console's consent page with an API key and allows or denies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken
from playwright.async_api import BrowserContext, async_playwright, expect

from tests.browser.console import FLAGS
from tests.browser.oauth_client import Loopback, loopback

WAIT_MS = 60_000
ANSWER_SECONDS = 120.0


class MemoryStorage:
    """``TokenStorage`` in memory; keeps every token set it was given, newest last."""

    def __init__(self) -> None:
        self.tokens: list[OAuthToken] = []
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens[-1] if self.tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Callback:
    """The client's loopback redirect URI, its authorization responses queued as they arrive."""

    def __init__(self, target: Loopback) -> None:
        self.target = target
        self._answers: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def arrived(path: str) -> None:
            if urlsplit(path).path == urlsplit(target.redirect_uri).path:  # not the browser's /favicon.ico
                loop.call_soon_threadsafe(self._answers.put_nowait, _query(path))

        target.arrived = arrived

    @property
    def redirect_uri(self) -> str:
        return self.target.redirect_uri

    async def code(self) -> AuthorizationCodeResult:
        """The SDK's ``callback_handler``: code, state and issuer of the next authorization response
        (the wait is bounded only to end a hang)."""
        async with asyncio.timeout(ANSWER_SECONDS):
            answer = await self._answers.get()
        assert "code" in answer, f"the authorization response carries no code: {answer}"
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))


def _query(path: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(path).query).items()}


@contextlib.asynccontextmanager
async def callback() -> AsyncIterator[Callback]:
    """A loopback redirect URI on a free port, stopped on exit."""
    with loopback() as target:
        yield Callback(target)


class ConsentBrowser:
    """A person at headless Chromium who opens authorization URLs and answers the consent page."""

    def __init__(self, context: BrowserContext, api_key: str) -> None:
        self.context = context
        self.api_key = api_key
        self.opened: list[str] = []
        self.errors: list[str] = []

    async def allow(self, authorization_url: str) -> None:
        """The SDK's ``redirect_handler``: open the URL, sign in with the API key, allow; returns
        once the browser has reached the client's redirect URI."""
        await self.decide(authorization_url, "Allow")

    async def decide(self, authorization_url: str, button: str) -> str:
        """Open ``authorization_url`` in a new tab (signed out), sign in on the consent page with the
        API key, press ``button`` and wait until the browser left the gateway; returns where it went."""
        self.opened.append(authorization_url)
        page = await self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        gateway = urlsplit(authorization_url).netloc
        try:
            await page.goto(authorization_url)
            await page.get_by_label("API key", exact=True).fill(self.api_key)
            await page.get_by_role("button", name="Sign in").click()
            answer = page.get_by_role("button", name=button, exact=True)
            await expect(answer).to_be_enabled()
            await answer.click()
            await page.wait_for_url(lambda url: urlsplit(url).netloc != gateway)
            return page.url
        finally:
            await page.close()


@contextlib.asynccontextmanager
async def chromium_context(executable: Path, profile: Path) -> AsyncIterator[BrowserContext]:
    """Debian's chromium at ``executable``, headless, with a fresh profile (Playwright's async API)."""
    async with async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(profile), executable_path=str(executable), headless=True, args=FLAGS
        )
        context.set_default_timeout(WAIT_MS)
        try:
            yield context
        finally:
            await context.close()
