"""The data directory of ``toolmesh up``: an exclusive lock and the secrets kept there."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

LOCK_FILE = "toolmesh.lock"
ENDPOINTS_FILE = "endpoints.json"
"""Where a running ``toolmesh up`` says how to reach it (``toolmesh_cli.endpoints``)."""


def _held(lock_file: Path) -> bool:
    """Whether a live process holds ``lock_file``'s ``flock`` (a ``toolmesh up`` on its data dir)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also gives back a lock taken just now
    return False


def running_api(data_dir: Path) -> str | None:
    """The HTTP base URL of the ``toolmesh up`` running on ``data_dir``; None when none runs there (an
    ``endpoints.json`` left by a killed run names a port anyone may listen on now)."""
    if not _held(data_dir / LOCK_FILE):
        return None
    try:
        found = json.loads((data_dir / ENDPOINTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    url = found.get("http") if isinstance(found, dict) else None
    return url if isinstance(url, str) and url else None


class DataDirInUse(RuntimeError):
    """Another live ``toolmesh up`` holds this data directory."""


class DataDirLock:
    """An ``flock`` on ``<data_dir>/toolmesh.lock``: released by the kernel when the holder dies,
    so a ``kill -9``'d run never blocks the next start."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``DataDirInUse``."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise DataDirInUse(f"{self._path.parent} is in use by another toolmesh process") from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Give the lock back."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def prepare_data_dir(path: Path) -> Path:
    """Create the data directory, or make an existing one private to the user (0700), and return
    its absolute path. (Run by root, the embedded Postgres's start lets its own user traverse it.)"""
    path = path.expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def load_or_create_secret(path: Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The secret stored at ``path`` (mode 0600), creating it with ``make`` if missing.

    Returns the secret and whether it was created now.
    """
    if path.exists():
        return path.read_text().strip(), False
    secret = make()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret, True
