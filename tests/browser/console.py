"""What the browser tests drive: a ``toolmesh up`` of its own, and Debian's chromium through Playwright.

The browser is ``/usr/bin/chromium`` (Debian's ``chromium`` package; the test session installs it when
it can, ``tests/browser/chromium.py``), never a browser Playwright downloads. Screenshots go to
``screenshots/`` at the top of the repository (ignored by git), or to ``$TOOLMESH_SCREENSHOTS``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import BrowserContext, Page, expect

from toolmesh.platform import processes
from toolmesh.platform.polling import wait_until
from toolmesh_cli.embedded import free_port

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("TOOLMESH_SCREENSHOTS") or ROOT / "screenshots")
TOOLMESH = shutil.which("toolmesh", path=str(Path(sys.executable).parent)) or "toolmesh"
START_SECONDS = 120.0
STOP_SECONDS = 30.0


@dataclass
class Toolmesh:
    """A running ``toolmesh up``: its URL, the owner's token, and an API client with it."""

    process: subprocess.Popen[bytes]
    url: str
    token: str
    log: Path

    def api(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30)

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.api() as api:
            response = api.post("/api/v1/aggregator/servers", json=body)
            assert response.status_code == 201, response.text
            created: dict[str, Any] = response.json()
            return created

    def wait_connected(self, server_id: str) -> dict[str, Any]:
        with self.api() as api:

            def connected() -> dict[str, Any] | None:
                server: dict[str, Any] = api.get(f"/api/v1/aggregator/servers/{server_id}").json()
                return server if server["status"] == "CONNECTED" and server["tool_count"] > 0 else None

            if server := wait_until(connected, START_SECONDS, interval=0.2):
                return server
        raise AssertionError(f"{server_id} did not connect:\n{self.log.read_text()[-3000:]}")

    def wait_searchable(self, query: str, tool: str) -> None:
        """Poll until a search for ``query`` finds ``tool`` (its namespaced name) with the skills the
        classifier gave it."""
        with self.api() as api:

            def found() -> bool:
                hits: dict[str, Any] = api.post("/api/v1/search", json={"query": query, "limit": 50}).json()
                return any(t["name"] == tool and t["skill_ids"] for t in hits.get("tools") or [])

            if wait_until(found, START_SECONDS, interval=0.2):
                return
        raise AssertionError(f"a search for {query!r} never found {tool} with skills:\n{self.log.read_text()[-3000:]}")


def start_toolmesh(
    data_dir: Path, log: Path, settings: Mapping[str, str] | None = None, port: int | None = None
) -> Toolmesh:
    """``toolmesh up`` on ``port`` (default: a free one) with its own data dir (and ``settings``,
    ``TOOLMESH_*`` variables); returns once the API answers."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLMESH_", "MCP_AGGREGATOR_"))}
    env.update(settings or {})
    env.update(TOOLMESH_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    with log.open("ab") as out:
        process = processes.spawn(
            [TOOLMESH, "up", "--data-dir", str(data_dir), "--port", str(port)], env=env, stdout=out
        )
    url = f"http://127.0.0.1:{port}"
    token_file = data_dir / "admin-token"

    def answering() -> str | None:
        """The owner's token once the API accepts it."""
        assert process.poll() is None, f"toolmesh up exited:\n{log.read_text()}"
        if not token_file.exists():
            return None
        token = token_file.read_text().strip()
        me = httpx.get(f"{url}/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
        return token if me.is_success else None

    if token := wait_until(answering, START_SECONDS, interval=0.2, retry_on=(httpx.TransportError,)):
        return Toolmesh(process, url, token, log)
    processes.stop_sync(process, signal.SIGKILL, 0)
    raise AssertionError(f"toolmesh up did not answer within {START_SECONDS:.0f} s:\n{log.read_text()}")


def stop_toolmesh(running: Toolmesh) -> None:
    """SIGTERM, and SIGKILL if it does not stop in time."""
    processes.stop_sync(running.process, signal.SIGTERM, STOP_SECONDS)


def launch_chromium(playwright: Any, executable: Path, profile: Path) -> BrowserContext:
    """Debian's chromium at ``executable``, headless, with a fresh profile."""
    context: BrowserContext = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=str(executable),
        headless=True,
        args=FLAGS,
        viewport={"width": 1280, "height": 860},
    )
    return context


class Console:
    """One browser tab on the console, signed in or not."""

    def __init__(self, page: Page, toolmesh: Toolmesh) -> None:
        self.page = page
        self.toolmesh = toolmesh
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, route: str = "") -> None:
        self.page.goto(f"{self.toolmesh.url}/ui/{'#/' + route if route else ''}")

    def sign_in(self, token: str) -> None:
        self.open()
        self.page.get_by_label("API key").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_role("button", name="Sign out")).to_be_visible()
        expect(self.page.locator("#feed")).to_have_text("Live")

    def go(self, route: str) -> None:
        """Follow the app's own navigation (no page load)."""
        self.page.evaluate("route => { location.hash = '#/' + route }", route)
        expect(self.page.locator("#page-title")).to_be_focused()

    def nav(self) -> list[str]:
        return self.page.get_by_role("navigation", name="Main").get_by_role("link").all_inner_texts()

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def unlabelled(self) -> list[str]:
        """Form controls on the page without a label (there should be none)."""
        found: list[str] = self.page.evaluate(
            """() => [...document.querySelectorAll('input, select, textarea, button')]
                .filter(el => el.offsetParent !== null)
                .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                              && !el.getAttribute('aria-labelledby')
                              && !(el.tagName === 'BUTTON' && el.textContent.trim()))
                .map(el => el.outerHTML.slice(0, 120))"""
        )
        return found
