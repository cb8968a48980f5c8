"""``@modelcontextprotocol/server-everything`` (npm) as a test peer, bound to 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from .launch import PeerInfo, free_port, running_process

PACKAGE = "@modelcontextprotocol/server-everything"
CACHE_DIR = Path(os.environ.get("TOOLMESH_TEST_CACHE", Path.home() / ".cache" / "toolmesh-tests")) / "npm"
TRANSPORT_ARG = {"stdio": "stdio", "sse": "sse", "http": "streamableHttp"}
URL_PATH = {"sse": "/sse", "http": "/mcp"}


class EverythingUnavailable(RuntimeError):
    """node/npm is missing or the package could not be installed."""


def repo_root() -> Path:
    """The directory holding pyproject.toml."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    raise RuntimeError("pyproject.toml not found above tests/peers")


def loopback_preload() -> Path:
    """The Node preload that rewrites listen(PORT) to listen(PORT, "127.0.0.1").

    It lives in ``shared/tools`` next to the checkout, or further up for a worktree.
    """
    for parent in repo_root().parents:
        candidate = parent / "shared" / "tools" / "loopback.cjs"
        if candidate.is_file():
            return candidate
    raise EverythingUnavailable("shared/tools/loopback.cjs not found above the checkout")


def install_everything(cache_dir: Path = CACHE_DIR) -> Path:
    """Install the package once into ``cache_dir`` (skipped when present); return its entry script."""
    entry = cache_dir / "node_modules" / PACKAGE / "dist" / "index.js"
    if entry.is_file():
        return entry
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise EverythingUnavailable("node and npm are needed for server-everything")
    cache_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache_dir), PACKAGE],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not entry.is_file():
        raise EverythingUnavailable(f"npm install {PACKAGE} failed: {done.stderr[-2000:]}")
    return entry


def everything_version(cache_dir: Path = CACHE_DIR) -> str:
    """The version of the package ``install_everything`` installed."""
    manifest = install_everything(cache_dir).parent.parent / "package.json"
    version: str = json.loads(manifest.read_text())["version"]
    return version


def npx_cache(cache_dir: Path = CACHE_DIR) -> Path:
    """An npm cache holding the installed version and its dependencies, so ``npx -y
    PACKAGE@VERSION`` runs with ``npm_config_cache`` set to it and ``npm_config_offline=true``
    (filled once; npm's cache must be writable by whoever reads it)."""
    version = everything_version(cache_dir)
    cache = cache_dir.parent / "npx-cache"
    marker = cache / f"filled-{version}"
    if marker.is_file():
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise EverythingUnavailable("npm is needed to fill the npx cache")
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--cache",
                str(cache),
                "--prefix",
                scratch,
                f"{PACKAGE}@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode != 0:
        raise EverythingUnavailable(f"filling the npx cache failed: {done.stderr[-2000:]}")
    marker.write_text(version)
    return cache


@dataclass
class EverythingCommand:
    """How to start server-everything for one transport (``PORT`` is set for sse/http)."""

    command: str
    args: list[str]
    env: dict[str, str]


def everything_command(transport: str, *, port: int | None = None) -> EverythingCommand:
    """Command, arguments and environment for ``transport`` (stdio, sse or http)."""
    entry = install_everything()
    node = shutil.which("node") or "node"
    env = {"NODE_OPTIONS": f"--require {loopback_preload()}"}
    if port is not None:
        env["PORT"] = str(port)
    return EverythingCommand(node, [str(entry), TRANSPORT_ARG[transport]], env)


@asynccontextmanager
async def launch_everything(transport: str) -> AsyncIterator[PeerInfo]:
    """server-everything: for stdio the command to run; for sse/http a running process."""
    if transport == "stdio":
        spec = everything_command("stdio")
        yield PeerInfo("stdio", command=spec.command, args=spec.args, env=spec.env)
        return
    port = free_port()
    spec = everything_command(transport, port=port)
    async with running_process([spec.command, *spec.args], port=port, env=spec.env) as process:
        yield PeerInfo(transport, url=f"http://127.0.0.1:{port}{URL_PATH[transport]}", process=process)
