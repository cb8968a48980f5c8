"""The browser of the browser tests: ``/usr/bin/chromium``, Debian's ``chromium`` package.

When it is missing and the test session can install it (root, with ``apt-get``), the session installs
it before the first browser test, under a file lock so that parallel sessions install it once; the
output of ``apt-get`` goes to ``.cache/chromium-install.log``. When it cannot, the browser tests fail
with one message saying what to install. Playwright never downloads a browser.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_HINT = "apt-get install -y chromium"
LOCK = Path(tempfile.gettempdir()) / "toolmesh-chromium-install.lock"
LOG = Path(__file__).resolve().parents[2] / ".cache" / "chromium-install.log"
INSTALL_SECONDS = 1800
TAIL_LINES = 20


class ChromiumUnavailable(RuntimeError):
    """``/usr/bin/chromium`` is missing and could not be installed."""


@dataclass(frozen=True)
class Provision:
    """What the session does about the browser: nothing, run ``commands`` with ``env``, or fail with ``problem``."""

    commands: tuple[tuple[str, ...], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    problem: str = ""


def plan(present: bool, uid: int, which: Callable[[str], str | None]) -> Provision:
    """Decide from whether the browser is there, the effective uid and where ``which`` finds ``apt-get``."""
    if present:
        return Provision()
    apt_get = which("apt-get")
    if apt_get is None:
        return Provision(
            problem=f"{CHROMIUM} is missing and there is no apt-get to install it: the browser tests need "
            f"Debian's chromium package ({INSTALL_HINT}), or a Chromium at {CHROMIUM}"
        )
    if uid != 0:
        return Provision(
            problem=f"{CHROMIUM} is missing and the tests do not run as root, so they cannot install it: "
            f"run `sudo {INSTALL_HINT}` (Debian's chromium package), then the tests again"
        )
    return Provision(
        commands=((apt_get, "update", "-q"), (apt_get, "install", "-y", "-q", "chromium")),
        env={"DEBIAN_FRONTEND": "noninteractive"},
    )


def _present() -> bool:
    return os.access(CHROMIUM, os.X_OK)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (waiting for another process that holds it)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: tuple[str, ...], env: Mapping[str, str], log: Path) -> None:
    """Run ``command`` with its output appended to ``log``; ChromiumUnavailable when it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(
                command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_SECONDS
            )
        except subprocess.TimeoutExpired as exc:
            raise ChromiumUnavailable(f"{' '.join(command)} did not finish in {INSTALL_SECONDS} s; see {log}") from exc
    if done.returncode != 0:
        with log.open("rb") as written:
            written.seek(start)
            tail = "\n".join(written.read().decode(errors="replace").splitlines()[-TAIL_LINES:])
        raise ChromiumUnavailable(
            f"installing Debian's chromium failed: {' '.join(command)} exited with {done.returncode} "
            f"(whole output in {log}):\n{tail}\nInstall it by hand ({INSTALL_HINT}) and run the tests again"
        )


def provide(log: Path = LOG) -> Path:
    """``/usr/bin/chromium``, installed first when it is missing and this process can; else ChromiumUnavailable."""
    first = plan(_present(), os.geteuid(), shutil.which)
    if first.problem:
        raise ChromiumUnavailable(first.problem)
    if first.commands:
        with _locked(LOCK):
            # Planned again under the lock: a parallel session may have installed it meanwhile.
            install = plan(_present(), os.geteuid(), shutil.which)
            for command in install.commands:
                _run(command, install.env, log)
        if not _present():
            raise ChromiumUnavailable(f"apt-get installed chromium, yet {CHROMIUM} is still missing; see {log}")
    return CHROMIUM
